"""What a newcomer meets first: --version, --help with an example, usage errors in one line,
user text printed as typed, and --from refused past the end of the match."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from matchcast.cli.host import EXAMPLES, EXIT_CODES, command

pytestmark = pytest.mark.slow


def matchcast(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "matchcast", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "MATCHCAST_BROKER": "", "COLUMNS": "200"},
        check=False,
    )


def test_version_prints_the_version() -> None:
    from matchcast import __version__

    result = matchcast("--version")
    assert (result.returncode, result.stdout) == (0, f"matchcast {__version__}\n")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["replay", "--qos", "7"], "Invalid value for '--qos'"),
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


@pytest.mark.parametrize("spec", ["sim:abc", "sim:[bold]x[/bold]"])
def test_user_text_in_an_error_prints_as_typed(spec: str) -> None:
    result = matchcast("replay", spec)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {spec}: invalid match file"), result.stderr


@pytest.mark.parametrize(
    ("start", "needle"),
    [
        ("100", "the last minute played in wc2026-sf-arg-eng is 90+5'"),
        ("120", "the last minute played in wc2026-sf-arg-eng is 90+5'"),
        ("90+9", "the last minute played in wc2026-sf-arg-eng is 90+5'"),
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


def test_demo_plays_the_match_it_is_given() -> None:
    result = matchcast("demo", "sim:7", "--speed", "max")
    assert result.returncode == 0, result.stderr
    assert "Full time:" in result.stdout
    many = matchcast("demo", "sim:1-3", "--speed", "max")
    assert many.returncode == 2
    assert "demo plays one match" in many.stderr


def test_every_command_has_an_example_in_its_help() -> None:
    commands = command().commands
    assert set(commands) == set(EXAMPLES)
    for name in ("load", "watch", "load merge"):
        result = matchcast(*name.split(), "--help")
        assert result.returncode == 0
        assert f"Example: {EXAMPLES[name]}" in " ".join(result.stdout.split())


def test_load_merge_has_a_help_of_its_own() -> None:
    result = matchcast("load", "merge", "--help")
    assert "Usage: matchcast load merge" in result.stdout
    assert "--spawn-mosquitto" not in result.stdout


def test_flags_show_no_value_placeholder() -> None:
    result = matchcast("watch", "--help")
    lines = {line.split()[1]: line for line in result.stdout.splitlines() if "--" in line[:6]}
    for flag in ("--tls-insecure", "--exit-at-full-time", "--verbose", "--help"):
        assert "<bool>" not in lines[flag] and "<int>" not in lines[flag], lines[flag]
    assert "<int range>" in lines["--qos"]  # options that take a value still show it


def test_the_exit_codes_are_in_the_help() -> None:
    result = matchcast("--help")
    assert " ".join(EXIT_CODES.split()) in " ".join(result.stdout.split())


def test_a_start_past_extra_time_names_its_last_minute_not_the_shootout() -> None:
    final = "worldcup:2022/final"
    result = matchcast("replay", final, "--from", "120+5", "--speed", "max")
    assert result.returncode == 2
    assert "the last minute played in wc2022-1218-arg-fra is 120+2'" in result.stderr
    assert "give a minute from 1 to 120+2" in result.stderr
    first_half = matchcast("replay", final, "--from", "105+9", "--speed", "max")
    assert "the first half of extra time ends at 105+1'" in first_half.stderr, first_half.stderr
