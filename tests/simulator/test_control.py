"""Controlling a replay offline: the playhead's arithmetic, and each command's effect on the
published stream, with a clock the test moves by hand (no wall-clock waits)."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import pytest

from consumers._sequencer import RunnerStats, Sequencer
from events import (
    ControlCommand,
    ControlCommandError,
    Event,
    MatchClock,
    MatchState,
    decode_command,
    decode_event,
    decode_state,
    parse_minute,
)
from simulator import Replayer, ReplayOptions, expand, lean_match, resolve_matches, wall_offsets
from simulator._control import Playhead, SeekError, seek_index
from tests._factories import SEMIFINAL_LEAN_EVENTS
from tests._fakes import ManualClock, RecordingPublisher

#: The lean feed: the controls move the clock, whatever the events; its seqs are pinned below.
SEMI = lean_match(resolve_matches("semifinal")[0])
STREAM = expand(SEMI)
EPOCH = dt.datetime(2026, 7, 14, 19, 0, tzinfo=dt.UTC)
WALL = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _offsets(speed: float | None) -> list[float]:
    return wall_offsets(STREAM, ReplayOptions(speed=speed), SEMI.break_minutes)


def _cmd(command: str, **kw: Any) -> ControlCommand:
    return ControlCommand(request_id="t1", command=command, **kw)  # type: ignore[arg-type]


# ---------------------------------------------------------------- the playhead, pure


def test_a_pause_holds_every_deadline_and_resume_goes_on_without_a_burst() -> None:
    ph = Playhead(_offsets, 60.0, WALL)
    ph.start(0, 100.0)
    ph.next_index = 10
    due = ph.deadline(10)
    ph.pause(due - 0.25, WALL)
    ph.resume(due - 0.25 + 500.0, WALL)
    assert ph.deadline(10) == pytest.approx(due + 500.0)  # 0.25 s after the resume
    assert ph.deadline(11) - ph.deadline(10) == pytest.approx(_offsets(60)[11] - _offsets(60)[10])
    assert (ph.state, ph.resume(1.0, WALL)) == ("playing", False)


def test_a_speed_change_scales_the_wait_left_and_re_bases_the_rest() -> None:
    ph = Playhead(_offsets, 60.0, WALL)
    ph.start(0, 0.0)
    ph.next_index = 20
    now = ph.deadline(20) - 1.0
    ph.set_speed(120.0, now, WALL)
    assert ph.deadline(20) == pytest.approx(now + 0.5)
    fast = _offsets(120)
    assert ph.deadline(30) - ph.deadline(20) == pytest.approx(fast[30] - fast[20])


def test_a_speed_change_while_paused_waits_for_the_resume() -> None:
    ph = Playhead(_offsets, 60.0, WALL)
    ph.start(0, 0.0)
    ph.next_index = 5
    paused = ph.deadline(5) - 2.0
    ph.pause(paused, WALL)
    ph.set_speed(30.0, paused + 100.0, WALL)
    ph.resume(paused + 200.0, WALL)
    assert ph.deadline(5) == pytest.approx(paused + 200.0 + 4.0)


def test_seek_finds_the_first_event_at_the_minute_and_refuses_minutes_outside() -> None:
    events = [s.event for s in STREAM]
    index = seek_index(events, parse_minute("85"))
    assert (events[index].clock.label, events[index + 1].type) == ("85'", "clock")
    assert events[seek_index(events, parse_minute("86"))].type == "clock"
    with pytest.raises(SeekError, match=r"minute 105 is past the end: .* is 90\+5'$"):
        seek_index(events, parse_minute("105"))


@pytest.mark.parametrize("text", ["", "x", "0", "-3", "90+x", "50+2"])
def test_a_minute_that_is_not_one_is_refused_with_the_form_expected(text: str) -> None:
    with pytest.raises(ValueError, match="written like 60 or 90"):
        parse_minute(text)


def test_minutes_parse_like_from() -> None:
    assert parse_minute("90+2'") == MatchClock.at(90, 2)
    assert parse_minute(" 80 ") == MatchClock.at(80)


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        (b"{not json", "not JSON"),
        (b"[" * 5000 + b"]" * 5000, "exceeds"),
        (b"[" * 1500 + b"]" * 1500, "not JSON"),
        (b'{"request_id": "a", "command": "explode"}', "command"),
        (b'{"request_id": "a", "command": "seek"}', "seek needs a minute"),
        (b'{"request_id": "a", "command": "seek", "minute": "50+2"}', "written like"),
        (b'{"request_id": "a", "command": "speed", "speed": -1}', "speed"),
        (b'{"request_id": "a", "command": "pause", "extra": 1}', "extra"),
        (b'"pause"', "(root)"),
    ],
)
def test_a_hostile_command_is_one_readable_error(payload: bytes, problem: str) -> None:
    with pytest.raises(ControlCommandError) as info:
        decode_command(payload, topic="matchcast/replayers/r/control")
    assert problem in info.value.reason


def test_an_invalid_command_keeps_its_request_id_and_reply_topic_for_the_answer() -> None:
    with pytest.raises(ControlCommandError) as info:
        decode_command(b'{"request_id": "abc", "command": "fly", "reply_to": "x/y"}')
    assert (info.value.request_id, info.value.reply_to) == ("abc", "x/y")


# ---------------------------------------------------------------- the replay, offline


class _Harness:
    """A replay of the semi-final at speed 60 on a hand-moved clock."""

    def __init__(self) -> None:
        self.clock = ManualClock()
        self.pub = RecordingPublisher(self.clock)  # type: ignore[arg-type]
        self.replayer = Replayer(
            self.pub,
            ReplayOptions(speed=60.0, break_seconds=2.0),
            clock=self.clock,
            wall_now=lambda: EPOCH + dt.timedelta(seconds=self.clock.t),
        )
        self.task: asyncio.Task[Any] | None = None

    def start(self) -> None:
        self.task = asyncio.ensure_future(self.replayer.run(SEMI))

    def events(self) -> list[Event]:
        return [decode_event(p.payload) for p in self.pub.sent if p.topic.endswith("/events")]

    def states(self) -> list[MatchState]:
        return [decode_state(p.payload) for p in self.pub.sent if p.topic.endswith("/state")]

    async def settle(self) -> float | None:
        """Let the replay run until it sleeps: its deadline; None once it is over."""
        assert self.task is not None
        sleeper = asyncio.ensure_future(self.clock.sleeper())
        await asyncio.wait({sleeper, self.task}, return_when=asyncio.FIRST_COMPLETED)
        if not sleeper.done():
            sleeper.cancel()
            return None
        return sleeper.result()

    async def until_seq(self, seq: int, *, newer_than: int = 0) -> float:
        """Step until event ``seq`` of a run after ``newer_than`` is out; the deadline of the
        next one."""
        async with asyncio.timeout(30):
            while True:
                due = await self.settle()
                assert due is not None
                events = self.events()
                if events and events[-1].seq >= seq and events[-1].run > newer_than:
                    return due
                self.clock.advance(due)

    async def finish(self) -> None:
        async with asyncio.timeout(30):
            while (due := await self.settle()) is not None:
                self.clock.advance(due)
            assert self.task is not None
            await self.task

    def control(self, command: str, **kw: Any) -> None:
        assert self.replayer.control(_cmd(command, **kw)) is None
        self.clock.mark()  # the replay wakes: wait for its next sleep, not the old one


def _at(event: Event) -> float:
    """The event's scheduled_at on the test clock."""
    assert event.scheduled_at is not None
    return (event.scheduled_at - EPOCH).total_seconds()


async def test_nothing_is_scheduled_during_a_pause_and_resume_keeps_the_wait_left() -> None:
    h = _Harness()
    h.start()
    due = await h.until_seq(10)
    paused = due - 0.25
    h.clock.advance(paused)
    h.control("pause")
    h.clock.advance(paused + 600.0)  # ten minutes of pause: every old deadline has passed
    h.control("resume")
    resumed = h.clock.t
    await h.finish()
    events = h.events()
    assert [e.seq for e in events] == list(range(1, SEMIFINAL_LEAN_EVENTS + 1))
    assert not [e.seq for e in events if paused < _at(e) < resumed]
    assert _at(events[10]) == pytest.approx(resumed + 0.25)  # seq 11: the wait left, no burst
    offsets = _offsets(60)
    assert _at(events[-1]) - _at(events[10]) == pytest.approx(offsets[-1] - offsets[10])


async def test_a_speed_change_re_bases_the_spacing_of_what_follows() -> None:
    h = _Harness()
    h.start()
    due = await h.until_seq(20)
    h.clock.advance(due - 1.0)
    h.control("speed", speed=120.0)
    await h.finish()
    events = h.events()
    fast = _offsets(120)
    assert _at(events[20]) == pytest.approx(due - 0.5)
    gaps = [_at(events[j]) - _at(events[20]) for j in range(21, SEMIFINAL_LEAN_EVENTS)]
    assert gaps == pytest.approx([fast[j] - fast[20] for j in range(21, SEMIFINAL_LEAN_EVENTS)])


async def test_a_seek_back_starts_a_new_run_at_the_minute_and_takes_the_goal_back() -> None:
    h = _Harness()
    h.start()
    await h.until_seq(70)  # past the 55' goal: ENG lead 1-0
    first_run = h.events()[-1].run
    sought = h.clock.t
    h.control("seek", minute="50")
    await h.until_seq(60, newer_than=first_run)  # the new run's events up to seq 60
    states = h.states()
    snapshot = next(s for s in states if s.run > first_run)
    assert snapshot.last_seq == seek_index([s.event for s in STREAM], MatchClock.at(50))
    assert snapshot.scoreline == "ARG 0-0 ENG"
    new = [e for e in h.events() if e.run > first_run]
    assert new[0].seq == snapshot.last_seq + 1
    assert new[0].clock.label == "50'"
    assert _at(new[0]) == pytest.approx(sought)  # due at once: the seek's moment
    await h.finish()
    final = h.events()[-1]
    assert (final.type, final.run) == ("full_time", new[0].run)


async def test_a_consumer_ends_at_the_true_score_after_pauses_and_seeks_back_and_forth() -> None:
    """Every message the replayer sent, in order, through a consumer's delivery rules."""
    h = _Harness()
    h.start()
    await h.until_seq(97)  # 1-1 after the 86' goal
    h.control("seek", minute="30")
    await h.until_seq(35, newer_than=h.events()[-1].run)
    h.control("pause")
    h.clock.advance(h.clock.t + 100)
    h.control("seek", minute="88")
    h.control("resume")
    await h.until_seq(98, newer_than=h.events()[-1].run)
    h.control("seek", minute="56")
    await h.finish()
    seq = Sequencer(SEMI.match_id, RunnerStats())
    scores = []
    for p in h.pub.sent:
        if p.topic.endswith("/events"):
            out = seq.on_event(decode_event(p.payload))
        else:
            out = seq.on_snapshot(decode_state(p.payload), retained=False)
        scores += [state.scoreline for _event, state in out]
    assert seq.state is not None and seq.state.scoreline == "ARG 2-1 ENG"
    assert seq.stats.gaps == 0 and seq.stats.duplicates == 0
    assert "ARG 0-0 ENG" in scores[scores.index("ARG 1-1 ENG") :]  # the seek to 30' took it back


async def test_stop_ends_the_replay_early_and_says_so() -> None:
    h = _Harness()
    h.start()
    await h.until_seq(5)
    h.control("stop")
    await h.finish()
    assert h.task is not None
    report = h.task.result()
    assert report.last_seq == 5
    assert [p.state for p in h.replayer.playback()] == ["stopped"]


async def test_commands_for_an_unknown_match_or_a_minute_outside_it_are_refused() -> None:
    h = _Harness()
    h.start()
    await h.until_seq(3)
    refused = h.replayer.control(_cmd("pause", match="no-such-match"))
    assert refused is not None and "no match 'no-such-match'" in refused
    last = "the last minute played in wc2026-sf-arg-eng is 90+5'"
    for minute in ("100", "200", "120+40", "90+9"):
        outside = h.replayer.control(_cmd("seek", minute=minute))
        assert outside == f"minute {minute} is past the end: {last}"
    h.control("stop")
    await h.finish()


@pytest.mark.parametrize("minute", ["80", "30"])
async def test_a_seek_lands_at_the_minute_asked_in_the_reply_and_the_stream(minute: str) -> None:
    h = _Harness()
    h.start()
    await h.until_seq(50)
    old_run = h.events()[-1].run
    h.control("seek", minute=minute)
    (told,) = h.replayer.playback()  # what the reply says, before the loop takes the seek
    assert told.clock is not None and told.clock.label == f"{minute}'"
    await h.until_seq(1, newer_than=old_run)
    first = next(e for e in h.events() if e.run > old_run)
    assert first.clock.label == f"{minute}'"
    snapshot = next(s for s in h.states() if s.run > old_run)  # what a scoreboard shows first
    assert snapshot.clock is not None and snapshot.clock.label == f"{minute}'"
    assert snapshot.last_seq == first.seq - 1
    (now,) = h.replayer.playback()
    assert now.clock is not None and now.clock.label == f"{minute}'"
    h.control("stop")
    await h.finish()
