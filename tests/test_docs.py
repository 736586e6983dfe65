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
