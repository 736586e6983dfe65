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
    BrokerError,
    Event,
    MatchClock,
    MatchState,
    MessageProps,
    Publisher,
    Reconnectable,
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
            fast as the broker takes it.
        start: start at the first event at or after this clock, publishing the state at that
            point first; None for kickoff.
        break_seconds: wall seconds each break (half time, ...) lasts; None for its real length
            divided by ``speed``.
        qos: QoS of every message.
        topics: the topic tree.
        event_expiry: MQTT 5 message expiry of events, seconds; None for no expiry.
        max_inflight: messages awaiting acknowledgement at once at ``speed=None``.
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
        reconnects: connections replaced mid-replay (each resumed at the first event the
            broker had not acknowledged).
    """

    match_id: str
    published: int = 0
    first_seq: int = 0
    last_seq: int = 0
    lateness_s: list[float] = field(default_factory=list)
    duration_s: float = 0.0
    final_state: MatchState | None = None
    reconnects: int = 0


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
        self.publisher = publisher
        self.options = options or ReplayOptions()
        self.clock: Clock = clock or MonotonicClock()
        self.wall_now = wall_now
        #: At maximum speed, the messages awaiting acknowledgement across *all* the matches
        #: this replayer runs: one window per connection, not per match, or a hundred matches
        #: queue thousands of publishes behind one client and time out.
        self.window = asyncio.Semaphore(self.options.max_inflight)

    async def run(self, match: Match | Recording, *, delay_s: float = 0.0) -> ReplayReport:
        """Replay ``match`` (a match file, or a recording) from ``options.start`` to the end.

        Args:
            match: the match, or a recording of one.
            delay_s: wall seconds to wait before the first event (ignored at maximum speed),
                so that matches of one day start on their real kickoff times.
        """
        opts = self.options
        if delay_s > 0 and opts.speed is not None:
            _log.info("replay.delayed", match_id=match.match_id, delay_s=round(delay_s, 3))
            await self.clock.sleep_until(self.clock.now() + delay_s)
        initial, events, states, offsets = _plan(match, opts)
        begin = _start_index(events, opts.start)
        log = _log.bind(match_id=match.match_id)
        report = ReplayReport(match_id=match.match_id)
        state = states[begin - 1] if begin else initial
        base = offsets[begin] if begin < len(events) else 0.0
        state_topic = opts.topics.state(match.match_id)

        log.info(
            "replay.started",
            events=len(events) - begin,
            first_seq=begin + 1,
            speed=opts.speed or "max",
            start=opts.start.label if opts.start else "kickoff",
        )
        if state.last_seq > 0:  # a start mid-match: say the score first
            await self.publisher.publish(
                state_topic,
                encode_state(state),
                qos=opts.qos,
                retain=True,
                props=_state_props(state),
            )
            log.info("replay.state_published", seq=state.last_seq, score=state.scoreline)

        t0 = self.clock.now()
        wall0 = self.wall_now()
        report.final_state = state
        index = begin
        run = _Run(self, events, states, offsets, base, t0, wall0, report, log)
        resume: MatchState | None = None
        try:
            while True:
                try:
                    if resume is not None:
                        await run.resume(resume, index)
                        resume = None
                    await run.publish_from(index)
                    break
                except BrokerError as err:
                    reason = _reconnectable(err, self.publisher)
                except ExceptionGroup as group:
                    lost, rest = group.split(BrokerError)
                    if (
                        rest is not None
                        or lost is None
                        or not isinstance(self.publisher, Reconnectable)
                    ):
                        raise
                    reason = _first(lost)
                log.warning("replay.connection_lost", reason=reason, last_seq=report.last_seq)
                await _reconnect(self.publisher)
                report.reconnects += 1
                index = run.first_unacked() if resume is None else index
                # Each resent event is followed by its state, retained. A state older than the
                # one consumers hold, sent first, would look to them like the match starting
                # again: only with nothing left to send is the broker told where we are.
                resume = None if index < len(events) else (states[index - 1] if index else initial)
        except asyncio.CancelledError:
            log.warning("replay.interrupted", last_seq=report.last_seq, published=report.published)
            raise
        report.duration_s = self.clock.now() - t0
        state = report.final_state
        log.info(
            "replay.finished",
            published=report.published,
            reconnects=report.reconnects,
            duration_s=round(report.duration_s, 3),
            score=state.scoreline,
        )
        return report


class _Run:
    """One replay's publishing loop, restartable from any event after a reconnect."""

    def __init__(
        self,
        replayer: Replayer,
        events: list[Event],
        states: list[MatchState],
        offsets: list[float],
        base: float,
        t0: float,
        wall0: dt.datetime,
        report: ReplayReport,
        log: structlog.typing.FilteringBoundLogger,
    ) -> None:
        self.pub = replayer.publisher
        self.options = replayer.options
        self.clock = replayer.clock
        self.wall_now = replayer.wall_now
        self.shared_window = replayer.window
        self.events = events
        self.states = states
        self.offsets = offsets
        self.base = base
        self.t0 = t0
        self.wall0 = wall0
        self.report = report
        self.log = log
        self.unacked: dict[int, int] = {}  # seq -> messages of it not yet acknowledged
        self.next_index = 0
        #: When each event was first emitted: a resent event (after a failover) keeps it, so
        #: a consumer that already has it sees a duplicate, not a new run of the match.
        self.emitted: dict[int, dt.datetime] = {}

    async def resume(self, state: MatchState, index: int) -> None:
        """Publish ``state`` (retained) before resuming at ``index`` after a reconnect.

        The broker may have lost its retained messages: say where we are first. A node still
        electing its retained store's leader (NATS JetStream) times out here like any
        publish; the caller reconnects and tries again.
        """
        opts = self.options
        await self.pub.publish(
            opts.topics.state(self.report.match_id),
            encode_state(state),
            qos=opts.qos,
            retain=True,
            props=_state_props(state),
        )
        self.log.info("replay.resumed", from_seq=index + 1, score=state.scoreline)

    def first_unacked(self) -> int:
        """Index of the first event not fully acknowledged: where a resumed replay starts."""
        return min(self.unacked) - 1 if self.unacked else self.next_index

    async def publish_from(self, index: int) -> None:
        opts = self.options
        pub = self.pub
        report = self.report
        match_id = report.match_id
        events_topic, state_topic = opts.topics.events(match_id), opts.topics.state(match_id)
        # Timed: each match waits for its own event and state, so matches keep their schedules.
        window = self.shared_window if opts.speed is None else asyncio.Semaphore(2)
        sends: set[asyncio.Task[None]] = set()
        self.unacked.clear()
        async with asyncio.TaskGroup() as tg:
            watcher = tg.create_task(pub.wait_lost()) if isinstance(pub, Reconnectable) else None
            for i in range(index, len(self.events)):
                offset = self.offsets[i]
                deadline = self.t0 + offset - self.base
                if opts.speed is not None:
                    await self.clock.sleep_until(deadline)
                late = self.clock.now() - deadline
                event = self.events[i].model_copy(
                    update={
                        "emitted_at": self.emitted.setdefault(i, self.wall_now()),
                        "scheduled_at": self.wall0 + dt.timedelta(seconds=offset - self.base),
                    }
                )
                state = self.states[i]
                self.unacked[event.seq] = 2
                self.next_index = i + 1
                # One task per message, created in order: tasks start in creation order, so
                # event N, state N, event N+1, ... reach the wire in that order even with many
                # in flight, and the window bounds the messages awaiting acknowledgement.
                for topic, payload, retain, props in (
                    (events_topic, encode_event(event), False, _event_props(self.options, event)),
                    (state_topic, encode_state(state), True, _state_props(state)),
                ):
                    await window.acquire()
                    send = tg.create_task(
                        self._send(window, event.seq, topic, payload, retain, props)
                    )
                    sends.add(send)
                    send.add_done_callback(sends.discard)
                report.lateness_s.append(late if opts.speed is not None else 0.0)
                report.published += 1
                report.first_seq = report.first_seq or event.seq
                report.last_seq = event.seq
                report.final_state = state
                self.log.debug(
                    "event.scheduled", seq=event.seq, type=event.type, clock=event.clock.label
                )
                if event.type in ("goal", "full_time", "period_end", "kick_off"):
                    self.log.info(
                        "event.published",
                        seq=event.seq,
                        type=event.type,
                        clock=event.clock.label,
                        score=state.scoreline,
                    )
            if sends:  # every message of this match acknowledged
                await asyncio.wait(sends)
            if watcher is not None:
                watcher.cancel()

    async def _send(
        self,
        window: asyncio.Semaphore,
        seq: int,
        topic: str,
        payload: bytes,
        retain: bool,
        props: MessageProps,
    ) -> None:
        try:
            await self.pub.publish(topic, payload, qos=self.options.qos, retain=retain, props=props)
        finally:
            window.release()
        left = self.unacked[seq] - 1
        if left:
            self.unacked[seq] = left
        else:
            del self.unacked[seq]


async def _reconnect(publisher: Publisher) -> None:
    assert isinstance(publisher, Reconnectable)  # checked where the loss was caught
    await publisher.reconnect()


def _reconnectable(err: BrokerError, publisher: Publisher) -> str:
    """The reason of ``err`` when ``publisher`` can reconnect; otherwise ``err`` is raised."""
    if not isinstance(publisher, Reconnectable):
        raise err
    return err.reason


def _first(group: BaseExceptionGroup[BrokerError]) -> str:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return str(exc)


def _event_props(options: ReplayOptions, event: Event) -> MessageProps:
    return MessageProps(
        content_type=CONTENT_TYPE,
        message_expiry=options.event_expiry,
        user=(("seq", str(event.seq)), ("type", event.type)),
    )


def _state_props(state: MatchState) -> MessageProps:
    return MessageProps(content_type=CONTENT_TYPE, user=(("seq", str(state.last_seq)),))
