"""Recordings: read back what the recorder wrote, and replay it with its original timing."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from events import (
    Event,
    MatchFileError,
    MatchState,
    apply,
    decode_event,
    decode_state,
    encode_event,
    encode_state,
)
from matchcast.testing import match_events
from simulator import Recording, Replayer, ReplayOptions, load_recording, resolve_sources
from tests._fakes import FakeClock, RecordingPublisher

EVENTS = match_events()
MATCH = EVENTS[0].match_id


def states_after(events: list[Event], state: MatchState | None = None) -> list[MatchState]:
    state, out = state or MatchState.new(events[0].match_id), []
    for e in events:
        state = apply(state, e)
        out.append(state)
    return out


STATES = states_after(EVENTS)
#: Where a fake clock starts: the deadlines a replay sleeps to, less this, are its offsets.
START = FakeClock().t


def write(path: Path, *items: Event | MatchState) -> Path:
    lines = [
        b'{"snapshot":' + encode_state(i) + b"}" if isinstance(i, MatchState) else encode_event(i)
        for i in items
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_a_recording_reads_back_into_events_states_and_offsets(tmp_path: Path) -> None:
    [rec] = load_recording(write(tmp_path / "r.jsonl", *EVENTS))
    assert rec.match_id == MATCH
    assert rec.events == tuple(EVENTS)
    assert rec.states == tuple(STATES)
    assert rec.offsets[0] == 0.0
    first = EVENTS[0].emitted_at
    assert rec.offsets[-1] == (EVENTS[-1].emitted_at - first).total_seconds()
    assert resolve_sources(str(tmp_path / "r.jsonl")) == [rec]


def test_snapshot_lines_seed_the_state_and_resynchronise_it(tmp_path: Path) -> None:
    """Joined at seq 10, then lost 16-18 and resynchronised from the snapshot at 18."""
    items = [STATES[9], *EVENTS[10:15], STATES[17], *EVENTS[18:20]]
    [rec] = load_recording(write(tmp_path / "r.jsonl", *items))
    assert rec.initial == STATES[9]
    assert [e.seq for e in rec.events] == [11, 12, 13, 14, 15, 19, 20]
    assert rec.states[-1] == STATES[19]


def test_several_matches_share_one_time_line(tmp_path: Path) -> None:
    later = dt.timedelta(seconds=30)
    other = [
        e.model_copy(update={"match_id": "other", "emitted_at": e.emitted_at + later})
        for e in EVENTS[:3]
    ]
    a, b = load_recording(
        write(tmp_path / "r.jsonl", EVENTS[0], other[0], *EVENTS[1:3], *other[1:])
    )
    assert (a.match_id, b.match_id) == (MATCH, "other")
    assert b.offsets[0] == 30.0


def test_a_bad_recording_says_which_lines_are_wrong(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(encode_event(EVENTS[0]) + b'\nnot json\n{"type": "goal"}\n\n')
    with pytest.raises(MatchFileError) as info:
        load_recording(path)
    assert [p.split(":")[0] for p in info.value.problems] == ["line 2", "line 3"]
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(MatchFileError, match="no events"):
        load_recording(tmp_path / "empty.jsonl")
    with pytest.raises(MatchFileError, match="no such file"):
        load_recording(tmp_path / "missing.jsonl")


@pytest.mark.parametrize("speed", [1.0, 60.0])
async def test_a_replayed_recording_keeps_its_original_timing(tmp_path: Path, speed: float) -> None:
    [rec] = load_recording(write(tmp_path / "r.jsonl", *EVENTS))
    clock, pub = FakeClock(), RecordingPublisher()
    report = await Replayer(pub, ReplayOptions(speed=speed), clock=clock).run(rec)
    assert [d - START for d in clock.deadlines] == pytest.approx([o / speed for o in rec.offsets])
    assert report.published == len(EVENTS)
    sent = [decode_event(p.payload) for p in pub.sent if p.topic.endswith("/events")]
    strip = {"emitted_at", "scheduled_at", "run"}
    assert [e.model_dump(exclude=strip) for e in sent] == [
        e.model_dump(exclude=strip) for e in EVENTS
    ]
    assert {e.run for e in sent} == {report.run}  # a replay of a recording is a run of its own
    states = [decode_state(p.payload) for p in pub.sent if p.topic.endswith("/state")]
    assert states == [s.model_copy(update={"run": report.run}) for s in STATES]
    assert report.final_state == states[-1]


async def test_a_recording_that_starts_mid_match_publishes_its_snapshot_first(
    tmp_path: Path,
) -> None:
    [rec] = load_recording(write(tmp_path / "r.jsonl", STATES[49], *EVENTS[50:]))
    pub = RecordingPublisher()
    await Replayer(pub, ReplayOptions(speed=None), clock=FakeClock()).run(rec)
    first = pub.sent[0]
    assert first.topic.endswith("/state")
    assert first.retain
    assert json.loads(first.payload)["last_seq"] == 50
    assert isinstance(rec, Recording)


@pytest.mark.parametrize("speed", [1.0, 10.0])
async def test_the_matches_of_a_recording_keep_their_recorded_offsets(
    tmp_path: Path, speed: float
) -> None:
    """Each match used to start at once from its own first event: 12 matches recorded 10 ms
    apart ran 330-420 ms early."""
    from matchcast.cli.replay import recorded_delays

    later = dt.timedelta(seconds=30)
    other = [
        e.model_copy(update={"match_id": "other", "emitted_at": e.emitted_at + later})
        for e in EVENTS[:3]
    ]
    recs = load_recording(write(tmp_path / "r.jsonl", *EVENTS[:3], *other))
    options = ReplayOptions(speed=speed)
    delays = recorded_delays(list(recs), options)
    assert delays == pytest.approx([0.0, 30.0 / speed])
    clocks = [FakeClock(), FakeClock()]
    for rec, clock, delay in zip(recs, clocks, delays or [], strict=True):
        await Replayer(RecordingPublisher(), options, clock=clock).run(rec, delay_s=delay)
    # Where the replay puts each event, from the replay's start: the recorded offsets.
    offsets = [[d - START for d in clock.deadlines] for clock in clocks]
    assert offsets[1][1:] == pytest.approx([o / speed for o in recs[1].offsets])
    assert offsets[0] == pytest.approx([o / speed for o in recs[0].offsets])
    assert recorded_delays(list(recs), ReplayOptions(speed=None)) == [0.0, 0.0]
