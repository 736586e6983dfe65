"""The README keeps what a newcomer needs: two Quickstart commands, an architecture section
naming every package, and links that lead somewhere. (A docs edit once dropped five sections
of it unnoticed.)"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text()


def _section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.S | re.M)
    assert match is not None, f"README has no '## {title}' section"
    return match.group(1)


def test_the_quickstart_holds_exactly_two_commands() -> None:
    [block] = re.findall(r"```sh\n(.*?)```", _section("Quickstart"), re.S)
    commands = [line for line in block.splitlines() if line.strip()]
    assert len(commands) == 2
    assert commands[0].endswith("matchcast demo")
    assert commands[1].endswith("pytest -n auto --dist loadgroup")


def test_the_sections_users_look_for_are_there() -> None:
    for title in (
        "Topics and payloads",
        "Running against any broker",
        "Reliability",
        "Load testing",
        "Status",
    ):
        assert _section(title).strip(), title


def test_the_architecture_names_every_package() -> None:
    arch = ARCHITECTURE
    packages = sorted(
        p.name for p in ROOT.iterdir() if (p / "__init__.py").exists() and p.name != "tests"
    )
    assert packages == ["consumers", "events", "matchcast", "simulator"]
    for name in packages:
        assert f"`{name}/`" in arch, name


def test_relative_links_lead_to_files() -> None:
    links = re.findall(r"\]\((?!https?://|#)([^)#\s]+)", README)
    assert links
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, missing


def test_the_semifinal_figures_are_those_the_replayer_makes() -> None:
    """The README once said 100 clock ticks where the replayer makes 98."""
    from simulator import expand, resolve_matches

    stream = [s.event for s in expand(resolve_matches(None)[0])]
    ticks = sum(1 for e in stream if e.type == "clock")
    assert f"of every minute played ({ticks} for the semi-final" in " ".join(README.split())
    assert f"{len(stream)} events in all" in README


def test_the_exit_codes_are_documented_as_the_help_gives_them() -> None:
    text = " ".join(README.split())
    for needle in (
        "`watch`, `web`, `consume` and `broker` end (exit 0)",
        "`demo`, `replay` and `load` (exit 130",
    ):
        assert needle in text


def _readme_tree() -> dict[str, set[str]]:
    """The ``matchcast/`` tree of the architecture section: each folder's entries, by path
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
    tree = _readme_tree()
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
