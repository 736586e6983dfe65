"""The load generator's sending side: many matches on one schedule, over a few connections.

One task drives every match from a heap of due times, so a thousand matches cost a thousand
small records, not a thousand tasks. Each event is stamped with ``scheduled_at`` (its due time
on the schedule) before it is sent; how late the sender was against that due time is its
*lateness*, and an event sent later than ``overrun_ms`` counts as a *sender overrun*, so a
saturated load generator shows up as such and is never mistaken for a slow broker. At
``--speed max`` there is no schedule: ``scheduled_at`` is the moment of sending.
"""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import heapq
import itertools
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from events import MatchState, Publisher, Topics
from matchcast.load._accounting import LatencySeries, StreamStats
from matchcast.load._chaos import CopyChaos, build_copy_chaos
from matchcast.load._workload import LoadShape, MatchTemplate, format_timestamp, match_ids
from simulator import ChaosSpec, Fault

__all__ = ["NowaitPublisher", "Sender", "SenderStats", "submit"]

_UNUSED = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)  # a state payload carries no timestamps
#: Under ``--stages``, how often the sender looks at the target, seconds.
_ADJUST_S = 0.05


@runtime_checkable
class NowaitPublisher(Protocol):
    """A publisher that can start a publish without a task per message (the fast client)."""

    def publish_nowait(
        self, topic: str, payload: bytes, qos: int, retain: bool
    ) -> asyncio.Future[None] | None:
        """Queue a publish; a future completing per QoS, or None if nothing is left to wait."""
        ...


SubmitFn = Callable[[str, bytes, int, bool], "asyncio.Future[None] | None"]


def submit(pub: Publisher) -> SubmitFn:
    """How to start a publish on ``pub`` without awaiting it (see :class:`NowaitPublisher`).

    Resolved once per connection: a ``runtime_checkable`` protocol check costs about 10 us.
    """
    if isinstance(pub, NowaitPublisher):
        return pub.publish_nowait

    def start(topic: str, payload: bytes, qos: int, retain: bool) -> asyncio.Future[None]:
        return asyncio.ensure_future(pub.publish(topic, payload, qos=qos, retain=retain))

    return start


@dataclass(slots=True)
class SenderStats:
    """What the sender did.

    Attributes:
        expected: per match id, the last seq published (every seq 1..last was sent once).
        offered: events due per second of the run (at max speed: events sent).
        sent: events sent per second of the run.
        lateness: how late each event was sent against its due time, us, per second.
        lag_us: per second of the run, the most the sender was behind its schedule then
            (how late the latest event it sent in that second was, us); empty at max speed.
        matches_running: matches that have sent their first event and are not over.
        running_peak: per second of the run, the most matches running at once in it (where
            a match started in it).
        matches_stopped: matches stopped before their end (``--stages`` ramping down).
        injected: under chaos, per match id, the seqs in the order really sent: what a
            perfect broker would deliver, duplicates and reordering injected included.
        truth: under chaos, per match id, the true final state.
        faults: under chaos, every fault injected (see :class:`simulator.Fault`).
    """

    events: int = 0
    states: int = 0
    failures: int = 0
    failure_reasons: Counter[str] = field(default_factory=Counter)
    overruns: int = 0
    matches_started: int = 0
    matches_completed: int = 0
    expected: dict[str, int] = field(default_factory=dict)
    final_scores: dict[str, dict[str, int]] = field(default_factory=dict)
    completed: list[str] = field(default_factory=list)
    templates: dict[str, MatchTemplate] = field(default_factory=dict)
    offered: Counter[int] = field(default_factory=Counter)
    sent: Counter[int] = field(default_factory=Counter)
    lateness: LatencySeries = field(default_factory=LatencySeries)
    lag_us: dict[int, int] = field(default_factory=dict)
    matches_running: int = 0
    running_peak: dict[int, int] = field(default_factory=dict)
    matches_stopped: int = 0
    started: float = 0.0
    finished: float = 0.0
    last_ack: float = 0.0
    last_due_s: float = 0.0
    injected: dict[str, StreamStats] = field(default_factory=dict)
    truth: dict[str, MatchState] = field(default_factory=dict)
    faults: list[Fault] = field(default_factory=list)


@dataclass(slots=True)
class _Copy:
    match_id: str
    mid: bytes
    template: MatchTemplate
    offsets: tuple[float, ...] | None
    start: float
    pub: Publisher
    conn: int
    events_topic: str
    state_topic: str
    index: int = 0
    chaos: CopyChaos | None = None
    stopped: bool = False

    @property
    def length(self) -> int:
        """Messages to send: the template's events, or the faulted stream's messages."""
        return len(self.chaos) if self.chaos is not None else len(self.template)


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


class Sender:
    """Drives ``shape.matches`` copies of ``templates`` onto ``publishers``.

    Args:
        templates: the source matches; copies cycle over them.
        shape: the load shape.
        publishers: connections to spread the matches over (round robin).
        topics: the topic tree.
        max_inflight: publishes awaiting the broker at once, per connection.
        overrun_ms: an event sent this much later than due counts as an overrun.
        wall0: epoch seconds of the run's start; ``mono0`` the same instant on the monotonic
            clock. Every due time is ``mono0 + offset``, and its ``scheduled_at`` is
            ``wall0 + offset``.
    """

    def __init__(
        self,
        templates: Sequence[MatchTemplate],
        shape: LoadShape,
        publishers: Sequence[Publisher],
        *,
        topics: Topics,
        max_inflight: int = 1000,
        overrun_ms: float = 10.0,
        id_prefix: str = "",
        first_index: int = 0,
        index_step: int = 1,
        chaos: ChaosSpec | None = None,
        seed: int = 0,
    ) -> None:
        if not templates or (shape.matches and not publishers):
            raise ValueError("a sender needs at least one match and one connection")
        self.templates = list(templates)
        self.shape = shape
        self.publishers = list(publishers)
        self.topics = topics
        self.max_inflight = max_inflight
        self.overrun_us = int(overrun_ms * 1000)
        self.id_prefix = id_prefix
        self.stats = SenderStats()
        self.first_index, self.index_step = first_index, index_step
        self._index = itertools.count(first_index, index_step)
        self._order = itertools.count()
        n = len(self.publishers)
        #: Per connection (index into ``publishers``): events sent, events the broker
        #: acknowledged (QoS 1 and 2; at QoS 0 the report has no such figure), and publishes
        #: that failed (events and states), so the report can say what went through each node.
        self.conn_events = [0] * n
        self.conn_acked = [0] * n
        self.conn_failures = [0] * n
        self._inflight = [0] * n
        self._submit = [submit(p) for p in self.publishers]
        self._callbacks = [self._done_cb(i) for i in range(n)]
        self._event_callbacks = [self._event_done_cb(i, self._callbacks[i]) for i in range(n)]
        self._slot_free: list[asyncio.Event] = [asyncio.Event() for _ in self.publishers]
        self._all_done = asyncio.Event()
        self._all_done.set()
        #: Matches waiting for a due time (their start, or their next event on a schedule).
        self._heap: list[tuple[float, int, int, _Copy]] = []
        #: At max speed, the running matches in turn.
        self._turns: collections.deque[tuple[int, _Copy]] = collections.deque()
        self._stop = False
        self._sleeping: asyncio.Future[None] | None = None
        #: Under ``--stages``: the running matches, oldest first, and the next slot.
        self._live: list[_Copy] = []
        self._slots = 0
        self.mono0 = 0.0
        self.wall0 = 0.0
        self.chaos = chaos
        self.seed = seed
        self._prepared: dict[int, CopyChaos] = {}

    def stop(self) -> None:
        """Stop sending now: at the next event, or at once if waiting for one."""
        self._stop = True
        if self._sleeping is not None:
            _wake(self._sleeping)

    async def _sleep(self, delay: float) -> None:
        """``asyncio.sleep(delay)`` that :meth:`stop` cuts short (a match at speed 60 can
        wait seconds for its next event)."""
        loop = asyncio.get_running_loop()
        self._sleeping = wake = loop.create_future()
        timer = loop.call_later(delay, _wake, wake)
        try:
            await wake
        finally:
            timer.cancel()
            self._sleeping = None

    def _new_copy(self, slot: int, start: float) -> _Copy:
        index = next(self._index)
        template = self.templates[index % len(self.templates)]
        base = self.id_prefix + template.source.match_id
        match_id = match_ids(base, self.shape.tag, index)
        self.stats.matches_started += 1
        self.stats.final_scores[match_id] = dict(template.final_score)
        self.stats.templates[match_id] = template
        offsets = self.shape.offsets(template)
        chaos = self._prepared.pop(index, None)
        if self.chaos is not None and chaos is None:  # a copy started after the run began
            run = int((self.wall0 + (start - self.mono0)) * 1000)
            chaos = build_copy_chaos(
                template.source, match_id, offsets, self.chaos, seed=self.seed, index=index, run=run
            )
        if chaos is not None:
            self.stats.truth[match_id] = chaos.truth
            self.stats.final_scores[match_id] = dict(chaos.truth.score)
            self.stats.faults.extend(chaos.faults)
            self.stats.injected[match_id] = StreamStats()
        return _Copy(
            match_id=match_id,
            mid=match_id.encode(),
            template=template,
            offsets=offsets,
            start=start,
            pub=self.publishers[slot % len(self.publishers)],
            conn=slot % len(self.publishers),
            events_topic=self.topics.events(match_id),
            state_topic=self.topics.state(match_id),
            chaos=chaos,
        )

    def _prepare_chaos(self) -> None:
        """Fault the first copies before the clock starts: 10 ms a copy (expanding, faulting
        and folding a match in pydantic) would otherwise show up as sender lateness."""
        spec, shape = self.chaos, self.shape
        if spec is None:
            return
        base_ms = int(time.time() * 1000)
        for slot in range(shape.matches):
            index = self.first_index + slot * self.index_step
            template = self.templates[index % len(self.templates)]
            match_id = match_ids(self.id_prefix + template.source.match_id, shape.tag, index)
            self._prepared[index] = build_copy_chaos(
                template.source,
                match_id,
                shape.offsets(template),
                spec,
                seed=self.seed,
                index=index,
                run=base_ms + round(shape.start_offset(index) * 1000),
            )

    def _done_cb(self, conn: int) -> Callable[[asyncio.Future[None]], None]:
        def done(fut: asyncio.Future[None]) -> None:
            self._inflight[conn] -= 1
            self.stats.last_ack = time.monotonic()
            if fut.cancelled():
                self.stats.failures += 1
                self.stats.failure_reasons["cancelled"] += 1
                self.conn_failures[conn] += 1
            elif (err := fut.exception()) is not None:
                self.stats.failures += 1
                self.stats.failure_reasons[type(err).__name__] += 1
                self.conn_failures[conn] += 1
            if self._inflight[conn] < self.max_inflight:
                self._slot_free[conn].set()
            if not any(self._inflight):
                self._all_done.set()

        return done

    def _event_done_cb(
        self, conn: int, done: Callable[[asyncio.Future[None]], None]
    ) -> Callable[[asyncio.Future[None]], None]:
        acked = self.conn_acked

        def event_done(fut: asyncio.Future[None]) -> None:
            if not fut.cancelled() and fut.exception() is None:
                acked[conn] += 1
            done(fut)

        return event_done

    def _send(self, conn: int, topic: str, payload: bytes, retain: bool) -> None:
        """Publish a state (or another message that is not an event)."""
        fut = self._submit[conn](topic, payload, self.shape.qos, retain)
        if fut is None:
            return
        self._inflight[conn] += 1
        self._all_done.clear()
        fut.add_done_callback(self._callbacks[conn])

    def _send_event(self, conn: int, topic: str, payload: bytes) -> None:
        """Publish an event, counted on its connection (sent, and acknowledged when it is)."""
        self.conn_events[conn] += 1
        fut = self._submit[conn](topic, payload, self.shape.qos, False)
        if fut is None:  # QoS 0 on the fast client: nothing to wait for
            return
        self._inflight[conn] += 1
        self._all_done.clear()
        fut.add_done_callback(self._event_callbacks[conn])

    async def _window(self, conn: int) -> None:
        while self._inflight[conn] >= self.max_inflight:
            self._slot_free[conn].clear()
            await self._slot_free[conn].wait()

    def _emit_chaos(self, copy: _Copy, chaos: CopyChaos, i: int, due: float, now: float) -> None:
        """Send message ``i`` of a faulted copy: an event (stamped) or a state."""
        stats, mono0, wall0 = self.stats, self.mono0, self.wall0
        emission = chaos.emissions[i]
        if emission.event is None:
            payload = chaos.payload(i, _UNUSED, _UNUSED)
            self._send(copy.conn, copy.state_topic, payload, emission.retain)
            stats.states += 1
            return
        emitted = dt.datetime.fromtimestamp(wall0 + (now - mono0), dt.UTC)
        start = dt.datetime.fromtimestamp(wall0 + (copy.start - mono0), dt.UTC)
        self._send_event(copy.conn, copy.events_topic, chaos.payload(i, emitted, start))
        if self.shape.scheduled:
            self._late(due, now)
            stats.last_due_s = max(stats.last_due_s, due - mono0)
        else:
            stats.offered[int(now - mono0)] += 1
        stats.events += 1
        stats.sent[int(now - mono0)] += 1
        stats.injected[copy.match_id].record(emission.event.seq)
        stats.expected[copy.match_id] = chaos.truth.last_seq

    def _late(self, due: float, now: float) -> None:
        """Count an event due at ``due`` and sent at ``now``: offered in its due second, its
        lateness, an overrun if past the threshold, the sender's lag in the second it went."""
        stats, mono0 = self.stats, self.mono0
        late_us = int((now - due) * 1e6)
        due_s = int(due - mono0)
        stats.lateness.add(due_s, late_us)
        if late_us > self.overrun_us:
            stats.overruns += 1
        stats.offered[due_s] += 1
        lag, sec = stats.lag_us, int(now - mono0)
        if late_us > lag.get(sec, 0):
            lag[sec] = late_us

    def _emit(self, copy: _Copy, i: int, due: float, now: float) -> None:
        """Stamp event ``i`` of ``copy`` (due at ``due``, sent at ``now``) and send it."""
        if copy.chaos is not None:
            self._emit_chaos(copy, copy.chaos, i, due, now)
            return
        stats, mono0, wall0 = self.stats, self.mono0, self.wall0
        emitted = format_timestamp(wall0 + (now - mono0))
        if self.shape.scheduled:
            sched = format_timestamp(wall0 + (due - mono0))
            self._late(due, now)
            stats.last_due_s = due - mono0
        else:
            sched = emitted
            stats.offered[int(now - mono0)] += 1
        payload = copy.template.event(i, copy.mid, emitted, sched, self.shape.payload_size)
        self._send_event(copy.conn, copy.events_topic, payload)
        stats.events += 1
        stats.sent[int(now - mono0)] += 1
        stats.expected[copy.match_id] = i + 1
        if self.shape.states:
            self._send(copy.conn, copy.state_topic, copy.template.state(i, copy.mid), True)
            stats.states += 1

    def _requeue(self, slot: int, copy: _Copy, now: float, replace: bool) -> None:
        """Queue the next event of ``copy``; or, if it is done, count it and (``replace``:
        when running for a duration) start a fresh copy in its slot."""
        if copy.index < copy.length:
            self._queue(slot, copy, self._due(copy, now))
            return
        self.stats.matches_completed += 1
        self.stats.matches_running -= 1
        self.stats.completed.append(copy.match_id)
        if self.shape.stages is not None:
            self._live.remove(copy)  # the next look at the target starts another if due
        elif replace:
            fresh = self._new_copy(slot, now)
            self._queue(slot, fresh, None if fresh.offsets is None else now)

    @staticmethod
    def _due(copy: _Copy, now: float) -> float | None:
        """When the next message of ``copy`` is due; None for its turn at max speed."""
        if copy.chaos is not None:
            due = copy.chaos.emissions[copy.index].due
            # At max speed only what chaos holds back (delay, burst) waits for a time.
            return None if copy.offsets is None and due <= 0 else copy.start + due
        return None if copy.offsets is None else copy.start + copy.offsets[copy.index]

    def _queue(self, slot: int, copy: _Copy, due: float | None) -> None:
        """At max speed (no offsets) a running match takes its turn in the FIFO; otherwise
        its next event waits in the heap for ``due``."""
        if due is None:
            self._turns.append((slot, copy))
        else:
            heapq.heappush(self._heap, (due, next(self._order), slot, copy))

    async def run(self) -> SenderStats:
        """Send until every match finished, ``duration_s`` is up or the stages are over;
        wait for the broker."""
        shape = self.shape
        stats = self.stats
        self._prepare_chaos()
        self.mono0 = mono0 = time.monotonic()
        self.wall0 = time.time()
        stats.started = mono0
        if shape.stages is None:
            for slot in range(shape.matches):
                start = mono0 + shape.start_offset(self.first_index + slot * self.index_step)
                copy = self._new_copy(slot, start)
                heapq.heappush(self._heap, (start, next(self._order), slot, copy))
        length = shape.run_s
        await self._loop(mono0 + length if length is not None else None)
        stats.finished = time.monotonic()
        await self._all_done.wait()
        return stats

    async def _loop(self, stop_at: float | None) -> None:
        """Send each event when due (at max speed: in turn) until done or ``stop_at``; under
        ``--stages``, start and stop matches on the way to each stage's target."""
        heap, turns = self._heap, self._turns
        stats = self.stats
        staged = self.shape.stages is not None
        replace = stop_at is not None and not staged
        # At max speed an event is due when its turn comes: started matches take turns from
        # a FIFO, and the heap only holds matches whose (ramped) start is still ahead.
        fifo = not self.shape.scheduled
        next_adjust = 0.0
        since_yield = 0
        while (heap or turns or staged) and not self._stop:
            now = time.monotonic()
            if staged and now >= next_adjust:
                self._adjust(now)
                next_adjust = now + _ADJUST_S
            while fifo and heap and heap[0][0] <= now:
                _, _, slot, copy = heapq.heappop(heap)
                turns.append((slot, copy))
            if turns:
                slot, copy = turns.popleft()
                due = now
            elif heap:
                due, _, slot, copy = heap[0]
            else:  # staged, nothing running: wait for the next look at the target
                due = next_adjust
            if stop_at is not None and (now >= stop_at or due >= stop_at):
                break
            if due > now:
                await self._sleep((min(due, next_adjust) if staged else due) - now)
                since_yield = 0
                continue
            if not fifo:
                heapq.heappop(heap)
            if copy.stopped:
                continue
            i = copy.index
            if i == 0:
                stats.matches_running += 1
                sec = int(now - self.mono0)
                stats.running_peak[sec] = max(stats.running_peak.get(sec, 0), stats.matches_running)
            self._emit(copy, i, due, now)
            if self._inflight[copy.conn] >= self.max_inflight:
                await self._window(copy.conn)
            copy.index = i + 1
            self._requeue(slot, copy, now, replace)
            since_yield += 1
            if since_yield >= 64:
                since_yield = 0
                await asyncio.sleep(0)
        if staged and stop_at is not None and not self._stop:
            self._adjust(stop_at)  # the last stage's target, reached

    def _adjust(self, now: float) -> None:
        """Start or stop matches so this shard's share of the stages' target runs: new ones
        start at once; above a falling target the newest stop, each with its
        ``replay_stopped``."""
        stages = self.shape.stages
        assert stages is not None
        total = stages.target(now - self.mono0)
        want = len(range(self.first_index, total, self.index_step))
        live = self._live
        while len(live) < want:
            slot = self._slots
            self._slots += 1
            copy = self._new_copy(slot, now)
            live.append(copy)
            self._queue(slot, copy, None if copy.offsets is None else now)
        while len(live) > want:
            self._stop_copy(live.pop(), now)

    def _stop_copy(self, copy: _Copy, now: float) -> None:
        """Stop ``copy`` where it is: a ``replay_stopped`` after its last event sent (and the
        ``stopped`` state), as a replayer stopped by Ctrl-C says it; nothing if it sent none."""
        copy.stopped = True
        stats = self.stats
        stats.matches_stopped += 1
        if copy.index == 0:
            return
        stats.matches_running -= 1
        sec = int(now - self.mono0)
        event, state = copy.template.stopped(copy.index, copy.mid, self.wall0 + (now - self.mono0))
        self._send_event(copy.conn, copy.events_topic, event)
        stats.events += 1
        stats.sent[sec] += 1
        stats.offered[sec] += 1
        stats.expected[copy.match_id] = copy.index + 1
        if self.shape.states:
            self._send(copy.conn, copy.state_topic, state, True)
            stats.states += 1
