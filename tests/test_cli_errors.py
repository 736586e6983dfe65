"""An unreachable broker, a wrong match id: one clear line, before anything else is printed."""

from __future__ import annotations

import subprocess
import sys

import pytest

from matchcast.testbroker import Mosquitto
from matchcast.transport.broker import free_port
from tests._cli import matchcast

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    "args",
    [
        ["load", "--no-progress"],
        ["load-consumer"],
        ["watch"],
        ["consume", "scoreboard"],
        ["web", "--port", "0"],
        ["control", "status"],
    ],
)
def test_an_unreachable_broker_is_the_only_line(args: list[str]) -> None:
    """No JSON warning or stats line ahead of it, no page address, the broker named once, and
    the same line from every command, whichever MQTT client it runs on (load's fast client
    said "Connect call failed ('127.0.0.1', port)", asyncio's words)."""
    url = f"mqtt://127.0.0.1:{free_port()}"
    result = matchcast(*args, "--broker", url, "--log-format", "json")
    assert result.returncode == 1, result.stderr
    assert result.stderr == f"error: broker {url}: cannot connect: [Errno 111] Connection refused\n"


@pytest.mark.parametrize("command", ["watch", "consume scoreboard"])
def test_a_match_id_in_the_wrong_case_is_refused_with_a_hint(command: str) -> None:
    result = matchcast(*command.split(), "--match", "WC2026-SF-ARG-ENG")
    assert result.returncode == 2
    assert result.stderr.startswith("error: --match 'WC2026-SF-ARG-ENG': match ids are lower")
    assert "try --match wc2026-sf-arg-eng" in result.stderr


@pytest.mark.mosquitto
@pytest.mark.parametrize("command", ["watch", "consume scoreboard"])
def test_watching_a_match_that_is_not_there_says_which_are(
    mosquitto: Mosquitto, command: str
) -> None:
    root = f"mct-absent-{free_port()}"
    replay = matchcast("replay", "--speed", "max", "--broker", mosquitto.url, "--root", root)
    assert replay.returncode == 0, replay.stderr
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "matchcast",
            *command.split(),
            "--broker",
            mosquitto.url,
            "--root",
            root,
            "--match",
            "wc2026-sf",
            "--log-format",
            "json",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        said = ""
        for line in proc.stderr:  # within about five seconds of starting
            if line.startswith("waiting for match"):
                said = line
                break
    finally:
        proc.terminate()
        proc.communicate(timeout=20)
    assert "Matches there: wc2026-sf-arg-eng." in said
    assert "Did you mean --match wc2026-sf-arg-eng?" in said
