"""One run of a match in the replayer: its id (:func:`new_run`), the state it starts from
(:func:`_landing`) and its publishing loop (:class:`_Run`), on time, through pauses, speed
changes and seeks (a seek is a new run), and restartable from any event after a reconnect.

:class:`~simulator._replay.Replayer` makes a :class:`_Run` for each match it plays and drives
it through a lost connection; a replay under chaos is sent by simulator/_chaos_sender.py.
"""

from __future__ import annotations

import asyncio
import bisect
import datetime as dt
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import structlog

from events import (
    Event,
    MatchPlayback,
    MatchState,
    MessageProps,
    Reconnectable,
    encode_event,
    encode_state,
)
from simulator._sending import _event_props, _state_props

if TYPE_CHECKING:
    from simulator._control import Playhead
    from simulator._replay import Replayer, ReplayReport
    from simulator._states import ReplayStates

_last_run = 0


def new_run(now: dt.datetime) -> int:
    """The id of a run starting at ``now``: ms since the Unix epoch, and larger than every
    run this process made before (two runs in one millisecond still differ)."""
    global _last_run  # noqa: PLW0603 - one counter per process, by design
    run = max(int(now.timestamp() * 1000), _last_run + 1)
    _last_run = run
    return run


def _landing(
    states: Sequence[MatchState], events: Sequence[Event], index: int, initial: MatchState
) -> MatchState:
    """The state a start at event ``index`` publishes first (``--from``, a seek): the state
    before that event, on the clock of the minute it lands on (``seek 80`` shows 80', not the
    79' of the event before)."""
    if not index:
        return initial
    state = states[index - 1]
    if index < len(events) and state.status == "live":
        return state.model_copy(update={"clock": events[index].clock})
    return state


class _Run:
    """One replay's publishing loop, restartable from any event after a reconnect."""

    def __init__(
        self,
        replayer: Replayer,
        initial: MatchState,
        events: list[Event],
        states: ReplayStates,
        plain_states: ReplayStates,
        playhead: Playhead,
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
        self.plain_states = plain_states  # without a run: a seek stamps its new run on them
        self.initial = initial
        self.playhead = playhead
        #: Set by :meth:`Replayer.control` after a change, to wake the loop's wait.
        self.wake = asyncio.Event()
        self._sleep: asyncio.Timeout | None = None  # the wait a change interrupts
        self.begin = playhead.next_index
        self.finished = False
        self.stopped_early = False
        self.t0 = t0
        self.wall0 = wall0
        self.report = report
        self.log = log
        self.unacked: dict[int, int] = {}  # seq -> messages of it not yet acknowledged
        self.sends: set[asyncio.Task[None]] = set()
        self.next_index = 0
        self.sent_index: list[int] = []  # indices published, in order (first time only)
        self.sent_at: list[float] = []  # and when, on the monotonic clock
        self.high_water = 0  # one past the last index ever published
        #: When each event was first emitted: a resent event (after a failover) keeps it, so
        #: a consumer that already has it sees a duplicate, not a new run of the match.
        self.emitted: dict[int, dt.datetime] = {}

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

    def playback(self) -> MatchPlayback:
        """Where this match is, for the status and the replies (after a seek the loop has
        not taken yet: where it goes)."""
        ph = self.playhead
        sent = (ph.seek_to if ph.seek_to is not None else self.next_index) - 1
        event = self.events[sent] if 0 <= sent < len(self.events) else None
        clock = event.clock if event is not None else None
        # A seek (or --from) lands at its minute: until the run's first event is out, the
        # clock is that event's, not the one before it.
        landing = ph.seek_to if ph.seek_to is not None else self.next_index
        if (ph.seek_to is not None or landing == self.begin) and 0 < landing < len(self.events):
            clock = self.events[landing].clock
        return MatchPlayback(
            match_id=self.report.match_id,
            state=ph.state,
            speed="max" if ph.speed is None else ph.speed,
            clock=clock,
            run=self.report.run,
            last_seq=event.seq if event is not None else 0,
            since=ph.since,
        )

    def interrupt(self) -> None:
        """A control change: wake the loop's wait now (called from another task)."""
        self.wake.set()
        if self._sleep is not None:
            self._sleep.reschedule(asyncio.get_running_loop().time())

    async def _wait(self, deadline: float | None) -> bool:
        """Wait for ``deadline`` (None: until a control change); True if it came with no
        change. The wait runs in this task, in a timeout a change moves to now: no task per
        event, so the schedule's lateness stays what the clock gives."""
        version = self.playhead.version
        try:
            async with asyncio.timeout(None) as self._sleep:
                if deadline is None:
                    await self.wake.wait()
                else:
                    await self.clock.sleep_until(deadline)
        except TimeoutError:
            return False  # interrupted by a change
        finally:
            self._sleep = None
        return deadline is not None and self.playhead.version == version

    async def _turn(
        self, index: int, window_of: Callable[[], asyncio.Semaphore], tg: asyncio.TaskGroup
    ) -> int | None:
        """The index of the event to publish now, after waiting for its turn; None to stop.

        A pause waits here, holding the schedule; a seek starts a new run and moves the index.
        """
        ph = self.playhead
        while True:
            self.wake.clear()
            ph.next_index = index
            if ph.state == "stopped":
                return None
            target = ph.take_seek(self.clock.now())
            if target is not None:
                index = await self._seek(target, window_of(), tg)
                continue
            if ph.state == "paused":
                await self._wait(None)
                continue
            if ph.speed is None:
                return index
            if await self._wait(ph.deadline(index)):
                return index

    async def _seek(self, index: int, window: asyncio.Semaphore, tg: asyncio.TaskGroup) -> int:
        """Start a new run at event ``index``: its state goes out before any of its events."""
        report = self.report
        old = report.run
        report.run = new_run(self.wall_now())
        self.states = self.plain_states.with_run(report.run)  # computed as reached
        self.initial = self.initial.model_copy(update={"run": report.run})
        state = _landing(self.states, self.events, index, self.initial)
        self.begin = index
        self.high_water = index
        self.sent_index.clear()
        self.sent_at.clear()
        self.emitted.clear()
        self.unacked.clear()
        self.next_index = index
        report.final_state = state
        topic = self.options.topics.state(report.match_id)
        await window.acquire()
        self._spawn(tg, window, None, topic, encode_state(state), True, _state_props(state))
        self.log = self.log.bind(run=report.run)
        self.log.info(
            "replay.sought",
            old_run=old,
            clock=self.events[index].clock.label if index < len(self.events) else "end",
            from_seq=index + 1,
            score=state.scoreline,
        )
        return index

    def _spawn(
        self,
        tg: asyncio.TaskGroup,
        window: asyncio.Semaphore,
        seq: int | None,
        topic: str,
        payload: bytes,
        retain: bool,
        props: MessageProps,
    ) -> asyncio.Task[None]:
        """Publish in a task of ``tg`` (the caller acquired ``window``); ``seq`` None for a
        message that is no event's (a seek's state), not tracked for a resume."""
        if seq is not None:
            self.unacked[seq] = self.unacked.get(seq, 0) + 1
        send = tg.create_task(
            self._send(window, self.report.run, seq, topic, payload, retain, props)
        )
        self.sends.add(send)
        send.add_done_callback(self.sends.discard)
        return send

    async def publish_from(self, index: int) -> None:
        opts = self.options
        pub = self.pub
        report = self.report
        match_id = report.match_id
        events_topic, state_topic = opts.topics.events(match_id), opts.topics.state(match_id)
        ph = self.playhead
        # Timed: each match waits for its own event and state, so matches keep their schedules.
        timed = asyncio.Semaphore(2)

        def window_of() -> asyncio.Semaphore:
            return self.shared_window if ph.speed is None else timed

        self.sends = set()
        self.unacked.clear()
        async with asyncio.TaskGroup() as tg:
            watcher = tg.create_task(pub.wait_lost()) if isinstance(pub, Reconnectable) else None
            i = index
            while True:
                turn = await self._turn(i, window_of, tg) if i < len(self.events) else None
                if turn is None:
                    if ph.state == "stopped" and self.next_index < len(self.events):
                        self.stopped_early = True
                    break
                i = turn
                deadline = ph.deadline(i)
                late = self.clock.now() - deadline if ph.speed is not None else 0.0
                event = self.events[i].model_copy(
                    update={
                        "run": report.run,
                        "emitted_at": self.emitted.setdefault(i, self.wall_now()),
                        "scheduled_at": self.wall0 + dt.timedelta(seconds=deadline - self.t0),
                    }
                )
                state = self.states[i]
                resent = i < self.high_water
                self.next_index = i + 1
                # One task per message, created in order: tasks start in creation order, so
                # event N, state N, event N+1, ... reach the wire in that order even with many
                # in flight, and the window bounds the messages awaiting acknowledgement.
                window = window_of()
                for topic, payload, retain, props in (
                    (events_topic, encode_event(event), False, _event_props(self.options, event)),
                    (state_topic, encode_state(state), True, _state_props(state)),
                ):
                    await window.acquire()
                    self._spawn(tg, window, event.seq, topic, payload, retain, props)
                i += 1
                if resent:
                    report.resent += 1
                    continue
                self.high_water = i
                self.sent_index.append(i - 1)
                self.sent_at.append(self.clock.now())
                report.lateness_s.append(late)
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
            if self.sends:  # every message of this match acknowledged
                await asyncio.wait(self.sends)
            if watcher is not None:
                watcher.cancel()

    async def _send(
        self,
        window: asyncio.Semaphore,
        run: int,
        seq: int | None,
        topic: str,
        payload: bytes,
        retain: bool,
        props: MessageProps,
    ) -> None:
        try:
            await self.pub.publish(topic, payload, qos=self.options.qos, retain=retain, props=props)
        finally:
            window.release()
        if seq is None or run != self.report.run or seq not in self.unacked:
            return  # a seek's state, or a message of a run a seek ended
        left = self.unacked[seq] - 1
        if left:
            self.unacked[seq] = left
        else:
            del self.unacked[seq]
