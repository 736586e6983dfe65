"""The docs hold: the Python examples in docs/subscribers.md run and their tests pass; every
relative link leads to a file (and a heading, where it names one); the index lists every
guide; the architecture names exactly the modules; the figures are the replayer's; and no doc
narrates history (docs say what is; git and CHANGELOG.md say what changed)."""

from __future__ import annotations

import asyncio
import inspect
import re
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
DOC = ROOT / "docs" / "subscribers.md"
#: The prose a person reads: the README, CONTRIBUTING.md and every guide under docs/
#: (docs/asyncapi.yaml is generated, and CHANGELOG.md is where history belongs).
PROSE = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").rglob("*.md")])
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


#: Words that tell a story instead of saying what is (a line break may fall between them).
HISTORY = re.compile(
    r"issue\s+\d+|used\s+to|this\s+wave|Earlier\s+the\s+same\s+day|the\s+first\s+version"
    r"|(?-i:Before,\s)",
    re.I,
)


def _prose(path: Path) -> str:
    """The text of ``path`` outside fenced code blocks (a heading or link in code is code)."""
    return re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)


def test_no_doc_narrates_history() -> None:
    found = []
    for path in PROSE:
        text = path.read_text()
        for m in HISTORY.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append(f"{path.relative_to(ROOT)}:{line}: {' '.join(m.group().split())!r}")
    assert found == [], "\n".join(found)


def test_the_history_check_catches_what_it_is_for() -> None:
    for story in (
        "as discussed in Issue 16",
        "it used to raise",
        "after this wave's merges",
        "Earlier the same day, the probe",
        "The first version reached only 0.57x",
        "Before, `consume` ran on aiomqtt",
        "the load tester (issue\n4; measured)",
    ):
        assert HISTORY.search(story), story
    for fact in (
        "before each deadline",
        "a seq issued twice",
        "Before a byte is parsed",
        "or before, ",
    ):
        assert not HISTORY.search(fact), fact


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    anchors: set[str] = set()
    for heading in re.findall(r"^#+ (.+)$", _prose(path), re.M):
        slug, n = _slug(heading), 1
        while slug in anchors:  # a repeated heading gets -1, -2, ...
            slug, n = f"{_slug(heading)}-{n}", n + 1
        anchors.add(slug)
    return anchors


def _broken_links(paths: list[Path]) -> tuple[int, list[str]]:
    """How many relative links ``paths`` hold, and those that lead to no file, or to no
    heading of the Markdown file they name."""
    broken: list[str] = []
    checked = 0
    for path in paths:
        for target in re.findall(r"\]\(([^)\s]+)\)", _prose(path)):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            file, _, anchor = target.partition("#")
            dest = (path.parent / file).resolve() if file else path
            checked += 1
            if not dest.exists():
                broken.append(f"{path.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{path.relative_to(ROOT)}: {target} (no such heading)")
    return checked, broken


#: Generated by ``python -m matchcast.contract.wire_docs``: its links are checked apart.
WIRE_FORMAT = ROOT / "docs" / "wire-format.md"


def test_relative_links_lead_to_files_and_their_headings() -> None:
    checked, broken = _broken_links([p for p in PROSE if p != WIRE_FORMAT])
    assert checked > 100, checked
    assert broken == [], "\n".join(broken)


def test_the_generated_wire_format_links_lead_to_its_headings() -> None:
    checked, broken = _broken_links([WIRE_FORMAT])
    assert checked > 20, checked
    assert broken == [], "\n".join(broken)


def test_the_anchor_check_knows_githubs_slugs() -> None:
    assert _slug("Limits that remain, and why") == "limits-that-remain-and-why"
    assert _slug("The plug-in host: `matchcast consume`") == "the-plug-in-host-matchcast-consume"
    assert _slug("Who may control: the operator") == "who-may-control-the-operator"


def test_the_docs_index_lists_every_guide_once() -> None:
    index = (ROOT / "docs" / "README.md").read_text()
    entries = re.findall(r"^- \[[^\]]+\]\(([^)#]+)\):", index, re.M)
    guides = {p.name for p in (ROOT / "docs").glob("*.md")} - {"README.md"}
    listed = [e for e in entries if "/" not in e]
    assert sorted(listed) == sorted(guides | {"asyncapi.yaml"})
    assert {"../CONTRIBUTING.md", "../CHANGELOG.md"} <= set(entries)


def test_the_semifinal_figures_are_those_the_replayer_makes() -> None:
    """docs/match-format.md counts the semi-final's clock ticks and events as expand() does."""
    from simulator import expand, resolve_matches

    stream = [s.event for s in expand(resolve_matches(None)[0])]
    ticks = sum(1 for e in stream if e.type == "clock")
    text = " ".join((ROOT / "docs" / "match-format.md").read_text().split())
    assert f"every minute played ({ticks} for the semi-final" in text
    assert f"{len(stream)} events in all" in text


ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text()


def test_the_architecture_names_every_package() -> None:
    packages = sorted(
        p.name for p in ROOT.iterdir() if (p / "__init__.py").exists() and p.name != "tests"
    )
    assert packages == ["consumers", "events", "matchcast", "simulator"]
    for name in packages:
        assert f"`{name}/`" in ARCHITECTURE, name


def _architecture_tree() -> dict[str, set[str]]:
    """The ``matchcast/`` tree of docs/architecture.md: each folder's entries, by path
    (``""`` for ``matchcast/`` itself, ``"cli"`` for ``matchcast/cli/``)."""
    [block] = re.findall(r"```\n(matchcast/\n.*?)```", ARCHITECTURE, re.S)
    tree: dict[str, set[str]] = {"": set()}
    path: list[str] = []
    for line in block.splitlines()[1:]:
        entry = re.match(r"^([│ ]*)[├└]── (\S+)", line)
        if entry is None:
            continue
        depth, name = len(entry.group(1)) // 4, entry.group(2)
        path = path[:depth]
        tree.setdefault("/".join(path), set()).add(name.rstrip("/"))
        if name.endswith("/"):
            path.append(name.rstrip("/"))
            tree.setdefault("/".join(path), set())
    return tree


def test_the_architecture_tree_names_exactly_the_modules_under_matchcast() -> None:
    """Every module and folder it names exists, and it names every one: a folder's public
    modules each (a folder of private modules only, such as ``web/``, is described whole);
    ``__init__`` and ``__main__`` go without saying."""
    tree = _architecture_tree()
    assert {"", "cli", "app", "transport", "contract", "web", "load"} <= set(tree)
    for folder, named in tree.items():
        where = ROOT / "matchcast" / folder
        modules = {
            p.stem
            for p in where.glob("*.py")
            if p.stem not in ("__init__", "__main__") and not p.stem.startswith("_")
        }
        packages = {p.parent.name for p in where.glob("*/__init__.py")}
        assert named == {f"{m}.py" for m in modules} | packages, folder or "matchcast/"
