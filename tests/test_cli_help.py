"""What a newcomer meets first: --version, --help (short, grouped, with an example that runs),
usage errors in one line, user text printed as typed, and --from refused past the end of the
match."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from matchcast.cli.host import COMMANDS, EXIT_CODES, app, load_command
from matchcast.testbroker import Mosquitto

ROOT = Path(__file__).parent.parent

#: What `matchcast --version` and `matchcast --help` must not import: each takes a good part of
#: a second (pydantic alone 0.17 s) and only a command that runs needs it.
HEAVY = (
    "pydantic",
    "events",
    "simulator",
    "consumers",
    "aiomqtt",
    "paho",
    "aiohttp",
    "structlog",
    "yaml",
    "mqtt5",
    "amqtt",
    "matchcast.app",
    "matchcast.transport",
    "matchcast.load",
    "matchcast.web",
    "matchcast.cli.common",
    "matchcast.cli.options",
)


def matchcast(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "matchcast", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "MATCHCAST_BROKER": "", "COLUMNS": "200", **(env or {})},
        cwd=cwd,
        check=False,
    )


def help_text(*args: str) -> str:
    """``COLUMNS=80 matchcast ARGS``, in this process (``load merge`` is one argument here, as
    ``main`` makes it)."""
    result = CliRunner().invoke(app, [a for a in args if a], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.slow
def test_version_prints_the_version() -> None:
    from matchcast import __version__

    result = matchcast("--version")
    assert (result.returncode, result.stdout) == (0, f"matchcast {__version__}\n")


@pytest.mark.slow
@pytest.mark.parametrize("args", [["--version"], ["--help"]])
def test_version_and_help_import_no_command(args: list[str]) -> None:
    """They answer within Python's and typer's start (benchmarks/startup_bench.py): no module a
    command needs is imported, and --version not even rich."""
    script = (
        "import sys\n"
        f"sys.argv = ['matchcast', *{args!r}]\n"
        "from matchcast.cli import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('MODULES', *sorted(sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    line = next(x for x in done.stderr.splitlines() if x.startswith("MODULES "))
    modules = set(line.split()[1:])
    assert "matchcast.cli.host" in modules  # the check sees what was imported
    heavy = sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))
    assert heavy == []
    if args == ["--version"]:
        assert not {m for m in modules if m == "rich" or m.startswith("rich.")}


def test_every_help_fits_in_80_lines_at_80_columns() -> None:
    long = {}
    for name in ["", *COMMANDS]:
        lines = help_text(name, "--help").count("\n")
        if lines > 80:
            long[name or "matchcast"] = lines
    assert long == {}


def test_help_all_shows_the_rare_options_that_help_leaves_out() -> None:
    """``--help`` says ``--help-all`` is there; ``--help-all`` adds the rare options; the
    internal ones (an old name, a worker's flag) are in neither."""
    for name in COMMANDS:
        short, full = help_text(name, "--help"), help_text(name, "--help-all")
        assert "--help-all" in short, name
        cmd = load_command(name)
        for param in cmd.params:
            if param.param_type_name != "option" or not param.expose_value:
                continue
            shown = f"{param.opts[-1]} " if len(param.opts[-1]) > 2 else param.opts[-1]
            rare = param.hidden and getattr(param, "rich_help_panel", None)
            internal = param.hidden and not rare
            assert (shown in short) is not (rare or internal), (name, param.opts)
            assert (shown in full) is not internal, (name, param.opts)
    replay = help_text("replay", "--help-all")
    assert "--replayer-id" not in replay
    assert "--ca-file" in replay and "--ca-file" not in help_text("replay", "--help")


def test_the_root_help_lists_every_command_but_load_merge() -> None:
    text = help_text("--help")
    for name, spec in COMMANDS.items():
        assert (f"  {name} " in text) is not spec.hidden, name
        assert " ".join(spec.summary.split()) in " ".join(text.split()) or spec.hidden


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["replay", "--qos", "7"], "Invalid value for '--qos': must be a whole number from 0 to 2"),
        (["replay", "--speed"], "Option '--speed' requires an argument"),
        (["nope"], "No such command 'nope'"),
        (["watch", "--nope"], "No such option: --nope"),
    ],
)
def test_a_usage_error_is_one_error_line_and_exit_2(args: list[str], needle: str) -> None:
    result = matchcast(*args)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {needle}"), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert "╭" not in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("spec", ["sim:abc", "sim:[bold]x[/bold]"])
def test_user_text_in_an_error_prints_as_typed(spec: str) -> None:
    result = matchcast("replay", spec)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {spec}: invalid match file"), result.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("start", "needle"),
    [
        ("100", "the last minute played in wc2026-sf-arg-eng is 90+5'"),
        ("120", "the last minute played in wc2026-sf-arg-eng is 90+5'"),
        ("90+9", "the last minute played in wc2026-sf-arg-eng is 90+5'"),
        ("200", "the last minute played in wc2026-sf-arg-eng is 90+5'"),
        ("120+40", "the last minute played in wc2026-sf-arg-eng is 90+5'"),
        ("45+9", "the first half ends at 45+3'"),
    ],
)
def test_a_start_past_the_end_is_refused_naming_the_valid_range(start: str, needle: str) -> None:
    result = matchcast("replay", "--from", start, "--speed", "max")
    assert result.returncode == 2
    assert needle in result.stderr, result.stderr
    assert "give a minute from 1 to 90+5" in result.stderr
    demo = matchcast("demo", "--from", start)
    assert demo.returncode == 2
    assert needle in demo.stderr


@pytest.mark.slow
def test_demo_plays_the_match_it_is_given() -> None:
    result = matchcast("demo", "sim:7", "--speed", "max")
    assert result.returncode == 0, result.stderr
    assert "Full time:" in result.stdout
    many = matchcast("demo", "sim:1-3", "--speed", "max")
    assert many.returncode == 2
    assert "demo plays one match" in many.stderr


def test_every_command_has_an_example_in_its_help() -> None:
    assert set(COMMANDS) == {
        name for spec in COMMANDS.values() for name in _module_command_names(spec.module)
    }
    for name, spec in COMMANDS.items():
        text = " ".join(help_text(name, "--help").split())
        assert f": {spec.example}" in text, name
        assert spec.needs in text


def _module_command_names(module: str) -> list[str]:
    import importlib

    import typer

    sub = typer.Typer()
    importlib.import_module(module).register(sub)
    return [
        info.name or info.callback.__name__.replace("_", "-")
        for info in sub.registered_commands
        if info.callback is not None
    ]


def _example_args(example: str) -> list[str]:
    """The arguments of ``matchcast ...`` in an example (no shell redirection)."""
    words = shlex.split(example.split(" > ", maxsplit=1)[0])
    return words[words.index("matchcast") + 1 :]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_example_is_a_command_line_its_command_takes(name: str) -> None:
    """Its options exist and their values are right (checked here, without running it)."""
    args = _example_args(COMMANDS[name].example)
    assert " ".join(args).startswith(name), args
    cmd = load_command(name)
    ctx = cmd.make_context(name, args[len(name.split()) :])  # a usage error raises here
    assert ctx.params


@pytest.mark.slow
def test_the_examples_that_need_no_broker_run_as_written(tmp_path: Path) -> None:
    """schema, asyncapi, simulate, import (given openfootball's worldcup.json) and load merge
    (given two shard reports): as shown in their help, in a fresh directory."""
    data = ROOT / "simulator/data/openfootball/worldcup_2022.json"
    shutil.copy(data, tmp_path / "worldcup.json")
    for i in (0, 1):
        fixture = ROOT / f"tests/fixtures/load/format-3-shard-{i}-of-2.json"
        shutil.copy(fixture, tmp_path / f"shard-{i}.json")
    for name in ("schema", "asyncapi", "simulate", "import", "load merge"):
        example = COMMANDS[name].example
        result = matchcast(*_example_args(example), cwd=tmp_path)
        assert result.returncode == 0, (example, result.stderr)
        if " > " in example:
            (tmp_path / example.split(" > ")[1]).write_text(result.stdout)
    assert json.loads((tmp_path / "state.schema.json").read_text())["title"] == "MatchState"
    assert (tmp_path / "asyncapi.yaml").read_text().startswith("asyncapi:")
    assert (tmp_path / "bra-ger.yaml").read_text().count("BRA") > 1
    assert "ARG" in (tmp_path / "final.yaml").read_text()
    assert json.loads((tmp_path / "all.json").read_text())["parameters"]


@pytest.mark.slow
@pytest.mark.mosquitto
def test_the_clear_example_runs_as_written(mosquitto: Mosquitto) -> None:
    """With a broker where $MATCHCAST_BROKER says (here, a test's own)."""
    example = COMMANDS["clear"].example
    result = matchcast(*_example_args(example), env={"MATCHCAST_BROKER": mosquitto.url})
    assert result.returncode == 0, result.stderr
    assert "nothing to clear" in result.stdout or "cleared" in result.stdout


@pytest.mark.slow
@pytest.mark.mosquitto
def test_the_load_example_runs_as_written_and_passes_its_checks(tmp_path: Path) -> None:
    """Its own mosquitto, 5 s at the default speed 60: its thresholds hold on a busy machine
    (at --speed max the latency would be the sender's backlog; p99 < 50ms failed at 56 ms
    while the whole test suite ran beside it)."""
    example = COMMANDS["load"].example
    result = matchcast(*_example_args(example), cwd=tmp_path)
    assert result.returncode == 0, (example, result.stdout, result.stderr)
    assert "✓ p99 < 250ms" in result.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["parameters"]["speed"] == "60"
    assert [c["passed"] for c in report["checks"]] == [True, True]


@pytest.mark.slow
def test_load_merge_has_a_help_of_its_own() -> None:
    result = matchcast("load", "merge", "--help")
    assert "Usage: matchcast load merge [OPTIONS] {REPORT}..." in result.stdout
    assert "--spawn-mosquitto" not in result.stdout


def test_flags_show_no_value_placeholder() -> None:
    text = help_text("replay", "--help-all")
    lines = {
        m.group(1): line for line in text.splitlines() if (m := re.search(r"(--[\w-]+)", line))
    }
    for flag in ("--tls-insecure", "--full-breaks", "--verbose", "--help"):
        assert "<" not in lines[flag], lines[flag]
    assert "0|1|2" in lines["--qos"]  # options that take a value still show what
    assert "MINUTE" in lines["--from"]


def test_the_exit_codes_are_in_the_help() -> None:
    assert " ".join(EXIT_CODES.split()) in " ".join(help_text("--help").split())


@pytest.mark.slow
def test_a_start_past_extra_time_names_its_last_minute_not_the_shootout() -> None:
    final = "worldcup:2022/final"
    result = matchcast("replay", final, "--from", "120+5", "--speed", "max")
    assert result.returncode == 2
    assert "the last minute played in wc2022-1218-arg-fra is 120+2'" in result.stderr
    assert "give a minute from 1 to 120+2" in result.stderr
    first_half = matchcast("replay", final, "--from", "105+9", "--speed", "max")
    assert "the first half of extra time ends at 105+1'" in first_half.stderr, first_half.stderr
