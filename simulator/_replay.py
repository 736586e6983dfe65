"""Replay a match onto a publisher on a timed schedule.

The scheduler maps match time onto wall time with a speed factor and publishes each event at
an absolute deadline taken from a monotonic clock, so lateness never accumulates over a long
replay. Breaks (half time, ...) are compressed to a few wall seconds by default.

Per event it publishes two messages: the event on the match's events topic, then the state
after it, retained, on the match's state topic, so a late subscriber knows the score at once.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import structlog

from events import (
    CONTENT_TYPE,
    Event,
    MatchClock,
    MatchState,
    MessageProps,
    Publisher,
    Topics,
    apply,
    encode_event,
    encode_state,
)
from simulator._matchfile import Match
from simulator._recording import Recording
from simulator._timeline import Scheduled, expand, state_before

__all__ = ["Clock", "MonotonicClock", "ReplayOptions", "ReplayReport", "Replayer", "wall_offsets"]

_log = structlog.get_logger("matchcast.replay")


class Clock(Protocol):
    """A monotonic clock the scheduler can read and wait on; tests inject a fake."""

    def now(self) -> float:
        """Seconds on a monotonic scale."""
        ...

    async def sleep_until(self, deadline: float) -> None:
        """Return at or just after ``deadline`` (same scale as :meth:`now`)."""
        ...


class MonotonicClock:
    """``time.monotonic`` with asyncio sleeps.

    ``loop.time()`` is not used: under uvloop it ticks in whole milliseconds.
    """

    def now(self) -> float:
        """Seconds on the monotonic clock."""
        return time.monotonic()

    async def sleep_until(self, deadline: float) -> None:
        """Sleep until ``deadline``; epoll rounds up to whole ms, so wake 1 ms early and yield."""
        remaining = deadline - time.monotonic()
        if remaining > 0.002:
            await asyncio.sleep(remaining - 0.001)
        while time.monotonic() < deadline:  # noqa: ASYNC110 - a sub-millisecond spin
            await asyncio.sleep(0)


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    """How to replay.

    Attributes:
        speed: match seconds per wall second (1 real time, 60 a minute a second); None for as
            fast as the broker takes it. For a :class:`Recording`: times faster than recorded.
        start: start at the first event at or after this clock, publishing the state at that
            point first; None for kickoff.
        break_seconds: wall seconds each break (half time, ...) lasts; None for its real length
            divided by ``speed``.
        qos: QoS of every message.
        topics: the topic tree.
        event_expiry: MQTT 5 message expiry of events, seconds; None for no expiry.
        max_inflight: publishes awaiting acknowledgement at once at ``speed=None``.
    """

    speed: float | None = 60.0
    start: MatchClock | None = None
    break_seconds: float | None = 2.0
    qos: int = 1
    topics: Topics = field(default_factory=Topics)
    event_expiry: int | None = 3600
    max_inflight: int = 64


@dataclass(slots=True)
class ReplayReport:
    """What a replay did.

    Attributes:
        published: events published.
        first_seq: seq of the first event published.
        last_seq: seq of the last event published.
        lateness_s: per event, seconds between its deadline and its publish call.
        duration_s: wall seconds from start to the last acknowledgement.
        final_state: the state after the last event.
    """

    match_id: str
    published: int = 0
    first_seq: int = 0
    last_seq: int = 0
    lateness_s: list[float] = field(default_factory=list)
    duration_s: float = 0.0
    final_state: MatchState | None = None


def wall_offsets(
    stream: list[Scheduled], options: ReplayOptions, break_minutes: int
) -> list[float]:
    """Wall seconds from kickoff to each event under ``options`` (all zeros at max speed)."""
    if options.speed is None:
        return [0.0] * len(stream)
    speed = options.speed
    brk = break_minutes * 60 / speed if options.break_seconds is None else options.break_seconds
    return [s.play_s / speed + s.breaks * brk for s in stream]


def _start_index(events: list[Event], start: MatchClock | None) -> int:
    if start is None:
        return 0
    key = start.sort_key
    for i, event in enumerate(events):
        if event.clock.sort_key >= key:
            return i
    return len(events)


def _plan(
    source: Match | Recording, options: ReplayOptions
) -> tuple[MatchState, list[Event], list[MatchState], list[float]]:
    """The state before the first event, the events, the state after each, and wall offsets."""
    if isinstance(source, Recording):
        return (
            source.initial,
            list(source.events),
            list(source.states),
            source.wall_offsets(options.speed),
        )
    stream = expand(source)
    initial = state = state_before(source, stream, 0)
    states = []
    for item in stream:
        state = apply(state, item.event)
        states.append(state)
    offsets = wall_offsets(stream, options, source.break_minutes)
    return initial, [item.event for item in stream], states, offsets


class Replayer:
    """Publishes matches through a :class:`~events.Publisher` on schedule."""

    def __init__(
        self,
        publisher: Publisher,
        options: ReplayOptions | None = None,
        *,
        clock: Clock | None = None,
        wall_now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self._pub = publisher
        self.options = options or ReplayOptions()
        self._clock = clock or MonotonicClock()
        self._wall_now = wall_now

    async def run(self, match: Match | Recording) -> ReplayReport:
        """Replay ``match`` (a match file, or a recording) from ``options.start`` to the end."""
        opts = self.options
        initial, events, states, offsets = _plan(match, opts)
        begin = _start_index(events, opts.start)
        log = _log.bind(match_id=match.match_id)
        report = ReplayReport(match_id=match.match_id)
        state = states[begin - 1] if begin else initial
        base = offsets[begin] if begin < len(events) else 0.0
        topics = opts.topics
        events_topic, state_topic = topics.events(match.match_id), topics.state(match.match_id)
        window = asyncio.Semaphore(opts.max_inflight if opts.speed is None else 1)

        log.info(
            "replay.started",
            events=len(events) - begin,
            first_seq=events[begin].seq if begin < len(events) else None,
            speed=opts.speed or "max",
            start=opts.start.label if opts.start else "kickoff",
        )
        if state.last_seq > 0:  # a start mid-match: say the score first
            await self._pub.publish(
                state_topic,
                encode_state(state),
                qos=opts.qos,
                retain=True,
                props=_state_props(state),
            )
            log.info("replay.state_published", seq=state.last_seq, score=state.scoreline)

        t0 = self._clock.now()
        wall0 = self._wall_now()
        async with asyncio.TaskGroup() as tg:
            for i in range(begin, len(events)):
                offset = offsets[i]
                deadline = t0 + offset - base
                if opts.speed is not None:
                    await self._clock.sleep_until(deadline)
                late = self._clock.now() - deadline
                now = self._wall_now()
                event = events[i].model_copy(
                    update={
                        "emitted_at": now,
                        "scheduled_at": wall0 + dt.timedelta(seconds=offset - base),
                    }
                )
                state = states[i]
                await window.acquire()
                tg.create_task(self._send(window, events_topic, state_topic, event, state))
                report.lateness_s.append(late if opts.speed is not None else 0.0)
                report.published += 1
                report.first_seq = report.first_seq or event.seq
                report.last_seq = event.seq
                log.debug(
                    "event.scheduled", seq=event.seq, type=event.type, clock=event.clock.label
                )
                if event.type in ("goal", "full_time", "period_end", "kick_off"):
                    log.info(
                        "event.published",
                        seq=event.seq,
                        type=event.type,
                        clock=event.clock.label,
                        score=state.scoreline,
                    )
        report.duration_s = self._clock.now() - t0
        report.final_state = state
        log.info(
            "replay.finished",
            published=report.published,
            duration_s=round(report.duration_s, 3),
            score=state.scoreline,
        )
        return report

    async def _send(
        self,
        window: asyncio.Semaphore,
        events_topic: str,
        state_topic: str,
        event: Event,
        state: MatchState,
    ) -> None:
        qos = self.options.qos
        try:
            # Both publish calls are issued before either is awaited, so event N, state N,
            # event N+1, state N+1 reach the wire in that order even with many in flight.
            await asyncio.gather(
                self._pub.publish(
                    events_topic,
                    encode_event(event),
                    qos=qos,
                    props=MessageProps(
                        content_type=CONTENT_TYPE,
                        message_expiry=self.options.event_expiry,
                        user=(("seq", str(event.seq)), ("type", event.type)),
                    ),
                ),
                self._pub.publish(
                    state_topic,
                    encode_state(state),
                    qos=qos,
                    retain=True,
                    props=_state_props(state),
                ),
            )
        finally:
            window.release()


def _state_props(state: MatchState) -> MessageProps:
    return MessageProps(content_type=CONTENT_TYPE, user=(("seq", str(state.last_seq)),))
