"""The Python examples in docs/subscribers.md run, and their tests pass."""

from __future__ import annotations

import asyncio
import inspect
import re
import sys
import types
from pathlib import Path

import pytest

DOC = Path(__file__).parent.parent / "docs" / "subscribers.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_the_subscribers_guide_examples_run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    alerts = types.ModuleType("alerts")
    exec(next(b for b in BLOCKS if b.startswith("# alerts.py")), alerts.__dict__)
    monkeypatch.setitem(sys.modules, "alerts", alerts)
    ran: list[str] = []
    namespace: dict[str, object] = {"__name__": "doc_example"}  # a block may use the last's
    for block in BLOCKS:
        exec(block, namespace)
        for name, fn in list(namespace.items()):
            if name.startswith("test_") and callable(fn) and name not in ran:
                wants = inspect.signature(fn).parameters
                result = fn(capsys) if "capsys" in wants else fn()
                if inspect.iscoroutine(result):
                    asyncio.run(result)
                ran.append(name)
    assert len(ran) >= 3, ran


def test_the_guide_names_every_field_of_the_match_state_and_the_testing_extra() -> None:
    import tomllib

    from events import MatchState

    text = DOC.read_text()
    table = text.split("### The match state", 1)[1].split("\n\n")[2]
    named = set(
        re.findall(r"`(\w+)`", "\n".join(line.split("|")[1] for line in table.splitlines()[2:]))
    )
    assert set(MatchState.model_fields) - {"schema_version"} <= named
    assert (
        "**1** first half, **2** second half, **3**\nand **4** the halves of extra time, **5**"
        in text
    )
    extras = tomllib.loads((DOC.parent.parent / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert {r.split(">")[0] for r in extras["testing"]} == {"pytest", "pytest-asyncio"}
    assert "pip install 'matchcast[testing]'" in text
