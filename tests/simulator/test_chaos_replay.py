"""The replayer under chaos, with a fake clock and publisher: each message on its due time."""

from __future__ import annotations

import datetime as dt
import json

from events import MatchClock, Topics
from simulator import ChaosSpec, Replayer, ReplayOptions, resolve_matches
from tests._factories import SEMIFINAL_EVENTS
from tests._fakes import FakeClock, RecordingPublisher

SEMI = resolve_matches("semifinal")[0]
WALL0 = dt.datetime(2026, 7, 15, 19, 0, tzinfo=dt.UTC)
RUN = int(WALL0.timestamp() * 1000)


async def _replay(spec: str, **kw: object) -> tuple[RecordingPublisher, object, FakeClock]:
    clock = FakeClock()
    pub = RecordingPublisher(clock)
    options = ReplayOptions(topics=Topics(root="t"), chaos=ChaosSpec.parse(spec), seed=2, **kw)  # type: ignore[arg-type]
    replayer = Replayer(pub, options, clock=clock, wall_now=lambda: WALL0)
    report = await replayer.run(SEMI)
    return pub, report, clock


async def test_each_message_goes_out_on_its_due_time_delays_and_bursts_included() -> None:
    pub, report, clock = await _replay("delay=0.1:500,burst=60:3,duplicate=0.1", speed=60)
    assert report.faults  # type: ignore[attr-defined]
    kinds = {f.fault for f in report.faults}  # type: ignore[attr-defined]
    assert {"delay", "burst", "duplicate"} <= kinds
    bodies = [json.loads(p.payload) for p in pub.sent]
    assert all(b["run"] == report.run >= RUN for b in bodies)  # new_run: >= its start
    # One deadline per message, in send order: the fault's message waited for its due time.
    assert len(clock.deadlines) == len(pub.sent)
    t0 = clock.deadlines[0]
    for fault in report.faults:  # type: ignore[attr-defined]
        assert clock.deadlines[fault.index] == t0 + fault.at_s
        if fault.fault != "burst":
            assert bodies[fault.index].get("seq") == fault.seq
    assert clock.deadlines == sorted(clock.deadlines)


async def test_a_duplicate_is_the_same_bytes_again() -> None:
    pub, report, _ = await _replay("duplicate=0.3", speed=None)
    events = [p.payload for p in pub.sent if p.topic.endswith("/events")]
    by_seq: dict[int, bytes] = {}
    repeats = 0
    for payload in events:
        seq = json.loads(payload)["seq"]
        if seq in by_seq:
            assert payload == by_seq[seq]
            repeats += 1
        by_seq[seq] = payload
    assert repeats == sum(f.fault == "duplicate" for f in report.faults)  # type: ignore[attr-defined]


async def test_a_stale_state_is_not_retained_and_the_truth_is_reported() -> None:
    pub, report, _ = await _replay("stale-state=0.2,correction=1", speed=None)
    stale = [p for p in pub.sent if p.topic.endswith("/state") and not p.retain]
    assert len(stale) == sum(f.fault == "stale-state" for f in report.faults)  # type: ignore[attr-defined]
    truth = report.truth  # type: ignore[attr-defined]
    assert truth.scoreline == "ARG 2-1 ENG" and truth.last_seq == SEMIFINAL_EVENTS + 6


async def test_from_a_minute_a_restart_starts_again_from_there() -> None:
    pub, report, _ = await _replay("restart=85", speed=None, start=MatchClock.at(80))
    bodies = [json.loads(p.payload) for p in pub.sent]
    first = bodies[0]
    assert first["last_seq"] > 0 and first["run"] == report.run  # the score at 80' first
    runs = sorted({b["run"] for b in bodies})
    assert len(runs) == 2 and runs[1] == report.run + 1  # at max speed: the base run + 1 ms
    restarted = [b for b in bodies if b["run"] == runs[1] and "seq" in b]
    assert restarted[0]["clock"]["label"] == "80'"
    assert report.truth.run == runs[1]  # type: ignore[attr-defined]
