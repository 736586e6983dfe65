"""The scheduler maps match time onto wall time on absolute deadlines, without drift."""

import pytest

from events import MatchClock, Topics, decode_event, decode_state
from simulator import Replayer, ReplayOptions, expand, resolve_matches, wall_offsets
from tests._fakes import FakeClock, RecordingPublisher

SEMI = resolve_matches("semifinal")[0]


async def _replay(options: ReplayOptions):  # type: ignore[no-untyped-def]
    clock = FakeClock()
    pub = RecordingPublisher(clock)
    report = await Replayer(pub, options, clock=clock).run(SEMI)
    return clock, pub, report


async def test_each_event_is_due_at_its_match_time_divided_by_speed() -> None:
    clock, pub, report = await _replay(ReplayOptions(speed=60, break_seconds=2.0))
    stream = expand(SEMI)
    start = 1000.0
    expected = [start + s.play_s / 60 + s.breaks * 2.0 for s in stream]
    assert clock.deadlines == pytest.approx(expected)
    # the 55' goal: 48 minutes of first half (45+3), 9.5 into the second, and a 2 s break
    goal = next(i for i, s in enumerate(stream) if s.event.type == "goal")
    assert clock.deadlines[goal] - start == pytest.approx(48 + 9.5 + 2.0)
    assert report.published == len(stream)
    assert report.final_state is not None and report.final_state.scoreline == "ARG 2-1 ENG"


async def test_deadlines_are_absolute_so_a_slow_publish_does_not_shift_later_events() -> None:
    clock = FakeClock()
    pub = RecordingPublisher(clock)

    class SlowOnce(RecordingPublisher):
        async def publish(self, topic, payload, **kw):  # type: ignore[no-untyped-def]
            await super().publish(topic, payload, **kw)
            if len(self.sent) == 10:
                clock.t += 5.0  # a 5 s stall mid-replay

    slow = SlowOnce(clock)
    await Replayer(slow, ReplayOptions(speed=60), clock=clock).run(SEMI)
    stream = expand(SEMI)
    offsets = wall_offsets(stream, ReplayOptions(speed=60), SEMI.break_minutes)
    # after the stall the schedule is what it always was: no accumulated drift
    assert clock.deadlines[-1] == pytest.approx(1000.0 + offsets[-1])
    assert pub.sent == []


async def test_half_time_is_compressed_by_default_and_real_with_full_breaks() -> None:
    stream = expand(SEMI)
    ko2 = next(i for i, s in enumerate(stream) if s.event.type == "kick_off" and s.breaks == 1)
    compressed = wall_offsets(stream, ReplayOptions(speed=60), SEMI.break_minutes)
    real = wall_offsets(stream, ReplayOptions(speed=60, break_seconds=None), SEMI.break_minutes)
    assert compressed[ko2] - compressed[ko2 - 1] == pytest.approx(2.0)
    assert real[ko2] - real[ko2 - 1] == pytest.approx(15 * 60 / 60)


async def test_speed_max_publishes_without_waiting() -> None:
    clock, pub, report = await _replay(ReplayOptions(speed=None))
    assert clock.deadlines == []
    assert report.published == len(expand(SEMI))


async def test_each_event_is_followed_by_its_retained_state() -> None:
    topics = Topics("t")
    _, pub, _ = await _replay(ReplayOptions(speed=None, topics=topics))
    assert len(pub.sent) == 2 * len(expand(SEMI))
    for ev_msg, st_msg in zip(pub.sent[::2], pub.sent[1::2], strict=True):
        assert ev_msg.topic == topics.events(SEMI.match_id)
        assert not ev_msg.retain
        assert st_msg.topic == topics.state(SEMI.match_id)
        assert st_msg.retain
        event, state = decode_event(ev_msg.payload), decode_state(st_msg.payload)
        assert state.last_seq == event.seq
        assert ev_msg.props is not None and ("seq", str(event.seq)) in ev_msg.props.user
        assert ev_msg.props.content_type == "application/json"


async def test_from_a_minute_publishes_the_state_at_that_point_first() -> None:
    _, pub, report = await _replay(ReplayOptions(speed=60, start=MatchClock.at(60)))
    first = pub.sent[0]
    assert first.retain
    snapshot = decode_state(first.payload)
    assert snapshot.score == {"ARG": 0, "ENG": 1}
    first_event = decode_event(pub.sent[1].payload)
    assert first_event.seq == snapshot.last_seq + 1
    assert first_event.clock.label == "60'"
    assert report.first_seq == first_event.seq
    assert report.final_state is not None and report.final_state.score == {"ARG": 2, "ENG": 1}


async def test_emitted_and_scheduled_times_are_stamped_at_publish() -> None:
    _, pub, _ = await _replay(ReplayOptions(speed=60))
    events = [decode_event(m.payload) for m in pub.sent[::2]]
    assert all(e.scheduled_at is not None for e in events)
    assert all(e.emitted_at.year >= 2026 for e in events)
    sched = [e.scheduled_at for e in events]
    assert sched == sorted(sched)  # type: ignore[type-var]
