"""The README is for users: two Quickstart commands that CI runs, the three uses each with an
example, one short line per command, the figures and exit codes as the code gives them, and
no more than fits in one head. (Links, anchors and history: tests/test_docs.py.)"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import typer

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
TEXT = " ".join(README.split())


def _section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.S | re.M)
    assert match is not None, f"README has no '## {title}' section"
    return match.group(1)


def _quickstart_commands() -> list[str]:
    [block] = re.findall(r"```sh\n(.*?)```", _section("Quickstart"), re.S)
    return [line for line in block.splitlines() if line.strip()]


def test_the_quickstart_holds_exactly_two_commands() -> None:
    """The first makes a fresh venv and runs the demo; the second, in that venv, installs the
    development tools and runs the whole suite."""
    first, second = _quickstart_commands()
    assert first.startswith("python3 -m venv .venv && ")
    assert first.endswith(".venv/bin/matchcast demo")
    assert second.startswith(".venv/bin/pip install -q -e '.[dev]' && ")
    assert second.endswith(".venv/bin/pytest -n auto --dist loadgroup")


def test_ci_reads_the_quickstarts_test_command() -> None:
    """.ci/run takes its test command from the Quickstart block with awk: run that very awk."""
    awk = shutil.which("awk")
    assert awk is not None
    ci = (ROOT / ".ci" / "run").read_text()
    match = re.search(r"\$\(awk '([^']+)' README\.md\)", ci)
    assert match is not None, ".ci/run no longer reads the README with awk"
    found = subprocess.run(
        [awk, match.group(1), "README.md"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert found == _quickstart_commands()[1]


def test_the_readme_fits_in_one_head() -> None:
    lines = README.splitlines()
    assert len(lines) <= 250, len(lines)
    cells = [c.strip() for line in lines if line.startswith("|") for c in line.split(" | ")]
    longest = max(cells, key=len)
    assert len(longest) <= 200, longest


def test_it_says_how_long_the_test_suite_takes() -> None:
    assert re.search(r"about \d+ minutes on 2 cores", TEXT)


def test_the_three_uses_each_have_an_example() -> None:
    for title in ("Watch a live replay", "Plug in your own subscriber", "Load-test consumers"):
        section = _section(title)
        assert re.search(r"```(sh|console)\n.*?matchcast ", section, re.S), title


def test_every_command_has_one_line_in_the_commands_table() -> None:
    from matchcast.cli.host import command

    group = command()
    names = group.list_commands(typer.Context(group))
    assert {"demo", "replay", "watch", "load"} <= set(names)
    rows = [line for line in _section("Commands").splitlines() if line.startswith("| `")]
    for name in names:
        first, *rest = name.split()
        assert any(row.startswith(f"| `matchcast {first}") for row in rows), name
        if rest:  # a subcommand, such as ``load merge``: named in its group's row
            assert any(f"`{name}`" in row for row in rows), name


def test_the_figures_stated_are_those_the_replayer_makes() -> None:
    """The replay's last line, as the README quotes it, counts the events it really sends."""
    from simulator import expand, resolve_matches

    stream = [s.event for s in expand(resolve_matches(None)[0])]
    n = len(stream)
    assert f"`wc2026-sf-arg-eng: ARG 2-1 ENG ({n} events, seq 1-{n})`" in TEXT


def test_the_exit_codes_are_documented_as_the_help_gives_them() -> None:
    from matchcast.cli.host import EXIT_CODES

    for needle in (
        "`watch`, `web`, `consume` and `broker` end (exit 0)",
        "`demo`, `replay` and `load` (exit 130",
        "`clear` exits 1 when its question is answered no",
    ):
        assert needle in TEXT, needle
        assert needle.replace("`", "") in EXIT_CODES, needle


def test_the_subscriber_example_is_the_one_the_guide_runs() -> None:
    """tests/test_docs.py runs docs/subscribers.md's ``alerts.py``; the README shows the same."""
    guide = (ROOT / "docs" / "subscribers.md").read_text()
    ours = re.findall(r"```python\n(# alerts\.py\n.*?)```", README, re.S)
    theirs = re.findall(r"```python\n(# alerts\.py\n.*?)```", guide, re.S)
    assert ours and ours == theirs[:1]
