"""The consumer runner: subscribe, decode, order, deduplicate, and dispatch.

One reader takes messages off the connection in arrival order. For each match it keeps the
state (the reducer's output) and a lane: a bounded queue and a worker that calls the handlers
of every subscriber in seq order. Matches run concurrently; handlers of one match never
overlap.

Delivery rules, applied before any handler runs:

- a malformed message is logged with its topic and reason, counted, and skipped;
- an event whose seq was already applied (a QoS 1 redelivery) is dropped;
- an event past the next seq is a gap: reported, applied, and the state is replaced by the
  next retained snapshot that covers it;
- a retained snapshot seeds the state of a match joined mid-way, so nothing is counted twice.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import structlog

from consumers._subscriber import Subscriber, call_handler
from events import (
    DecodeError,
    Event,
    MatchState,
    Message,
    MessageSource,
    Topics,
    apply,
    check_sequence,
    decode_event,
    decode_state,
)

__all__ = ["Runner", "RunnerStats"]

_log = structlog.get_logger("matchcast.consumer")


@dataclass(slots=True)
class RunnerStats:
    """Counters of one runner, for logs, tests and metrics."""

    received: int = 0
    events: int = 0
    snapshots: int = 0
    rejected: int = 0
    duplicates: int = 0
    gaps: int = 0
    missing: int = 0
    resyncs: int = 0
    handled: int = 0
    handler_errors: int = 0
    handler_timeouts: int = 0
    overflowed: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counters by name."""
        return {k: getattr(self, k) for k in self.__slots__}


@dataclass(slots=True)
class _Lane:
    match_id: str
    queue: asyncio.Queue[tuple[Event | None, MatchState]]
    state: MatchState | None = None
    resync_from: int | None = None  # a snapshot with last_seq >= this replaces the state
    worker: asyncio.Task[None] | None = None
    behind: bool = False
    held: list[Event] = field(default_factory=list)  # events before the first snapshot
    join_timer: asyncio.TimerHandle | None = None


class Runner:
    """Feeds messages to subscribers; see the module docstring for the rules.

    Args:
        subscribers: the subscribers to run.
        topics: the topic tree to read.
        match_filter: a match id, or ``+`` for every match.
        queue_size: events buffered per match before the runner reports it is falling behind.
        handler_timeout: seconds a handler may take before it is abandoned and counted.
        join_timeout: seconds to hold the events of a match joined mid-way while waiting
            for its retained snapshot; after that they are applied with a gap reported.
    """

    def __init__(
        self,
        subscribers: Sequence[Subscriber],
        *,
        topics: Topics | None = None,
        match_filter: str = "+",
        queue_size: int = 1000,
        handler_timeout: float = 10.0,
        join_timeout: float = 1.0,
    ) -> None:
        self.subscribers = list(subscribers)
        self.topics = topics or Topics()
        self.match_filter = match_filter
        self.queue_size = queue_size
        self.handler_timeout = handler_timeout
        self.join_timeout = join_timeout
        self.stats = RunnerStats()
        self._lanes: dict[str, _Lane] = {}
        self._stopping = asyncio.Event()
        #: Set once the subscriptions are confirmed by the broker.
        self.subscribed = asyncio.Event()

    @property
    def states(self) -> dict[str, MatchState]:
        """The current state of every match seen so far."""
        return {m: lane.state for m, lane in self._lanes.items() if lane.state is not None}

    @property
    def queue_depth(self) -> int:
        """Events and snapshots queued for the handlers, over all matches."""
        return sum(lane.queue.qsize() for lane in self._lanes.values())

    def topic_filters(self) -> list[str]:
        """What to subscribe to: events first, then the retained state.

        Events that arrive before a match's first snapshot are held (up to
        ``join_timeout``) and applied on top of it, so nothing published between the two
        subscriptions is lost and nothing is counted twice.
        """
        return [self.topics.events(self.match_filter), self.topics.state(self.match_filter)]

    async def run(self, source: MessageSource, *, qos: int = 1) -> RunnerStats:
        """Subscribe on ``source`` and dispatch until it ends or :meth:`stop` is called."""
        for topic_filter in self.topic_filters():
            await source.subscribe(topic_filter, qos=qos)
        self.subscribed.set()
        _log.info(
            "consumer.started",
            subscribers=[s.name for s in self.subscribers],
            filters=self.topic_filters(),
        )
        reader = asyncio.ensure_future(self._read(source))
        stop = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({reader, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (reader, stop):
                t.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            await self.drain()
        if reader.done() and not reader.cancelled() and reader.exception():
            raise reader.exception()  # type: ignore[misc]
        return self.stats

    async def _read(self, source: MessageSource) -> None:
        async for message in source.messages():
            await self.feed(message)

    def stop(self) -> None:
        """Ask :meth:`run` to return after the handlers in flight finish."""
        self._stopping.set()

    async def drain(self) -> None:
        """Let every lane finish what it has queued, then stop the workers."""
        for lane in self._lanes.values():
            if lane.worker is not None and not lane.worker.done():
                await lane.queue.join()
                lane.worker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await lane.worker
        _log.info("consumer.stopped", **self.stats.as_dict())

    async def feed(self, message: Message) -> None:
        """Process one message as if it had arrived from the broker."""
        self.stats.received += 1
        parsed = self.topics.parse(message.topic)
        if parsed is None or parsed[0] == "status":
            return
        kind, match_id = parsed
        if self.match_filter not in ("+", match_id):
            return
        try:
            if kind == "state":
                self._on_snapshot(decode_state(message.payload, topic=message.topic))
            else:
                self._on_event(decode_event(message.payload, topic=message.topic))
        except DecodeError as err:
            self.stats.rejected += 1
            _log.warning(
                "message.rejected", topic=message.topic, reason=err.reason, excerpt=err.excerpt
            )

    def _lane(self, match_id: str) -> _Lane:
        lane = self._lanes.get(match_id)
        if lane is None:
            lane = _Lane(match_id, asyncio.Queue(self.queue_size))
            lane.worker = asyncio.ensure_future(self._work(lane))
            self._lanes[match_id] = lane
        return lane

    def _on_snapshot(self, snapshot: MatchState) -> None:
        self.stats.snapshots += 1
        lane = self._lane(snapshot.match_id)
        log = _log.bind(match_id=snapshot.match_id, seq=snapshot.last_seq)
        if lane.state is None:
            lane.state = snapshot
            log.info("state.synchronised", reason="joined", score=snapshot.scoreline)
            self._enqueue(lane, None, snapshot)
            self._release_held(lane)
        elif lane.resync_from is not None and snapshot.last_seq >= lane.resync_from:
            lane.state = snapshot
            lane.resync_from = None
            self.stats.resyncs += 1
            log.info("state.synchronised", reason="gap", score=snapshot.scoreline)
            self._enqueue(lane, None, snapshot)

    def _release_held(self, lane: _Lane) -> None:
        if lane.join_timer is not None:
            lane.join_timer.cancel()
            lane.join_timer = None
        held, lane.held = lane.held, []
        for event in held:
            self._sequence(lane, event)

    def _join_timed_out(self, lane: _Lane) -> None:
        lane.join_timer = None
        if lane.state is None and lane.held:
            _log.warning(
                "state.snapshot_missing",
                match_id=lane.match_id,
                held=len(lane.held),
                timeout_s=self.join_timeout,
            )
            lane.state = MatchState.new(lane.match_id)
            self._release_held(lane)

    def _on_event(self, event: Event) -> None:
        self.stats.events += 1
        lane = self._lane(event.match_id)
        if lane.state is None and (event.seq > 1 or lane.held):
            # Joined mid-match: hold events until the retained snapshot says where we are.
            lane.held.append(event)
            if lane.join_timer is None:
                loop = asyncio.get_running_loop()
                lane.join_timer = loop.call_later(self.join_timeout, self._join_timed_out, lane)
            if len(lane.held) >= self.queue_size:
                self._join_timed_out(lane)
            return
        self._sequence(lane, event)

    def _sequence(self, lane: _Lane, event: Event) -> None:
        log = _log.bind(match_id=event.match_id, seq=event.seq)
        state = lane.state or MatchState.new(event.match_id)
        check = check_sequence(state, event.seq)
        if check.kind == "duplicate":
            self.stats.duplicates += 1
            log.debug("event.duplicate_dropped", last_seq=state.last_seq)
            return
        if check.kind == "gap":
            self.stats.gaps += 1
            self.stats.missing += len(check.missing)
            lane.resync_from = event.seq
            log.warning(
                "sequence.gap_detected",
                missing_from=check.missing.start,
                missing_to=check.missing.stop - 1,
                missing=len(check.missing),
            )
        lane.state = apply(state, event)
        self._enqueue(lane, event, lane.state)

    def _enqueue(self, lane: _Lane, event: Event | None, state: MatchState) -> None:
        try:
            lane.queue.put_nowait((event, state))
        except asyncio.QueueFull:
            self.stats.overflowed += 1
            if not lane.behind:
                lane.behind = True
                _log.warning(
                    "consumer.fell_behind", match_id=lane.match_id, queued=lane.queue.qsize()
                )
            return
        if lane.behind and lane.queue.qsize() < self.queue_size // 2:
            lane.behind = False
            _log.info("consumer.caught_up", match_id=lane.match_id)

    async def _work(self, lane: _Lane) -> None:
        while True:
            event, state = await lane.queue.get()
            try:
                await self._dispatch(event, state)
            finally:
                lane.queue.task_done()

    async def _dispatch(self, event: Event | None, state: MatchState) -> None:
        for sub in self.subscribers:
            calls: list[tuple[Callable[..., Awaitable[None] | None], str, tuple[object, ...]]]
            if event is None:
                calls = [(h, f"{sub.name}.on_state", (state,)) for h in sub.state_handlers]
            else:
                calls = [
                    (r.handler, f"{sub.name}.{r.name}", (event, state))
                    for r in sub.handlers_for(event)
                ]
            for fn, name, args in calls:
                await self._call(fn, name, args, event, state)

    async def _call(
        self,
        fn: Callable[..., Awaitable[None] | None],
        name: str,
        args: tuple[object, ...],
        event: Event | None,
        state: MatchState,
    ) -> None:
        seq = event.seq if event else state.last_seq
        try:
            async with asyncio.timeout(self.handler_timeout):
                await call_handler(fn, *args)
        except TimeoutError:
            self.stats.handler_timeouts += 1
            _log.error(
                "handler.timed_out",
                handler=name,
                match_id=state.match_id,
                seq=seq,
                timeout_s=self.handler_timeout,
            )
        except Exception:
            self.stats.handler_errors += 1
            _log.exception(
                "handler.failed",
                handler=name,
                match_id=state.match_id,
                seq=seq,
                event_type=event.type if event else "state",
            )
        else:
            self.stats.handled += 1
