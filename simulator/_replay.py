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

A running replay can be controlled (:meth:`Replayer.control`): each match has a
:class:`~simulator._control.Playhead` that pause, resume and speed change re-base, and a seek
starts a new run of the match at the target minute (its state first, then the events from
there), so consumers resynchronise from the new run's snapshot. See docs/control.md.

This module holds the :class:`Replayer`, its options and report, and what it does around a
run: prepare it, announce it, reconnect, say it stopped. A run's publishing loop (its
schedule, pauses and seeks) is simulator/_run.py; a replay under chaos is sent by
simulator/_chaos_sender.py; the properties both put on their messages are in
simulator/_sending.py.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

import structlog

from events import (
    BrokerError,
    ControlCommand,
    Event,
    MatchClock,
    MatchPlayback,
    MatchState,
    PlaybackState,
    Publisher,
    Reconnectable,
    ReplayStopped,
    Topics,
    apply,
    check_speed,
    encode_event,
    encode_state,
    in_range,
    topic_spec,
)
from simulator._chaos import Fault
from simulator._chaos_sender import _Chaos
from simulator._chaos_spec import ChaosSpec
from simulator._control import Playhead, apply_command
from simulator._matchfile import Match
from simulator._recording import Recording
from simulator._run import _landing, _Run, new_run
from simulator._sending import _event_props, _first, _state_props
from simulator._states import ReplayStates
from simulator._timeline import Scheduled, expand, state_before

__all__ = [
    "MAX_BREAK_SECONDS",
    "MAX_RESEND_WINDOW_S",
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
#: The longest ``resend_window`` (a day) and break (an hour, ``--break-seconds``).
MAX_RESEND_WINDOW_S = 86_400.0
MAX_BREAK_SECONDS = 3600.0

#: Seconds a stopping replay waits for the broker to take its ``replay_stopped`` and state.
STOP_TIMEOUT_S = 2.0


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
        qos: QoS of every message (default: the events topic's in :data:`events.TOPIC_TREE`).
        topics: the topic tree.
        event_expiry: MQTT 5 message expiry of events, seconds; None for no expiry (default:
            the events topic's in :data:`events.TOPIC_TREE`).
        max_inflight: messages awaiting acknowledgement at once at ``speed=None``.
        chaos: faults to inject (see :mod:`simulator._chaos`); None for a clean stream.
        seed: the seed of the chaos: the same seed makes the same faults.
        resend_window: after a reconnect, re-send the events published in the last this
            many wall seconds (a broker killed loses what it acknowledged since its last
            save); 0 re-sends only what the broker had not acknowledged.
        cancel_is_stop: a cancel (Ctrl-C) is how the program ends, not a mishap: the
            replay's end is logged as info, not a warning (``web --demo``).
    """

    speed: float | None = 60.0
    start: MatchClock | None = None
    break_seconds: float | None = 2.0
    qos: int = topic_spec("events").qos
    topics: Topics = field(default_factory=Topics)
    event_expiry: int | None = topic_spec("events").expiry
    max_inflight: int = 64
    chaos: ChaosSpec | None = None
    seed: int = 0
    resend_window: float = RESEND_WINDOW_S
    cancel_is_stop: bool = False

    def __post_init__(self) -> None:
        """Every number finite and in its documented range (a NaN speed once ended a replay)."""
        check_speed(self.speed)
        if self.break_seconds is not None:
            in_range(self.break_seconds, 0, MAX_BREAK_SECONDS, "break_seconds")
        in_range(self.resend_window, 0, MAX_RESEND_WINDOW_S, "resend_window")


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


OffsetsAt = Callable[[float | None], Sequence[float]]


def _plan(
    source: Match | Recording, options: ReplayOptions
) -> tuple[MatchState, list[Event], ReplayStates, OffsetsAt]:
    """The state before the first event, the events, the state after each, and the wall
    offsets of the events at a given speed.

    The states are computed as the replay reaches them, so memory stays linear in the events.
    """
    if isinstance(source, Recording):
        return source.initial, list(source.events), source.states.copy(), source.wall_offsets
    stream = expand(source)
    initial = state_before(source, stream, 0)
    events = [item.event for item in stream]

    def offsets_at(speed: float | None) -> list[float]:
        return wall_offsets(stream, replace(options, speed=speed), source.break_minutes)

    return initial, events, ReplayStates(initial, events), offsets_at


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A run of a match before it starts: its events, their states, and where it begins.

    Attributes:
        initial: the state before the first event, stamped with the run.
        events: every event of the match.
        states: the state after each event, stamped with the run.
        plain_states: the same without a run (a seek stamps its new run on them).
        offsets_at: the wall offsets of the events at a given speed.
        begin: the index of the first event to publish (``options.start``).
        state: the state before ``begin``.
        report: what the replay reports, filled in as it goes.
        log: the logger bound to the match and the run.
    """

    initial: MatchState
    events: list[Event]
    states: ReplayStates
    plain_states: ReplayStates
    offsets_at: OffsetsAt
    begin: int
    state: MatchState
    report: ReplayReport
    log: structlog.typing.FilteringBoundLogger


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
        #: Playback of the whole replayer: what a command without ``match`` changes, and what
        #: a match started later (``--one-after-another``) begins with.
        self.state: PlaybackState = "playing"
        self.speed: float | None = self.options.speed
        self.since = wall_now()
        #: The matches started, by id (finished ones stay, stopped).
        self.runs: dict[str, _Run] = {}
        #: Called after every change of playback (the app republishes the status).
        self.on_change: Callable[[], None] | None = None

    def playback(self) -> list[MatchPlayback]:
        """Where each match started is."""
        return [run.playback() for run in self.runs.values()]

    def control(self, command: ControlCommand) -> str | None:
        """Apply ``command``; None when done, else why it was refused (nothing changed).

        Without ``command.match`` it applies to every match, and to those started later.
        """
        error = apply_command(self, self.runs, command, self.clock.now(), self.wall_now())
        if error is None and self.on_change is not None:
            self.on_change()
        return error

    def _playhead(
        self, offsets_at: OffsetsAt, begin: int, t0: float, wall0: dt.datetime
    ) -> Playhead:
        """A new match's playhead, in the replayer's state and at its speed."""
        playhead = Playhead(offsets_at, self.speed, self.since)
        playhead.start(begin, t0)
        if self.state == "paused":
            playhead.pause(t0, wall0)
        elif self.state == "stopped":
            playhead.stop(wall0)
        return playhead

    async def _reconnect(
        self, run: _Run, reason: str, retry: int | None
    ) -> tuple[int, MatchState | None]:
        """Replace the lost connection: the index to go on from, and the state to publish
        first (None: the resent events carry their states). ``retry``: the index of a resume
        whose first publish failed, tried again."""
        assert isinstance(self.publisher, Reconnectable)
        report = run.report
        run.log.warning("replay.connection_lost", reason=reason, last_seq=report.last_seq)
        await self.publisher.reconnect()
        report.reconnects += 1
        index = max(run.begin, run.resume_index(self.options.resend_window))
        if retry is not None:
            index = retry
        run.log.info(
            "replay.resuming", from_seq=index + 1, unacked_from_seq=run.first_unacked() + 1
        )
        # Each resent event is followed by its state, retained. A state older than the one
        # the broker holds, sent first, would set its retained state back: only with nothing
        # left to send is the broker told where we are.
        if index < len(run.events):
            return index, None
        return index, run.states[index - 1] if index else run.initial

    async def _publish_state(self, topic: str, state: MatchState) -> None:
        await self.publisher.publish(
            topic, encode_state(state), qos=self.options.qos, retain=True, props=_state_props(state)
        )

    async def run(self, match: Match | Recording, *, delay_s: float = 0.0) -> ReplayReport:
        """Replay ``match`` (a match file, or a recording) from ``options.start`` to the end,
        as a new run (:func:`new_run`; ``ReplayReport.run`` says which).

        Args:
            match: the match, or a recording of one.
            delay_s: wall seconds to wait before the first event (ignored at maximum speed),
                so that matches of one day start on their real kickoff times.
        """
        await self._wait_for_kickoff(match, delay_s)
        plan = self._prepare(match)
        if self.options.chaos is not None:  # a faulted stream of its own; not controllable
            await self._run_chaos(plan)
            return plan.report
        await self._announce(plan)
        run = self._start_run(plan)
        await self._play(run)
        self._finish(run)
        return plan.report

    async def _wait_for_kickoff(self, match: Match | Recording, delay_s: float) -> None:
        """Wait ``delay_s`` before a match of a day that starts later (not at maximum speed)."""
        if delay_s > 0 and self.options.speed is not None:
            _log.info("replay.delayed", match_id=match.match_id, delay_s=round(delay_s, 3))
            await self.clock.sleep_until(self.clock.now() + delay_s)

    def _prepare(self, match: Match | Recording) -> _Prepared:
        """A new run of ``match``: its events and states stamped with the run, and where
        ``options.start`` puts the first event."""
        run_id = new_run(self.wall_now())
        initial, events, plain_states, offsets_at = _plan(match, self.options)
        states = plain_states.with_run(run_id)  # still computed as the replay reaches each
        begin = _start_index(events, self.options.start)
        initial = initial.model_copy(update={"run": run_id})
        return _Prepared(
            initial=initial,
            events=events,
            states=states,
            plain_states=plain_states,
            offsets_at=offsets_at,
            begin=begin,
            state=_landing(states, events, begin, initial),
            report=ReplayReport(match_id=match.match_id, run=run_id),
            log=_log.bind(match_id=match.match_id, run=run_id),
        )

    async def _run_chaos(self, plan: _Prepared) -> None:
        """The replay under ``options.chaos``: the faulted stream, timed from the start."""
        begin = plan.begin
        offsets = list(plan.offsets_at(self.options.speed))
        base = offsets[begin] if begin < len(plan.events) else 0.0
        chaos = _Chaos(self, plan.log, plan.report)
        await chaos.run(plan.events[begin:], [o - base for o in offsets[begin:]], plan.state)

    async def _announce(self, plan: _Prepared) -> None:
        """Log the start; a start mid-match publishes the score at that point first."""
        opts, state = self.options, plan.state
        plan.log.info(
            "replay.started",
            events=len(plan.events) - plan.begin,
            first_seq=plan.begin + 1,
            speed=opts.speed or "max",
            start=opts.start.label if opts.start else "kickoff",
        )
        if state.last_seq > 0:  # a start mid-match: say the score first
            await self._publish_state(opts.topics.state(plan.report.match_id), state)
            plan.log.info("replay.state_published", seq=state.last_seq, score=state.scoreline)

    def _start_run(self, plan: _Prepared) -> _Run:
        """The run's publishing loop, on a playhead started now, registered for control."""
        t0 = self.clock.now()
        wall0 = self.wall_now()
        plan.report.final_state = plan.state
        playhead = self._playhead(plan.offsets_at, plan.begin, t0, wall0)
        run = _Run(
            self,
            plan.initial,
            plan.events,
            plan.states,
            plan.plain_states,
            playhead,
            t0,
            wall0,
            plan.report,
            plan.log,
        )
        self.runs[plan.report.match_id] = run
        if self.on_change is not None:
            self.on_change()
        return run

    async def _play(self, run: _Run) -> None:
        """Publish the run to its end or a stop; a cancel, an error or a control command's
        stop is said on the wire (``replay_stopped``)."""
        report, log = run.report, run.log
        try:
            await self._publish_resuming(run, run.begin)
        except asyncio.CancelledError:
            said = log.info if self.options.cancel_is_stop else log.warning
            said("replay.interrupted", last_seq=report.last_seq, published=report.published)
            await self._say_stopped(run, run.begin, run.initial, "interrupted", None, log)
            raise
        except Exception as err:
            await self._say_stopped(run, run.begin, run.initial, "error", _reason(err), log)
            raise
        finally:
            run.finished = True
            run.playhead.stop(self.wall_now())
            if self.on_change is not None:
                self.on_change()
        if run.stopped_early:  # a control command's stop: said on the wire like Ctrl-C's
            await self._say_stopped(
                run, run.begin, run.initial, "interrupted", "stopped by a control command", log
            )

    def _finish(self, run: _Run) -> None:
        """Time the run and log how it went."""
        report = run.report
        report.duration_s = self.clock.now() - run.t0
        state = report.final_state or run.initial  # set since _start_run; typed optional
        run.log.info(
            "replay.finished",
            published=report.published,
            stopped=run.stopped_early,
            reconnects=report.reconnects,
            resent=report.resent,
            duration_s=round(report.duration_s, 3),
            score=state.scoreline,
        )

    async def _publish_resuming(self, run: _Run, begin: int) -> None:
        """Publish ``run`` from ``begin`` to the end (or a stop); after a lost connection,
        reconnect and go on ``resend_window`` back (or from the first unacknowledged event, if
        earlier). The wait before a new connection is the client's, by the one failover
        policy (a connection that died at once, nothing acknowledged on it, waits longer each
        time in a row: ``matchcast/transport/failover.py``)."""
        index = begin
        resume: MatchState | None = None
        topic = self.options.topics.state(run.report.match_id)
        while True:
            try:
                if resume is not None:
                    await self._publish_state(topic, resume)
                    resume = None
                await run.publish_from(index)
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
            else:
                return
            index, resume = await self._reconnect(run, reason, index if resume else None)

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
