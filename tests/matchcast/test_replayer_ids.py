"""A replayer id is one topic level: every command that takes one refuses a bad one in one line,
exit 2, before it connects (no traceback, no wildcard subscription, no hang)."""

from __future__ import annotations

import pytest

from events import replayer_id_problem
from matchcast.transport.broker import free_port
from tests._cli import run_cli

BAD = ["", "a/b", "+", "#", "a\nb", "a\x00b", "x" * 129]


@pytest.mark.parametrize("rid", BAD)
def test_no_command_takes_a_replayer_id_that_is_not_one_topic_level(rid: str) -> None:
    # A broker nobody listens on: a command that got past the check would fail otherwise.
    broker = f"mqtt://127.0.0.1:{free_port()}"
    for args in (
        ["watch", "--broker", broker, "--replayer", rid],
        ["consume", "scoreboard", "--broker", broker, "--replayer", rid],
        ["clear", "--broker", broker, "--replayer", rid, "--yes"],
        ["control", "status", "--broker", broker, "--replayer", rid],
        ["replay", "--broker", broker, "--replayer", rid],
        ["replay", "--broker", broker, "--replayer-id", rid],
    ):
        result = run_cli(*args)
        assert result.code == 2, (args, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, (args, result.stderr)
        assert lines[0].startswith("error: --replayer"), (args, result.stderr)
        assert "Traceback" not in result.stderr


def test_a_good_replayer_id_has_no_problem() -> None:
    for rid in ("r1", "replayer-1a2b", "edge.eu_west", "r 1", "ü"):
        assert replayer_id_problem(rid) is None, rid
    for rid in BAD:
        assert replayer_id_problem(rid) is not None, repr(rid)


def test_control_says_a_bad_match_in_one_line() -> None:
    result = run_cli(
        "control", "status", "--broker", f"mqtt://127.0.0.1:{free_port()}", "--match", "a/#"
    )
    assert result.code == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: --match 'a/#': match ids are lower case letters"), line
