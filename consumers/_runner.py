"""The consumer runner: subscribe, decode, order, deduplicate, and dispatch.

One reader takes messages off the connection in arrival order. For each match it keeps the
state (the reducer's output) and a lane: a bounded queue and a worker that calls the handlers
of every subscriber in seq order. Matches run concurrently; handlers of one match never
overlap, and the reader never waits for a lane.

Delivery rules, applied by the reader before any handler runs:

- a malformed message is logged with its topic and reason, counted, and skipped;
- an event whose seq was already applied (a QoS 1 redelivery) is dropped;
- an event past the next seq is a gap: reported, applied, and the state is replaced by the
  next retained snapshot that covers it;
- a retained snapshot seeds the state of a match joined mid-way, so nothing is counted twice;
- an event that arrives before any state of its match (a persistent session resuming: the
  broker sends what it queued before the retained snapshot) is held until the snapshot
  published right after it arrives, then delivered with it;
- a new replay of a match reuses its seqs. An event with an old seq emitted after everything
  applied so far (or a kick-off, seq 1, when the state came from a snapshot), and a live (not
  retained) snapshot older than the state, start the match's lane again from scratch.

A lane whose handlers are slower than its events fills its queue. The reader then stops
queueing that match's events (counting them as ``overflowed``) and keeps its state right; once
the worker has worked the queue down to half, it hands the handlers that state through
``on_state`` and the lane carries on live. Other matches never wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import inspect
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Literal, Self

import structlog

from consumers._errors import PluginError
from consumers._score import with_score_dict
from consumers._subscriber import Subscriber, call_handler, handler_name
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

__all__ = ["HandlerCall", "Runner", "RunnerStats"]

_log = structlog.get_logger("matchcast.consumer")

#: Events held for a match with no state yet before giving up on a snapshot arriving.
HOLD_LIMIT = 32
#: A sync handler that runs this long (seconds) blocked every match; the runner says so.
BLOCKING_WARN_S = 0.2


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
    restarts: int = 0
    handled: int = 0
    handler_errors: int = 0
    handler_timeouts: int = 0
    overflowed: int = 0
    catch_ups: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counters by name."""
        return {k: getattr(self, k) for k in self.__slots__}


@dataclass(frozen=True, slots=True)
class HandlerCall:
    """One call of one handler, as an observer of the runner sees it.

    Attributes:
        handler: ``subscriber.function``, as in the logs.
        event: the event, or None for an ``on_state`` call.
        state: the state after the event, or the state adopted.
        outcome: ``ok``, ``error`` (it raised ``error``) or ``timeout``.
    """

    subscriber: str
    handler: str
    match_id: str
    event: Event | None
    state: MatchState
    outcome: Literal["ok", "error", "timeout"]
    error: BaseException | None = None


_Item = tuple[Event | None, MatchState]
_Fn = Callable[..., Awaitable[None] | None]


@dataclass(slots=True)
class _Lane:
    match_id: str
    queue: asyncio.Queue[_Item]
    state: MatchState | None = None
    resync_from: int | None = None  # a snapshot with last_seq >= this replaces the state
    held: list[Event] = field(default_factory=list)
    last_emitted: dt.datetime | None = None
    worker: asyncio.Task[None] | None = None
    behind: bool = False
    skipped: int = 0
    pending: int = 0  # queued or being handled

    def put(self, item: _Item) -> None:
        self.queue.put_nowait(item)
        self.pending += 1

    def done(self) -> None:
        self.pending -= 1
        self.queue.task_done()


class Runner:
    """Feeds messages to subscribers; see the module docstring for the rules.

    ``async with runner:`` runs the subscribers' start hooks on entry and, on exit, lets the
    lanes finish what they queued (up to ``drain_timeout``) and runs the stop hooks. :meth:`run`
    does that itself when not inside the block.

    Args:
        subscribers: the subscribers to run.
        topics: the topic tree to read.
        match_filter: a match id, or ``+`` for every match.
        queue_size: events buffered per match; past it the match's lane skips events and
            catches up through ``on_state`` (see the module docstring).
        handler_timeout: seconds a handler may take before it is abandoned and counted.
        drain_timeout: seconds the lanes get to finish their queues on the way out.
        observer: called after every handler call; the test harness records them.
    """

    def __init__(
        self,
        subscribers: Sequence[Subscriber],
        *,
        topics: Topics | None = None,
        match_filter: str = "+",
        queue_size: int = 1000,
        handler_timeout: float = 10.0,
        drain_timeout: float = 30.0,
        observer: Callable[[HandlerCall], None] | None = None,
    ) -> None:
        if queue_size < 2:
            raise ValueError(f"queue_size must be at least 2, not {queue_size}")
        self.subscribers = list(subscribers)
        self.topics = topics or Topics()
        self.match_filter = match_filter
        self.queue_size = queue_size
        self.handler_timeout = handler_timeout
        self.drain_timeout = drain_timeout
        self.observer = observer
        self.stats = RunnerStats()
        self._lanes: dict[str, _Lane] = {}
        self._stopping = asyncio.Event()
        self._started = False
        self._closed = False
        #: Set once the subscriptions are confirmed by the broker.
        self.subscribed = asyncio.Event()

    # ------------------------------------------------------------ lifecycle

    @property
    def states(self) -> dict[str, MatchState]:
        """The current state of every match seen so far."""
        return {m: lane.state for m, lane in self._lanes.items() if lane.state is not None}

    @property
    def behind(self) -> list[str]:
        """Matches whose lanes are skipping events because their handlers fell behind."""
        return [m for m, lane in self._lanes.items() if lane.behind]

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stopping.is_set()

    def topic_filters(self) -> list[str]:
        """What to subscribe to: state before events, so a snapshot seeds a late join."""
        return [self.topics.state(self.match_filter), self.topics.events(self.match_filter)]

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def start(self) -> None:
        """Run every subscriber's start hooks, in order; idempotent.

        Raises:
            PluginError: a start hook raised; the stop hooks of the subscribers started
                before it have run.
        """
        if self._started:
            return
        self._started = True
        started: list[Subscriber] = []
        for sub in self.subscribers:
            for hook in sub.start_hooks:
                try:
                    await call_handler(hook)
                except Exception as err:
                    await self._stop_hooks(started)
                    self._closed = True
                    raise PluginError(
                        sub.name,
                        f"start hook {handler_name(hook)} failed: {type(err).__name__}: {err}",
                    ) from err
            started.append(sub)

    async def close(self) -> None:
        """Drain the lanes, then run every subscriber's stop hooks; idempotent."""
        if not self._started or self._closed:
            return
        self._closed = True
        try:
            await self.drain()
        finally:
            await self._stop_hooks(self.subscribers)
            _log.info("consumer.stopped", **self.stats.as_dict())

    async def _stop_hooks(self, subscribers: Sequence[Subscriber]) -> None:
        for sub in subscribers:
            for hook in sub.stop_hooks:
                try:
                    await call_handler(hook)
                except Exception:
                    _log.exception(
                        "subscriber.stop_failed", subscriber=sub.name, hook=handler_name(hook)
                    )

    async def run(self, source: MessageSource, *, qos: int = 1) -> RunnerStats:
        """Subscribe on ``source`` and dispatch until it ends or :meth:`stop` is called.

        Outside ``async with runner:`` it also runs the start hooks first and drains and runs
        the stop hooks after.
        """
        if self._started:
            await self._consume(source, qos)
        else:
            async with self:
                await self._consume(source, qos)
        return self.stats

    async def _consume(self, source: MessageSource, qos: int) -> None:
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
            for task in (reader, stop):
                task.cancel()
            await asyncio.gather(reader, stop, return_exceptions=True)
        if not reader.cancelled() and (err := reader.exception()) is not None:
            raise err  # a typed error (BrokerError), not a group

    async def _read(self, source: MessageSource) -> None:
        async for message in source.messages():
            await self.feed(message)

    def stop(self) -> None:
        """Ask :meth:`run` to stop reading; the handlers in flight and queued still finish."""
        self._stopping.set()

    async def join(self) -> None:
        """Wait until every lane has handled everything queued so far."""
        while busy := [lane for lane in self._lanes.values() if lane.pending]:
            for lane in busy:
                await lane.queue.join()

    async def drain(self) -> None:
        """Let every lane finish what it has queued (up to ``drain_timeout``), then stop them."""
        for lane in self._lanes.values():
            if lane.held:
                self._release(lane)
        try:
            async with asyncio.timeout(self.drain_timeout):
                await self.join()
        except TimeoutError:
            _log.warning(
                "consumer.drain_timed_out",
                timeout_s=self.drain_timeout,
                abandoned=sum(lane.queue.qsize() for lane in self._lanes.values()),
            )
        for lane in self._lanes.values():
            if lane.worker is not None and not lane.worker.done():
                lane.worker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await lane.worker

    # ------------------------------------------------------------ the reader

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
                snapshot = decode_state(message.payload, topic=message.topic)
                self._on_snapshot(snapshot, retained=message.retain)
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

    def _on_snapshot(self, snapshot: MatchState, *, retained: bool = True) -> None:
        self.stats.snapshots += 1
        lane = self._lane(snapshot.match_id)
        snapshot = with_score_dict(snapshot)
        log = _log.bind(match_id=snapshot.match_id, seq=snapshot.last_seq)
        if not retained and lane.state is not None and snapshot.last_seq < lane.state.last_seq:
            # States never go back within a run: a replay started again (``--from``). A
            # *retained* older one is only a late delivery of what the broker held.
            self._restart(lane)
        if lane.state is None:
            held, lane.held = lane.held, []
            lane.state = snapshot
            if held and held[0].seq == snapshot.last_seq:
                # The state published right after the first event we hold: resume with both.
                log.info("state.synchronised", reason="resumed", score=snapshot.scoreline)
                lane.last_emitted = held[0].emitted_at
                self._enqueue(lane, held[0], snapshot)
                held = held[1:]
            else:
                log.info("state.synchronised", reason="joined", score=snapshot.scoreline)
                self._enqueue(lane, None, snapshot)
            for event in held:
                self._sequence(lane, event)
        elif lane.resync_from is not None and snapshot.last_seq >= lane.resync_from:
            lane.state = snapshot
            lane.resync_from = None
            self.stats.resyncs += 1
            log.info("state.synchronised", reason="gap", score=snapshot.scoreline)
            self._enqueue(lane, None, snapshot)

    def _on_event(self, event: Event) -> None:
        self.stats.events += 1
        lane = self._lane(event.match_id)
        log = _log.bind(match_id=event.match_id, seq=event.seq)
        if self._is_new_run(lane, event):
            self._restart(lane)
        if lane.state is None:
            if event.seq > 1:
                lane.held.append(event)
                if len(lane.held) <= HOLD_LIMIT:
                    log.debug("event.held", reason="no state yet", held=len(lane.held))
                    return
                self._release(lane)
                return
            lane.state = MatchState.new(event.match_id)
        self._sequence(lane, event)

    @staticmethod
    def _is_new_run(lane: _Lane, event: Event) -> bool:
        if lane.state is None or event.seq > lane.state.last_seq:
            return False
        # A redelivery was emitted with an event applied already; a new run, after all of them.
        # Without an event applied yet (joined from a snapshot) only a kick-off says so.
        if lane.last_emitted is None:
            return event.seq == 1
        return event.emitted_at > lane.last_emitted

    def _restart(self, lane: _Lane) -> None:
        """A new replay of the match: forget its state; what comes next starts it again."""
        assert lane.state is not None
        self.stats.restarts += 1
        _log.info("match.restarted", match_id=lane.match_id, last_seq=lane.state.last_seq)
        lane.state, lane.resync_from, lane.last_emitted, lane.held = None, None, None, []

    def _release(self, lane: _Lane) -> None:
        """Stop waiting for a snapshot: deliver the held events from an empty state."""
        _log.warning("state.snapshot_missing", match_id=lane.match_id, held=len(lane.held))
        held, lane.held = lane.held, []
        lane.state = MatchState.new(lane.match_id)
        for event in held:
            self._sequence(lane, event)

    def _sequence(self, lane: _Lane, event: Event) -> None:
        state = lane.state
        assert state is not None
        log = _log.bind(match_id=event.match_id, seq=event.seq)
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
        lane.state = with_score_dict(apply(state, event))
        if lane.last_emitted is None or event.emitted_at > lane.last_emitted:
            lane.last_emitted = event.emitted_at
        self._enqueue(lane, event, lane.state)

    def _enqueue(self, lane: _Lane, event: Event | None, state: MatchState) -> None:
        if not lane.behind:
            try:
                lane.put((event, state))
            except asyncio.QueueFull:
                lane.behind = True
                _log.warning(
                    "consumer.fell_behind",
                    match_id=lane.match_id,
                    seq=state.last_seq,
                    queued=lane.queue.qsize(),
                )
            else:
                return
        # Behind: the state stays right here; the worker hands it over once it catches up.
        if event is not None:
            lane.skipped += 1
            self.stats.overflowed += 1

    # ------------------------------------------------------------ the lanes

    async def _work(self, lane: _Lane) -> None:
        while True:
            event, state = await lane.queue.get()
            try:
                await self._dispatch(event, state)
            except Exception:  # pragma: no cover - _call catches what handlers raise
                _log.exception("consumer.dispatch_failed", match_id=lane.match_id)
            finally:
                if lane.behind and lane.queue.qsize() <= self.queue_size // 2:
                    self._catch_up(lane)
                lane.done()

    def _catch_up(self, lane: _Lane) -> None:
        assert lane.state is not None
        lane.behind = False
        self.stats.catch_ups += 1
        _log.info(
            "consumer.caught_up",
            match_id=lane.match_id,
            seq=lane.state.last_seq,
            skipped=lane.skipped,
        )
        lane.skipped = 0
        lane.put((None, lane.state))

    async def _dispatch(self, event: Event | None, state: MatchState) -> None:
        for sub in self.subscribers:
            if event is None:
                for fn in sub.state_handlers:
                    await self._call(
                        sub, fn, f"{sub.name}.{handler_name(fn)}", None, (state,), None, state
                    )
            else:
                for r in sub.handlers_for(event):
                    name = f"{sub.name}.{r.name}"
                    await self._call(sub, r.handler, name, r.timeout, (event, state), event, state)

    async def _call(
        self,
        sub: Subscriber,
        fn: _Fn,
        name: str,
        limit_s: float | None,
        args: tuple[object, ...],
        event: Event | None,
        state: MatchState,
    ) -> None:
        timeout = limit_s or self.handler_timeout
        seq = event.seq if event else state.last_seq
        outcome: Literal["ok", "error", "timeout"] = "ok"
        error: BaseException | None = None
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                await self._invoke(fn, name, args, state.match_id, seq)
        except Exception as err:
            error = err
            if isinstance(err, TimeoutError) and deadline.expired():
                outcome = "timeout"
                self.stats.handler_timeouts += 1
                _log.error(
                    "handler.timed_out",
                    handler=name,
                    match_id=state.match_id,
                    seq=seq,
                    timeout_s=timeout,
                )
            else:
                outcome = "error"
                self.stats.handler_errors += 1
                _log.exception(
                    "handler.failed",
                    handler=name,
                    match_id=state.match_id,
                    seq=seq,
                    event_type=event.type if event else "state",
                    payload=event.model_dump(mode="json", exclude_none=True) if event else None,
                )
        else:
            self.stats.handled += 1
        if self.observer is not None:
            call = HandlerCall(sub.name, name, state.match_id, event, state, outcome, error)
            try:
                self.observer(call)
            except Exception:
                _log.exception("consumer.observer_failed", handler=name)

    @staticmethod
    async def _invoke(
        fn: _Fn, name: str, args: tuple[object, ...], match_id: str, seq: int
    ) -> None:
        t0 = time.monotonic()
        result = fn(*args)
        blocked = time.monotonic() - t0
        if blocked > BLOCKING_WARN_S:
            _log.warning(
                "handler.blocked_loop",
                handler=name,
                match_id=match_id,
                seq=seq,
                blocked_s=round(blocked, 3),
                hint="a sync handler stalls every match; make it async (asyncio.to_thread)",
            )
        if inspect.isawaitable(result):
            await result
