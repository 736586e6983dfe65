"""A recording is validated as strictly as a match file: each broken one is refused, naming
its line and what is wrong (simulator/_recording_rules.py).

Recordings with duplicate seqs, full time first, a goal for a team not in the match, or a
score of 10^9 once replayed with exit 0.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from events import Event, MatchFileError, MatchState, apply, encode_event, encode_state
from matchcast.testing import match_events
from simulator import load_recording
from tests._cli import run_cli

EVENTS = match_events()
MATCH = EVENTS[0].match_id
GOAL = next(i for i, e in enumerate(EVENTS) if e.type == "goal")
FULL_TIME = len(EVENTS) - 1


def _state_after(n: int) -> MatchState:
    state = MatchState.new(MATCH)
    for event in EVENTS[:n]:
        state = apply(state, event)
    return state


def _edit(event: Event, **changes: Any) -> bytes:
    data = json.loads(encode_event(event))
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return json.dumps(data).encode()


def _snapshot(state: MatchState, **changes: Any) -> bytes:
    data = json.loads(encode_state(state)) | changes
    return b'{"snapshot":' + json.dumps(data).encode() + b"}"


def _lines(*lines: bytes) -> bytes:
    return b"\n".join(lines) + b"\n"


def _plain(n: int) -> list[bytes]:
    return [encode_event(e) for e in EVENTS[:n]]


_TEAMS = (EVENTS[0].home.code, EVENTS[0].away.code)  # type: ignore[attr-defined]
_LATER = EVENTS[GOAL].emitted_at

#: name -> (the recording, the line at fault, what the problem says)
BROKEN: dict[str, tuple[bytes, int, str]] = {
    "a duplicate seq": (_lines(*_plain(3), encode_event(EVENTS[2])), 4, "seq 3 does not follow"),
    "full time first": (_lines(encode_event(EVENTS[FULL_TIME])), 1, "before the kick-off"),
    "a goal for a team not in the match": (
        _lines(*_plain(GOAL), _edit(EVENTS[GOAL], team="XYZ")),
        GOAL + 1,
        "XYZ, not a team of the match",
    ),
    "a score of 10^9": (
        _lines(*_plain(GOAL), _edit(EVENTS[GOAL], score={_TEAMS[0]: 10**9, _TEAMS[1]: 0})),
        GOAL + 1,
        "does not follow from",
    ),
    # new variants
    "a seq that goes back": (_lines(*_plain(5), encode_event(EVENTS[1])), 6, "seq 2 does not"),
    "a second run of the match": (
        _lines(*_plain(4), _edit(EVENTS[0], run=EVENTS[0].run + 1000)),
        5,
        "second run of the match",
    ),
    "an event after full time": (
        _lines(*_plain(FULL_TIME + 1), _edit(EVENTS[1], seq=FULL_TIME + 2)),
        FULL_TIME + 2,
        "after the end of",
    ),
    "a seq jump of a billion": (
        _lines(*_plain(3), _edit(EVENTS[3], seq=10**9)),
        4,
        "jumps more than 10,000",
    ),
    "a score of 10^9 across a gap": (
        _lines(
            *_plain(GOAL),
            _edit(EVENTS[GOAL], seq=GOAL + 5, score={_TEAMS[0]: 10**9, _TEAMS[1]: 0}),
        ),
        GOAL + 1,
        "at most one goal a seq",
    ),
    "a score naming a third team": (
        _lines(*_plain(GOAL), _edit(EVENTS[GOAL], score={_TEAMS[0]: 1, _TEAMS[1]: 0, "XYZ": 0})),
        GOAL + 1,
        "not a team of the match",
    ),
    "a kick-off of a team against itself": (
        _lines(_edit(EVENTS[0], away={"code": _TEAMS[0], "name": "Again"})),
        1,
        "both",
    ),
    "a later kick-off naming other teams": (
        _lines(*_plain(3), _edit(EVENTS[0], seq=4, home={"code": "XYZ", "name": "X"})),
        4,
        "not the match's",
    ),
    "a later kick-off that swaps home and away": (
        _lines(
            *_plain(3),
            _edit(
                EVENTS[0], seq=4, home=EVENTS[0].away.model_dump(), away=EVENTS[0].home.model_dump()
            ),  # type: ignore[attr-defined]
        ),
        4,
        "not the match's",
    ),
    "a disallowed goal the match never had": (
        _lines(
            *_plain(GOAL),
            _edit(
                EVENTS[GOAL],
                type="goal_disallowed",
                goal_id="never",
                scorer=None,
                method=None,
                detail=None,
                shot_id=None,
                reason="offside",
            ),
        ),
        GOAL + 1,
        "which the match has not",
    ),
    "a time that goes back": (
        _lines(
            *_plain(3),
            _edit(EVENTS[3], emitted_at="2000-01-01T00:00:00Z", scheduled_at=None),
        ),
        4,
        "before the time of the event before it",
    ),
    "a recording that spans a century": (
        _lines(*_plain(3), _edit(EVENTS[3], emitted_at="2126-01-01T00:00:00Z", scheduled_at=None)),
        4,
        "span more than 31 days",
    ),
    "a snapshot whose score is not its goals": (
        _lines(_snapshot(_state_after(GOAL + 1), score={_TEAMS[0]: 10**9, _TEAMS[1]: 0})),
        1,
        "is not its goals counted",
    ),
    "a snapshot that goes back": (
        _lines(*_plain(10), _snapshot(_state_after(5))),
        11,
        "goes back from seq 10",
    ),
    "a goal before the kick-off": (
        _lines(_edit(EVENTS[GOAL], seq=1)),
        1,
        "before the kick-off",
    ),
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_a_broken_recording_is_refused_naming_its_line(name: str, tmp_path: Path) -> None:
    content, line, problem = BROKEN[name]
    path = tmp_path / "broken.jsonl"
    path.write_bytes(content)
    with pytest.raises(MatchFileError) as info:
        load_recording(path)
    assert any(p.startswith(f"line {line}: ") and problem in p for p in info.value.problems), (
        info.value.problems
    )


def test_a_whole_recording_and_one_joined_from_a_snapshot_still_load(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(_lines(*_plain(len(EVENTS))))
    assert len(load_recording(path)[0].events) == len(EVENTS)
    path.write_bytes(_lines(_snapshot(_state_after(GOAL + 3)), *_plain(len(EVENTS))[GOAL + 3 :]))
    assert load_recording(path)[0].initial.last_seq == GOAL + 3


def test_the_replay_command_refuses_a_broken_recording_with_exit_2(tmp_path: Path) -> None:
    """The issue's four, as ``matchcast replay`` meets them: one clear error, exit 2."""
    for name in (
        "a duplicate seq",
        "full time first",
        "a goal for a team not in the match",
        "a score of 10^9",
    ):
        content, line, problem = BROKEN[name]
        path = tmp_path / f"{name.replace(' ', '-')}.jsonl"
        path.write_bytes(content)
        result = run_cli("replay", str(path), "--speed", "max")
        assert result.code == 2, result.stderr
        assert result.stderr.startswith("error: ")
        assert f"line {line}: " in result.stderr and problem in result.stderr
        assert "Traceback" not in result.stderr
