"""Replay a match onto a publisher on a timed schedule.

The scheduler maps match time onto wall time with a speed factor and publishes each event at
an absolute deadline taken from a monotonic clock, so lateness never accumulates over a long
replay. Breaks (half time, ...) are compressed to a few wall seconds by default.

Per event it publishes two messages: the event on the match's events topic, then the state
after it, retained, on the match's state topic, so a late subscriber knows the score at once.

Each call of :meth:`Replayer.run` is a new *run* of its match: every event and state it
publishes carries ``run``, the run's start in milliseconds since the Unix epoch, so consumers
can tell a restarted replay (a larger run) from a stale or redelivered message of an earlier
one. Within a run, seqs are 1, 2, 3, ... and never reused.

A broker killed without warning (SIGKILL, power loss) loses what it acknowledged since its
last save: mosquitto saves every ``autosave_interval`` seconds (1800 by default), and the
retained state and its clients' session queues go back with it. So after a reconnect the
replayer re-sends the events (and states) it published in the last ``resend_window`` seconds,
not only those the broker had not acknowledged; consumers drop by seq what they already
handled, and nothing is missing.
"""

from __future__ import annotations

import asyncio
import bisect
import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

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
    ReplayStopped,
    Topics,
    apply,
    encode_event,
    encode_state,
)
from simulator._chaos import Emission, Fault, apply_chaos
from simulator._chaos_spec import ChaosSpec
from simulator._matchfile import Match
from simulator._recording import Recording
from simulator._states import ReplayStates
from simulator._timeline import Scheduled, expand, state_before

__all__ = [
    "RESEND_WINDOW_S",
    "Clock",
    "MonotonicClock",
    "ReplayOptions",
    "ReplayReport",
    "Replayer",
    "new_run",
    "wall_offsets",
]

_log = structlog.get_logger("matchcast.replay")

#: Seconds of recent events re-sent after a reconnect by default: mosquitto's default
#: ``autosave_interval`` (1800 s), plus a minute of margin.
RESEND_WINDOW_S = 1860.0

#: Seconds a stopping replay waits for the broker to take its ``replay_stopped`` and state.
STOP_TIMEOUT_S = 2.0

_last_run = 0


def new_run(now: dt.datetime) -> int:
    """The id of a run starting at ``now``: ms since the Unix epoch, and larger than every
    run this process made before (two runs in one millisecond still differ)."""
    global _last_run  # noqa: PLW0603 - one counter per process, by design
    run = max(int(now.timestamp() * 1000), _last_run + 1)
    _last_run = run
    return run


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
        chaos: faults to inject (see :mod:`simulator._chaos`); None for a clean stream.
        seed: the seed of the chaos: the same seed makes the same faults.
        resend_window: after a reconnect, re-send the events published in the last this
            many wall seconds (a broker killed loses what it acknowledged since its last
            save); 0 re-sends only what the broker had not acknowledged.
    """

    speed: float | None = 60.0
    start: MatchClock | None = None
    break_seconds: float | None = 2.0
    qos: int = 1
    topics: Topics = field(default_factory=Topics)
    event_expiry: int | None = 3600
    max_inflight: int = 64
    chaos: ChaosSpec | None = None
    seed: int = 0
    resend_window: float = RESEND_WINDOW_S


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
        reconnects: connections replaced mid-replay (each resumed ``resend_window`` back,
            or at the first event the broker had not acknowledged if that is earlier).
        resent: events published again after a reconnect: the window, and any in flight
            when the connection dropped.
        run: the run's id (its start, ms since the Unix epoch), on every message it sent.
        faults: under chaos, every fault injected, in send order.
        truth: under chaos, the true final state (the one a correct consumer ends with).
    """

    match_id: str
    run: int = 0
    resent: int = 0
    published: int = 0
    first_seq: int = 0
    last_seq: int = 0
    lateness_s: list[float] = field(default_factory=list)
    duration_s: float = 0.0
    final_state: MatchState | None = None
    reconnects: int = 0
    faults: tuple[Fault, ...] = ()
    truth: MatchState | None = None


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
) -> tuple[MatchState, list[Event], ReplayStates, list[float]]:
    """The state before the first event, the events, the state after each, and wall offsets.

    The states are computed as the replay reaches them, so memory stays linear in the events.
    """
    if isinstance(source, Recording):
        return (
            source.initial,
            list(source.events),
            source.states.copy(),
            source.wall_offsets(options.speed),
        )
    stream = expand(source)
    initial = state_before(source, stream, 0)
    events = [item.event for item in stream]
    offsets = wall_offsets(stream, options, source.break_minutes)
    return initial, events, ReplayStates(initial, events), offsets


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
        """Replay ``match`` (a match file, or a recording) from ``options.start`` to the end,
        as a new run (:func:`new_run`; ``ReplayReport.run`` says which).

        Args:
            match: the match, or a recording of one.
            delay_s: wall seconds to wait before the first event (ignored at maximum speed),
                so that matches of one day start on their real kickoff times.
        """
        opts = self.options
        if delay_s > 0 and opts.speed is not None:
            _log.info("replay.delayed", match_id=match.match_id, delay_s=round(delay_s, 3))
            await self.clock.sleep_until(self.clock.now() + delay_s)
        run_id = new_run(self.wall_now())
        initial, events, states, offsets = _plan(match, opts)
        initial = initial.model_copy(update={"run": run_id})
        states = states.with_run(run_id)  # still computed as the replay reaches each
        begin = _start_index(events, opts.start)
        log = _log.bind(match_id=match.match_id, run=run_id)
        report = ReplayReport(match_id=match.match_id, run=run_id)
        state = states[begin - 1] if begin else initial
        base = offsets[begin] if begin < len(events) else 0.0
        state_topic = opts.topics.state(match.match_id)
        if opts.chaos is not None:
            chaos = _Chaos(self, log, report)
            await chaos.run(events[begin:], [o - base for o in offsets[begin:]], state)
            return report

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
        run = _Run(self, events, states, offsets, base, t0, wall0, report, log)
        try:
            await self._publish_resuming(run, begin, initial)
        except asyncio.CancelledError:
            log.warning("replay.interrupted", last_seq=report.last_seq, published=report.published)
            await self._say_stopped(run, begin, initial, "interrupted", None, log)
            raise
        except Exception as err:
            await self._say_stopped(run, begin, initial, "error", _reason(err), log)
            raise
        report.duration_s = self.clock.now() - t0
        state = report.final_state
        log.info(
            "replay.finished",
            published=report.published,
            reconnects=report.reconnects,
            resent=report.resent,
            duration_s=round(report.duration_s, 3),
            score=state.scoreline,
        )
        return report

    async def _publish_resuming(self, run: _Run, begin: int, initial: MatchState) -> None:
        """Publish ``run`` from ``begin`` to the end; after a lost connection, reconnect and go
        on ``resend_window`` back (or from the first unacknowledged event, if earlier)."""
        opts, report, log = self.options, run.report, run.log
        events, states = run.events, run.states
        index = begin
        resume: MatchState | None = None
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
            if resume is None:  # else the resume itself failed: try it again
                index = max(begin, run.resume_index(opts.resend_window))
            log.info(
                "replay.resuming",
                from_seq=index + 1,
                unacked_from_seq=run.first_unacked() + 1,
            )
            # Each resent event is followed by its state, retained. A state older than the
            # one the broker holds, sent first, would set its retained state back: only with
            # nothing left to send is the broker told where we are.
            resume = None if index < len(events) else (states[index - 1] if index else initial)

    async def _say_stopped(
        self,
        run: _Run,
        begin: int,
        initial: MatchState,
        reason: Literal["interrupted", "error"],
        detail: str | None,
        log: structlog.typing.FilteringBoundLogger,
    ) -> None:
        """Publish ``replay_stopped`` and the ``stopped`` state after it, so the retained state
        does not say ``live`` forever. Best effort, within :data:`STOP_TIMEOUT_S`: on a dead
        connection nothing is said, and the replayer's last will says it is offline.

        Said only when the run published something (a state or an event) to stop."""
        sent = max(run.next_index, run.high_water)  # handed to the broker (some in flight)
        if sent > begin:
            state = run.states[sent - 1]
        else:  # no event yet: the state a start mid-match published first, if any
            state = run.states[begin - 1] if begin else initial
        if state.last_seq == 0 or state.clock is None or state.status == "finished":
            return
        opts = self.options
        event = ReplayStopped(
            match_id=state.match_id,
            run=run.report.run,
            seq=state.last_seq + 1,
            clock=state.clock,
            emitted_at=self.wall_now(),
            reason=reason,
            detail=detail,
        )
        stopped = apply(state, event)
        try:
            async with asyncio.timeout(STOP_TIMEOUT_S):
                await self.publisher.publish(
                    opts.topics.events(state.match_id),
                    encode_event(event),
                    qos=opts.qos,
                    props=_event_props(opts, event),
                )
                await self.publisher.publish(
                    opts.topics.state(state.match_id),
                    encode_state(stopped),
                    qos=opts.qos,
                    retain=True,
                    props=_state_props(stopped),
                )
        except (TimeoutError, BrokerError, OSError) as err:
            log.warning("replay_stopped.not_published", reason=str(err) or type(err).__name__)
            return
        run.report.final_state = stopped
        log.info("replay.stopped", reason=reason, seq=event.seq, clock=event.clock.label)


class _Run:
    """One replay's publishing loop, restartable from any event after a reconnect."""

    def __init__(
        self,
        replayer: Replayer,
        events: list[Event],
        states: ReplayStates,
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
        self.sent_index: list[int] = []  # indices published, in order (first time only)
        self.sent_at: list[float] = []  # and when, on the monotonic clock
        self.high_water = 0  # one past the last index ever published
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
        """Index of the first event not fully acknowledged."""
        return min(self.unacked) - 1 if self.unacked else self.next_index

    def resume_index(self, window_s: float) -> int:
        """Where a reconnected replay starts: the first event published in the last
        ``window_s`` seconds, or the first not acknowledged if that is earlier."""
        first = self.first_unacked()
        at = bisect.bisect_left(self.sent_at, self.clock.now() - window_s)
        if at < len(self.sent_index):
            first = min(first, self.sent_index[at])
        return first

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
                        "run": report.run,
                        "emitted_at": self.emitted.setdefault(i, self.wall_now()),
                        "scheduled_at": self.wall0 + dt.timedelta(seconds=offset - self.base),
                    }
                )
                state = self.states[i]
                resent = i < self.high_water
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
                if resent:
                    report.resent += 1
                    continue
                self.high_water = i + 1
                self.sent_index.append(i)
                self.sent_at.append(self.clock.now())
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


class _Chaos:
    """A replay under chaos: sends what :func:`~simulator._chaos.apply_chaos` says, on time.

    Each message goes out at its own due time (at maximum speed only delayed and held ones
    wait). After a lost connection, as a clean replay does, it reconnects, republishes the
    retained state and resumes at the first message the broker had not acknowledged.
    """

    def __init__(
        self, replayer: Replayer, log: structlog.typing.FilteringBoundLogger, report: ReplayReport
    ) -> None:
        self.replayer = replayer
        self.log = log
        self.report = report
        self.unacked: set[int] = set()  # indices of messages awaiting acknowledgement
        self.next_index = 0
        # A duplicate is the very payload sent before, as a QoS 1 redelivery is.
        self.sent: dict[tuple[int, int], tuple[str, bytes, MessageProps]] = {}

    async def run(self, events: list[Event], offsets: list[float], initial: MatchState) -> None:
        replayer, report = self.replayer, self.report
        opts = replayer.options
        assert opts.chaos is not None
        wall0 = replayer.wall_now()
        run_id = report.run  # this replay's run (new_run); a restart's is larger
        start = initial.model_copy(update={"run": run_id})
        stream = apply_chaos(
            events, offsets, start, opts.chaos, seed=opts.seed, key=report.match_id, run=run_id
        )
        report.faults = stream.faults
        report.truth = stream.truth
        self.log.info(
            "replay.started",
            events=len(events),
            speed=opts.speed or "max",
            chaos=str(opts.chaos),
            seed=opts.seed,
            faults=len(stream.faults),
            run=run_id,
        )
        if initial.last_seq > 0:  # a start mid-match: say the score first
            await self._publish_state(start)
        clock = replayer.clock
        t0 = clock.now()
        index = 0
        pub = replayer.publisher
        while True:
            try:
                await self._send_from(index, stream.emissions, t0, wall0)
                break
            except ExceptionGroup as group:
                lost, rest = group.split(BrokerError)
                if rest is not None or lost is None or not isinstance(pub, Reconnectable):
                    raise
                reason = _first(lost)
            self.log.warning("replay.connection_lost", reason=reason, last_seq=report.last_seq)
            await pub.reconnect()
            report.reconnects += 1
            index = min(self.unacked) if self.unacked else self.next_index
            retained = [e.state for e in stream.emissions[:index] if e.retain and e.state]
            await self._publish_state(retained[-1] if retained else start)
            self.log.info("replay.resumed", from_message=index)
        report.duration_s = clock.now() - t0
        report.final_state = stream.truth
        self.log.info(
            "replay.finished",
            published=report.published,
            faults=len(stream.faults),
            reconnects=report.reconnects,
            duration_s=round(report.duration_s, 3),
            score=stream.truth.scoreline,
        )

    async def _publish_state(self, state: MatchState) -> None:
        opts = self.replayer.options
        await self.replayer.publisher.publish(
            opts.topics.state(state.match_id),
            encode_state(state),
            qos=opts.qos,
            retain=True,
            props=_state_props(state),
        )

    async def _send_from(
        self, index: int, emissions: tuple[Emission, ...], t0: float, wall0: dt.datetime
    ) -> None:
        replayer, report = self.replayer, self.report
        opts, clock, pub = replayer.options, replayer.clock, replayer.publisher
        events_topic = opts.topics.events(report.match_id)
        state_topic = opts.topics.state(report.match_id)
        window = replayer.window if opts.speed is None else asyncio.Semaphore(2)
        sends: set[asyncio.Task[None]] = set()
        self.unacked.clear()
        async with asyncio.TaskGroup() as tg:
            watcher = tg.create_task(pub.wait_lost()) if isinstance(pub, Reconnectable) else None
            for i in range(index, len(emissions)):
                emission = emissions[i]
                deadline = t0 + emission.due
                if opts.speed is not None or emission.due > 0:
                    await clock.sleep_until(deadline)
                key = (emission.run, emission.seq)
                if emission.event is not None and key in self.sent:
                    topic, payload, props = self.sent[key]
                else:
                    topic, payload, props = self._message(
                        emission, events_topic, state_topic, wall0
                    )
                    if emission.event is not None:
                        self.sent[key] = (topic, payload, props)
                await window.acquire()
                self.unacked.add(i)
                self.next_index = i + 1
                send = tg.create_task(self._send(window, i, topic, payload, emission.retain, props))
                sends.add(send)
                send.add_done_callback(sends.discard)
                if emission.event is not None:
                    report.published += 1
                    report.lateness_s.append(clock.now() - deadline if opts.speed else 0.0)
                    report.first_seq = report.first_seq or emission.event.seq
                    report.last_seq = emission.event.seq
            if sends:
                await asyncio.wait(sends)
            if watcher is not None:
                watcher.cancel()

    def _message(
        self, emission: Emission, events_topic: str, state_topic: str, wall0: dt.datetime
    ) -> tuple[str, bytes, MessageProps]:
        replayer = self.replayer
        if emission.event is not None:
            event = emission.event.model_copy(
                update={
                    "emitted_at": replayer.wall_now(),
                    "scheduled_at": wall0 + dt.timedelta(seconds=emission.scheduled),
                }
            )
            return events_topic, encode_event(event), _event_props(replayer.options, event)
        assert emission.state is not None
        return state_topic, encode_state(emission.state), _state_props(emission.state)

    async def _send(
        self,
        window: asyncio.Semaphore,
        index: int,
        topic: str,
        payload: bytes,
        retain: bool,
        props: MessageProps,
    ) -> None:
        try:
            await self.replayer.publisher.publish(
                topic, payload, qos=self.replayer.options.qos, retain=retain, props=props
            )
        finally:
            window.release()
        self.unacked.discard(index)


async def _reconnect(publisher: Publisher) -> None:
    assert isinstance(publisher, Reconnectable)  # checked where the loss was caught
    await publisher.reconnect()


def _reconnectable(err: BrokerError, publisher: Publisher) -> str:
    """The reason of ``err`` when ``publisher`` can reconnect; otherwise ``err`` is raised."""
    if not isinstance(publisher, Reconnectable):
        raise err
    return err.reason


def _reason(err: BaseException) -> str:
    """One line for ``replay_stopped.detail``: the first error of a group, bounded."""
    while isinstance(err, BaseExceptionGroup):
        err = err.exceptions[0]
    return f"{type(err).__name__}: {err}"[:200]


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
