"""The consumer runner: subscribe, decode, order, deduplicate, and dispatch.

One reader takes messages off the connection in arrival order, decodes them (a malformed one
is logged with its topic and reason, counted, and skipped) and hands each to its match's
:class:`~consumers._sequencer.Sequencer`, which applies the delivery rules (duplicates, gaps,
late joins, resumed sessions, new runs). What it delivers goes to the match's lane: a bounded
queue and a worker that calls the handlers of every subscriber in seq order. Matches run
concurrently; handlers of one match never overlap, and the reader never waits for a lane.
When a match's lane is idle the reader calls its handlers itself, skipping the queue; the
first handler that returns an awaitable hands the rest of that event to the lane's worker.

A lane whose handlers are slower than its events fills its queue. The reader then stops
queueing that match's events (counting them as ``overflowed``) while its sequencer keeps the
state right; once the worker has worked the queue down to half, it hands the handlers that
state through ``on_state`` and the lane carries on live. Other matches never wait.

Each message crosses one boundary in :meth:`Runner._process`: whatever it does (decode,
validate, order, apply, handlers) costs that message only. A payload that cannot be read is
rejected (``message.rejected``, counted, dead-lettered); a bug it trips is logged
(``message.failed``), counted as rejected and dead-lettered too; the reader goes on.

Memory is bounded by the number of matches tracked (``max_matches``): a finished match is
forgotten ``finished_grace_s`` after its full time (its run is remembered, in a bounded map,
so a late redelivery of it is still refused), and at the bound the longest-idle matches, live
or not, are evicted first, a twentieth of the bound at a time (``match.evicted``, counted as
``evicted``; handlers still queued for an evicted match are dropped).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import heapq
import inspect
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, Self

import structlog

from consumers._deadletter import DeadLetter, consumer_name, send_dead_letter
from consumers._errors import PluginError
from consumers._latejoin import (
    REPLAYER_WAIT_S,
    ReplayerWatch,
    StatusDiscovery,
    expect_snapshots,
    resumed,
    subscribe_exact,
    subscribe_exact_states,
)
from consumers._sequencer import REORDER_WINDOW, Delivery, RunnerStats, Sequencer
from consumers._subscriber import Subscriber, call_handler, handler_name
from events import (
    BatchSource,
    DecodeError,
    Event,
    MatchcastError,
    MatchState,
    Message,
    MessageSource,
    Publisher,
    TopicKind,
    Topics,
    UnknownEventTypeError,
    clip,
    clip_bytes,
    decode_event,
    decode_state,
    quote,
    replayer_id_problem,
)

#: Topics parsed once and remembered (a few per match); a bound keeps junk topics from growing
#: it: when full it is emptied, and the live matches' topics come back at their next message.
_PARSED_CACHE = 100_000
_NOT_OURS: tuple[TopicKind, str] = ("status", "")
#: The topics a runner reads; any other of the tree (a status, a dead letter) is not for it.
_MATCH_TOPICS: frozenset[TopicKind] = frozenset(("events", "state"))

#: Event routes (event class x match) remembered before starting afresh.
_ROUTES_CACHED = 10_000

#: An event this far past the last seq applied is refused: a forged or corrupt seq would
#: otherwise make every real event after it look like a duplicate.
MAX_SEQ_JUMP = 10_000
#: A run (its start, ms since the epoch) this far ahead of the consumer's clock is refused: a
#: forged far-future run would otherwise make every real run after it look stale.
MAX_RUN_AHEAD_MS = 24 * 3600 * 1000

__all__ = ["MAX_MATCHES", "HandlerCall", "Runner", "RunnerStats"]

_log = structlog.get_logger("matchcast.consumer")

#: A sync handler that runs this long (seconds) blocked every match; the runner says so.
BLOCKING_WARN_S = 0.2

#: Matches tracked at once by default: well above the 10,000 live matches a load test runs.
MAX_MATCHES = 50_000
#: Seconds a finished match stays in memory after its full time, by default.
FINISHED_GRACE_S = 300.0
#: At the bound, 1/this of it is evicted at once (the longest idle), to amortise the scan.
_EVICT_SHARE = 20
#: Messages between two sweeps of the finished matches past their grace.
_SWEEP_EVERY = 4096
#: Seconds an event that came past a missing seq waits for it, by default.
REORDER_WAIT_S = 0.5


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


_Fn = Callable[..., Awaitable[None] | None]
#: One handler to call: its subscriber, function, name and timeout (None: the runner's).
_Call = tuple[Subscriber, _Fn, str, float | None]
#: What a lane queues: a delivery, the index of the next handler to call, and the awaitable
#: of the handler before it when that one is still running (handed over by the reader).
_Item = tuple[Event | None, MatchState, int, Awaitable[None] | None]


@dataclass(slots=True)
class _Lane:
    """One match: its sequencer, its bounded queue of deliveries and the worker draining it.

    A deque and a wake-up future rather than an ``asyncio.Queue``: this is the consumer's hot
    path, and the queue's getter bookkeeping cost more than the no-op handler it fed.
    """

    match_id: str
    limit: int
    seq: Sequencer
    items: collections.deque[_Item] = field(default_factory=collections.deque)
    worker: asyncio.Task[None] | None = None
    wake: asyncio.Future[None] | None = None  # the idle worker waits on it
    #: Set when nothing is pending; made when first waited for (an Event per match is memory
    #: a flood of match ids would pay for: see benchmarks/memory_flood.py).
    idle: asyncio.Event | None = None
    behind: bool = False
    finished: bool = False  # its full time is known and it waits for its grace to pass
    active: int = 0  # the runner's message count when this match last had one: idleness
    skipped: int = 0
    pending: int = 0  # queued or being handled
    resync_asked: bool = False  # the retained snapshot was asked for again after a gap
    wait: asyncio.TimerHandle | None = None  # ends the wait for a missing seq

    def put(self, item: _Item) -> bool:
        """Queue ``item``; False (and nothing queued) when the queue is full."""
        if len(self.items) >= self.limit:
            return False
        self.items.append(item)
        if not self.pending and self.idle is not None:
            self.idle.clear()
        self.pending += 1
        wake = self.wake
        if wake is not None:
            self.wake = None
            if not wake.done():
                wake.set_result(None)
        return True

    def done(self) -> None:
        self.pending -= 1
        if not self.pending and self.idle is not None:
            self.idle.set()

    async def wait_idle(self) -> None:
        """Return once nothing is pending."""
        if not self.pending:
            return
        if self.idle is None:
            self.idle = asyncio.Event()
        await self.idle.wait()


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
        max_matches: matches tracked at once; at it the longest-idle ones are evicted.
        finished_grace_s: seconds a finished match is kept after its full time.
        clock: monotonic seconds, for the grace period; tests pass a fake.
        reorder_window: events of a match held past a missing seq, waiting for it (a
            reordering), before it is taken for lost; 0 takes it for lost at once.
        reorder_wait: seconds the first of them waits, at most, for the missing seq.
        replayers: ids of replayers whose retained status to read: the matches it lists are
            subscribed to by their exact state topics, for brokers that give a wildcard no
            retained messages (consumers._latejoin).
        replayer_wait: seconds after subscribing before a named replayer whose status has
            not arrived is reported (``replayer.not_found``, once; the runner goes on waiting).
        on_replayer: called with ``(replayer_id, False)`` at that report and with
            ``(replayer_id, True)`` if its status arrives after it (a command's hint line).
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
        name: str | None = None,
        max_seq_jump: int = MAX_SEQ_JUMP,
        max_matches: int = MAX_MATCHES,
        finished_grace_s: float = FINISHED_GRACE_S,
        clock: Callable[[], float] = time.monotonic,
        reorder_window: int = REORDER_WINDOW,
        reorder_wait: float = REORDER_WAIT_S,
        replayers: Sequence[str] = (),
        replayer_wait: float = REPLAYER_WAIT_S,
        on_replayer: Callable[[str, bool], None] | None = None,
    ) -> None:
        if queue_size < 2:
            raise ValueError(f"queue_size must be at least 2, not {queue_size}")
        if max_matches < 1:
            raise ValueError(f"max_matches must be at least 1, not {max_matches}")
        if reorder_window < 0 or reorder_wait < 0:
            raise ValueError(
                f"reorder_window and reorder_wait must not be negative, not {reorder_window} "
                f"and {reorder_wait}"
            )
        self.subscribers = list(subscribers)
        self.topics = topics or Topics()
        self.match_filter = match_filter
        self.queue_size = queue_size
        self.handler_timeout = handler_timeout
        self.drain_timeout = drain_timeout
        self.observer = observer
        #: Names its dead-letter topic; by default its subscribers' names, or its broker
        #: user name once :meth:`use_broker_user` says it (see consumers._deadletter).
        self.name = name or consumer_name(s.name for s in self.subscribers)
        self._named = name is not None
        self.max_seq_jump = max_seq_jump
        self.max_matches = max_matches
        self.finished_grace_s = finished_grace_s
        self._clock = clock
        self.reorder_window = reorder_window
        self.reorder_wait = reorder_wait
        for replayer_id in replayers:
            if (problem := replayer_id_problem(replayer_id)) is not None:
                raise ValueError(f"replayer id {replayer_id!r} is not one topic level: {problem}")
        self.replayers = tuple(dict.fromkeys(replayers))
        self._discovery = StatusDiscovery(self.topics, match_filter, max_matches)
        self.replayer_wait = replayer_wait
        self._replayer_watch = ReplayerWatch(self.topics, self.replayers, on_replayer)
        self._replayer_timer: asyncio.Task[None] | None = None  # once, from the first subscribe
        #: Matches whose full time was applied, with when they may be forgotten, oldest first.
        self._finished: collections.deque[tuple[float, str]] = collections.deque()
        #: Runs that ended, of matches forgotten since: match id -> run (bounded, oldest out).
        self._ended_runs: collections.OrderedDict[str, int] = collections.OrderedDict()
        #: Where rejected messages are copied (the connection, once :meth:`run` has one).
        self.dead_letters: Publisher | None = None
        # Side errands the reader starts and does not wait for: dead letters on their way to
        # the broker, and subscriptions to a match's exact state topic to ask for a resync.
        self._errands: set[asyncio.Task[None]] = set()
        self._source: MessageSource | None = None
        self._parsed: dict[str, tuple[TopicKind, str]] = {}  # topic -> parsed, per match
        self._parsed_cap = min(_PARSED_CACHE, 4 * max_matches)  # two topics a match, twice
        self.stats = RunnerStats()
        self._lanes: dict[str, _Lane] = {}
        self._registrations = [sub.registrations for sub in self.subscribers]
        self._routes: dict[tuple[type[Event], str], tuple[_Call, ...]] = {}
        self._routes_version = -1
        self._stopping = asyncio.Event()
        self._started = False
        self._closed = False
        #: Set once the subscriptions are confirmed by the broker.
        self.subscribed = asyncio.Event()

    # ------------------------------------------------------------ lifecycle

    @property
    def states(self) -> dict[str, MatchState]:
        """The current state of every match seen so far."""
        return {m: lane.seq.state for m, lane in self._lanes.items() if lane.seq.state is not None}

    @property
    def tracked(self) -> int:
        """How many matches the runner keeps in memory (at most ``max_matches``)."""
        return len(self._lanes)

    @property
    def behind(self) -> list[str]:
        """Matches whose lanes are skipping events because their handlers fell behind."""
        return [m for m, lane in self._lanes.items() if lane.behind]

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stopping.is_set()

    @property
    def queue_depth(self) -> int:
        """Events and snapshots queued for the handlers, over all matches."""
        return sum(len(lane.items) for lane in self._lanes.values())

    def use_broker_user(self, username: str | None) -> None:
        """Name this runner after the broker user it logs in as, unless it was given a name:
        a broker's ACL grants each user its own dead-letter topic (consumers._deadletter)."""
        if username and not self._named:
            self.name = consumer_name((), username)

    def topic_filters(self) -> list[str]:
        """What to subscribe to: events first, then the retained state.

        Subscribing to the state first lost the event published between the two SUBACKs (a
        late joiner then saw a gap). Events first: one that arrives before its match's first
        snapshot is held and applied on top of it, so nothing is lost or counted twice.
        """
        return [
            self.topics.events(self.match_filter),
            self.topics.state(self.match_filter),
            *(self.topics.status(r) for r in self.replayers),
        ]

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Cancelled (a second Ctrl-C): stop the handlers now instead of draining.
        await self.close(
            abandon=exc_type is not None and issubclass(exc_type, asyncio.CancelledError)
        )

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

    async def close(self, *, abandon: bool = False) -> None:
        """Drain the lanes, then run every subscriber's stop hooks; idempotent.

        Args:
            abandon: cancel the handlers in flight and drop what is queued instead of draining.
        """
        if not self._started or self._closed:
            return
        self._closed = True
        if self._replayer_timer is not None:
            self._replayer_timer.cancel()
            await asyncio.wait({self._replayer_timer})  # a cancel of close() still raises
        try:
            if abandon:
                await self._abandon()
            else:
                try:
                    await self.drain()
                except asyncio.CancelledError:  # stopped again while draining
                    await self._abandon()
                    raise
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
        rejoined = self._source is not None  # a connection before this one: it was replaced
        self._source = source
        if self.dead_letters is None and isinstance(source, Publisher):
            self.dead_letters = source
        self._discovery.reset()
        if rejoined and self._lanes and not resumed(source):
            # Before anything of this connection is read: the fast client re-subscribes
            # within its reconnect, so the new snapshots may be waiting already.
            expect_snapshots(self._lanes.values())  # see consumers/_latejoin.py
        # The reader runs from the start, beside the subscribing: nothing the connection
        # delivers waits unread (a message left unread when a connection ended could pass for
        # news of the next one), and a stop is heard while a SUBACK is awaited.
        reader = asyncio.ensure_future(self._read(source))
        stop = asyncio.ensure_future(self._stopping.wait())
        try:
            if not await self._subscribe(source, qos, reader, stop):
                return  # stopped while subscribing
            self.subscribed.set()
            _log.info(
                "consumer.started",
                subscribers=[s.name for s in self.subscribers],
                filters=self.topic_filters(),
            )
            if self._replayer_timer is None and self.replayers:
                self._replayer_timer = asyncio.ensure_future(
                    self._replayer_watch.wait(self.replayer_wait)
                )
            await asyncio.wait({reader, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (reader, stop):
                task.cancel()
            await asyncio.gather(reader, stop, return_exceptions=True)
            if self._errands:  # dead letters and resync requests still on their way
                await asyncio.wait(self._errands, timeout=2)
        if not reader.cancelled() and (err := reader.exception()) is not None:
            raise err  # a typed error (BrokerError), not a group

    async def _subscribe(
        self,
        source: MessageSource,
        qos: int,
        reader: asyncio.Future[None],
        stop: asyncio.Future[Any],
    ) -> bool:
        """Subscribe to every filter while the reader runs; False if stopped meanwhile (a
        SUBACK the broker never sends must not hold a Ctrl-C for its whole timeout).

        Raises:
            BrokerError: a subscription failed (its own error: a refusal, or the connection
                closed in answer to it), or the connection was lost meanwhile.
        """

        async def subscribe_all() -> None:
            for topic_filter in self.topic_filters():
                await source.subscribe(topic_filter, qos=qos)
            await subscribe_exact_states(source, self.topics, self.match_filter, self._lanes, qos)

        subscribing = asyncio.ensure_future(subscribe_all())
        try:
            await asyncio.wait({subscribing, reader, stop}, return_when=asyncio.FIRST_COMPLETED)
            if not subscribing.done() and reader.done() and not stop.done():
                # The connection ended: the subscribe in flight fails with it, and says how
                # (closed in answer to it, or not).
                await asyncio.wait({subscribing, stop}, timeout=1.0)
        finally:
            if not subscribing.done():
                subscribing.cancel()
            await asyncio.gather(subscribing, return_exceptions=True)
        if not subscribing.cancelled() and (err := subscribing.exception()) is not None:
            raise err
        if stop.done() or not subscribing.done() or subscribing.cancelled():
            failed = reader.exception() if reader.done() and not reader.cancelled() else None
            if failed is not None and not stop.done():
                raise failed  # the connection was lost while subscribing
            return False  # stopped, or the source closed by its owner
        return True

    async def _read(self, source: MessageSource) -> None:
        process = self._process
        if isinstance(source, BatchSource):
            await self._read_batches(source)
            return
        async for message in source.messages():
            process(message)

    async def _read_batches(self, source: BatchSource) -> None:
        """Process each read's messages in one call, as they arrive (no queue, no task
        switch per message). A bug that escapes ``_process`` ends the run as it would from
        ``messages()``, with the rest of that batch left unprocessed but not silently."""
        process = self._process
        failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def take(batch: list[Message]) -> None:
            if failed.done():
                return
            try:
                for message in batch:
                    process(message)
            except Exception as err:
                failed.set_exception(err)

        source.set_batch_handler(take)
        closed = asyncio.ensure_future(source.wait_closed())
        try:
            await asyncio.wait({closed, failed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            source.set_batch_handler(None)
            closed.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await closed  # raises BrokerError if the connection was lost
        if failed.done():
            failed.result()  # the bug, raised here as messages() would have raised it

    def stop(self) -> None:
        """Ask :meth:`run` to stop reading; the handlers in flight and queued still finish."""
        self._stopping.set()

    async def wait_stopping(self) -> None:
        """Return once :meth:`stop` was called."""
        await self._stopping.wait()

    async def join(self) -> None:
        """Wait until every lane has handled everything queued so far."""
        while busy := [lane for lane in self._lanes.values() if lane.pending]:
            for lane in busy:
                await lane.wait_idle()

    async def drain(self) -> None:
        """Let every lane finish what it has queued (up to ``drain_timeout``), then stop them."""
        for lane in self._lanes.values():
            self._enqueue(lane, lane.seq.release())
        try:
            async with asyncio.timeout(self.drain_timeout):
                await self.join()
        except TimeoutError:
            _log.warning(
                "consumer.drain_timed_out",
                timeout_s=self.drain_timeout,
                abandoned=sum(len(lane.items) for lane in self._lanes.values()),
            )
        await self._stop_workers()

    async def _abandon(self) -> None:
        queued = sum(lane.pending for lane in self._lanes.values())
        if queued:  # nothing queued or in flight: nothing lost, nothing to warn of
            _log.warning("consumer.abandoned", queued=queued)
        await self._stop_workers()

    async def _stop_workers(self) -> None:
        for lane in self._lanes.values():
            if lane.worker is not None and not lane.worker.done():
                lane.worker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await lane.worker

    # ------------------------------------------------------------ the reader

    async def feed(self, message: Message) -> None:
        """Process one message as if it had arrived from the broker."""
        self._process(message)

    def _process(self, message: Message) -> None:
        """One message, through the one boundary: its failure costs it alone."""
        stats = self.stats
        stats.received += 1
        parsed = self._parsed.get(message.topic)
        if parsed is None:
            parsed = self.topics.parse(message.topic) or _NOT_OURS
            if len(self._parsed) >= self._parsed_cap:
                # Full, mostly of matches gone (a flood of made-up ids): start afresh, so
                # the live matches' topics are cached again and the dead ones' freed.
                self._parsed.clear()
            self._parsed[message.topic] = parsed
        if parsed[0] not in _MATCH_TOPICS:
            if parsed[0] == "status" and parsed[1] in self.replayers:
                self._on_status(message, parsed[1])
            return
        kind, match_id = parsed
        if self.match_filter not in ("+", match_id):
            return
        if not stats.received % _SWEEP_EVERY:
            self._sweep()
        try:
            if kind == "state":
                snapshot = decode_state(message.payload, topic=message.topic)
                self._check_topic(snapshot.match_id, match_id, message)
                lane = self._lanes.get(match_id) or self._lane(match_id)
                lane.active = stats.received
                if snapshot.run > lane.seq.run:
                    self._check_run(snapshot.run, message)
                self._enqueue(lane, lane.seq.on_snapshot(snapshot, retained=message.retain))
            else:
                event = decode_event(message.payload, topic=message.topic)
                if event.match_id != match_id:
                    self._check_topic(event.match_id, match_id, message)
                lane = self._lanes.get(match_id) or self._lane(match_id)
                lane.active = stats.received
                self._check_seq(lane, event, message)
                self._enqueue(lane, lane.seq.on_event(event))
                if lane.resync_asked or lane.seq.resync_from is not None:
                    self._ask_for_snapshot(lane)
        except UnknownEventTypeError as err:
            self._skip_unknown(err, match_id, message)
        except DecodeError as err:
            stats.rejected += 1
            _log.warning(
                "message.rejected", topic=message.topic, reason=err.reason, excerpt=err.excerpt
            )
            self._dead_letter(message, err.reason)
        except Exception as err:  # a bug this message tripped: it costs this message only
            stats.rejected += 1
            reason = f"internal error: {type(err).__name__}: {clip(str(err))}"
            _log.exception(
                "message.failed",
                topic=message.topic,
                reason=reason,
                excerpt=clip_bytes(message.payload),
            )
            self._dead_letter(message, reason)

    def _on_status(self, message: Message, replayer_id: str) -> None:
        """A named replayer's status: subscribe to the exact state topic of each match it
        lists that is new to us. A bad status costs that message only."""
        try:
            fresh = self._discovery.new_topics(message, self._lanes)
        except DecodeError as err:
            self.stats.rejected += 1
            _log.warning(
                "message.rejected", topic=message.topic, reason=err.reason, excerpt=err.excerpt
            )
            self._dead_letter(message, err.reason)
            return
        if message.payload:  # a readable status, not a cleared one: the replayer exists
            self._replayer_watch.arrived(replayer_id)
        if fresh and self._source is not None:
            _log.info("state.discovered", topic=message.topic, matches=len(fresh))
            self._start_errand(subscribe_exact(self._source, fresh, 1, lost_ends=False))

    def _skip_unknown(self, err: UnknownEventTypeError, match_id: str, message: Message) -> None:
        """A newer minor's event type: skipped, counted, logged; its seq is passed over."""
        self.stats.unknown_skipped += 1
        _log.info(
            "event.unknown_skipped",
            topic=message.topic,
            event_type=err.event_type,
            schema_version=err.version,
            seq=err.seq,
        )
        if err.match_id == match_id and (lane := self._lanes.get(match_id)) is not None:
            self._enqueue(lane, lane.seq.on_unknown(err.seq, err.run))

    # ------------------------------------------------------------ bounded memory

    def _finish_lane(self, lane: _Lane) -> None:
        """A run of ``lane`` ended: forget the match once its grace has passed."""
        if not lane.finished:
            lane.finished = True
            self._finished.append((self._clock() + self.finished_grace_s, lane.match_id))

    def _sweep(self) -> None:
        """Forget the finished matches whose grace has passed (and are not busy)."""
        now = self._clock()
        finished = self._finished
        busy: list[tuple[float, str]] = []
        while finished and finished[0][0] <= now:
            item = finished.popleft()
            lane = self._lanes.get(item[1])
            if lane is None:
                continue  # evicted already
            if not lane.seq.ended:  # a new run started since
                lane.finished = False
                continue
            if lane.pending:
                busy.append(item)
                continue
            self._evict(lane, "finished")
        finished.extendleft(reversed(busy))

    def _make_room(self) -> None:
        """At ``max_matches``: evict the longest-idle matches (idle ones before busy ones), a
        twentieth of the bound at a time, so one scan is paid for many new matches."""
        self._sweep()
        lanes = self._lanes
        if len(lanes) < self.max_matches:
            return
        count = len(lanes) - self.max_matches + max(1, self.max_matches // _EVICT_SHARE)
        for lane in heapq.nsmallest(
            count, lanes.values(), key=lambda lane: (lane.pending > 0, lane.active)
        ):
            self._evict(lane, "bound")

    def _evict(self, lane: _Lane, reason: Literal["finished", "bound"]) -> None:
        del self._lanes[lane.match_id]
        seq = lane.seq
        if seq.ended and seq.run:  # remember that the run is over, in a few bytes (schema
            # 1.0's run 0 cannot be told from the next replay's, so nothing is kept of it)
            self._ended_runs[lane.match_id] = seq.run
            self._ended_runs.move_to_end(lane.match_id)
            while len(self._ended_runs) > self.max_matches:
                self._ended_runs.popitem(last=False)
        if lane.worker is not None and not lane.worker.done():
            lane.worker.cancel()
        if lane.wait is not None:
            lane.wait.cancel()
        self.stats.evicted += 1
        log = _log.info if reason == "finished" else _log.warning
        log(
            "match.evicted",
            match_id=lane.match_id,
            reason=reason,
            run=seq.run,
            last_seq=seq.state.last_seq if seq.state is not None else 0,
            dropped=lane.pending,
            tracked=len(self._lanes),
        )

    def _ask_for_snapshot(self, lane: _Lane) -> None:
        """After a gap, ask the broker for the retained snapshot again (by subscribing anew).

        The next live snapshot usually repairs the state anyway; asking matters when the
        broker dropped the snapshots too (a full queue), or the gap came at the end.
        """
        if lane.seq.resync_from is None:
            lane.resync_asked = False
            return
        if lane.resync_asked or self._source is None:
            return
        lane.resync_asked = True
        # The exact topic: RabbitMQ 3.10 gives a wildcard no retained messages (_latejoin).
        source, topic = self._source, self.topics.state(lane.match_id)

        async def ask() -> None:
            try:
                await source.subscribe(topic, qos=1)
            except MatchcastError as err:
                _log.warning("state.resync_not_asked", match_id=lane.match_id, reason=str(err))
            else:
                _log.info("state.resync_asked", match_id=lane.match_id, topic=topic)

        self._start_errand(ask())

    @staticmethod
    def _check_run(run: int, message: Message) -> None:
        """A newer run than the match's: refuse one that starts in the future (a day's leeway
        for clocks that disagree); checked only when a run is new, never per event."""
        limit = int(time.time() * 1000) + MAX_RUN_AHEAD_MS
        if run > limit:
            raise DecodeError(
                f"run {run} starts more than a day after this consumer's clock; refusing it "
                "rather than take every real run after it for a stale one",
                topic=message.topic,
                payload=message.payload,
            )

    def _check_seq(self, lane: _Lane, event: Event, message: Message) -> None:
        seq = lane.seq
        if event.run != seq.run:
            if event.run < seq.run:
                return  # an older run's: the sequencer drops it as stale
            self._check_run(event.run, message)
        # A newer run starts from nothing: its seqs are measured from 0.
        last = seq.state.last_seq if seq.state is not None and event.run == seq.run else 0
        if event.seq > last + self.max_seq_jump:
            raise DecodeError(
                f"seq {event.seq} is implausibly far past {last} (limit "
                f"{self.max_seq_jump}); refusing it rather than skip the match",
                topic=message.topic,
                payload=message.payload,
            )

    @staticmethod
    def _check_topic(payload_match: str, topic_match: str, message: Message) -> None:
        if payload_match != topic_match:
            raise DecodeError(
                f"match_id {quote(payload_match)} does not match the topic's {quote(topic_match)}",
                topic=message.topic,
                payload=message.payload,
            )

    def _dead_letter(self, message: Message, reason: str) -> None:
        """Copy a rejected message, with the reason, to the dead-letter topic (best effort)."""
        if self.dead_letters is None:
            return
        body = DeadLetter.of(self.name, message, reason).model_dump_json().encode()
        topic = self.topics.deadletter(self.name)
        publisher = self.dead_letters

        async def send() -> None:
            outcome = await send_dead_letter(publisher, topic, body)
            if outcome == "published":
                self.stats.dead_lettered += 1
            elif outcome == "refused":
                self.stats.dead_letters_refused += 1

        self._start_errand(send())

    def _start_errand(self, errand: Coroutine[Any, Any, None]) -> None:
        """Run ``errand`` beside the reader, which must not wait on the broker for it; the
        runner waits for what is left of it (2 s at most) when it stops."""
        task = asyncio.ensure_future(errand)
        self._errands.add(task)
        task.add_done_callback(self._errands.discard)

    def _lane(self, match_id: str) -> _Lane:
        """The lane of ``match_id``, made if new."""
        lanes = self._lanes
        lane = lanes.get(match_id)
        if lane is not None:
            return lane
        if self._finished and self._finished[0][0] <= self._clock():
            self._sweep()
        if len(lanes) >= self.max_matches:
            self._make_room()
        sequencer = Sequencer(match_id, self.stats, window=self.reorder_window)
        lane = _Lane(match_id, self.queue_size, sequencer, active=self.stats.received)
        sequencer.on_end = lambda: self._finish_lane(lane)
        sequencer.on_wait = lambda waiting: self._wait(lane, waiting)
        lanes[match_id] = lane
        if (ended := self._ended_runs.pop(match_id, None)) is not None:
            sequencer.run, sequencer.ended = ended, True  # what it was told: still over
            self._finish_lane(lane)
        return lane

    def _wait(self, lane: _Lane, waiting: bool) -> None:
        """Start (or stop) the timer that ends ``lane``'s wait for a missing seq."""
        if lane.wait is not None:
            lane.wait.cancel()
            lane.wait = None
        if waiting:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # fed outside a loop: the count bound and drain still end it
                return
            lane.wait = loop.call_later(self.reorder_wait, self.release, lane.match_id)

    def release(self, match_id: str) -> None:
        """Stop waiting for the missing seqs of ``match_id``: what is held is handled past a
        gap (what the reorder timer calls; a test may call it instead of waiting)."""
        lane = self._lanes.get(match_id)
        if lane is None:
            return
        try:  # the wait ended: on_wait(False) stops the timer (a no-op once it fired)
            self._enqueue(lane, lane.seq.release())
            if lane.seq.resync_from is not None:
                self._ask_for_snapshot(lane)
        except Exception:  # a bug: it must not end the loop's callback silently
            _log.exception("consumer.release_failed", match_id=match_id)

    def _put(self, lane: _Lane, item: _Item) -> bool:
        """Queue ``item`` on ``lane``, starting its worker the first time it is needed (most
        lanes with sync handlers never need one)."""
        if lane.worker is None:
            lane.worker = asyncio.ensure_future(self._work(lane))
        return lane.put(item)

    def _enqueue(self, lane: _Lane, deliveries: list[Delivery]) -> None:
        for event, state in deliveries:
            if not lane.pending:
                # Nothing queued or running for this match: call its handlers now rather than
                # through the queue. A sync handler would block the loop from the worker just
                # the same; the first one that returns an awaitable hands over to the worker.
                calls = self._calls(event)
                args = (state,) if event is None else (event, state)
                left = self._call_sync(calls, 0, args, event, state)
                if left is not None:
                    self._put(lane, (event, state, *left))
                continue
            if not lane.behind:
                if self._put(lane, (event, state, 0, None)):
                    continue
                lane.behind = True
                _log.warning(
                    "consumer.fell_behind",
                    match_id=lane.match_id,
                    seq=state.last_seq,
                    queued=len(lane.items),
                )
            # Behind: the sequencer keeps the state; the worker hands it over on catching up.
            if event is not None:
                lane.skipped += 1
                self.stats.overflowed += 1

    # ------------------------------------------------------------ the lanes

    async def _work(self, lane: _Lane) -> None:
        items = lane.items
        loop = asyncio.get_running_loop()
        while True:
            if not items:
                lane.wake = loop.create_future()
                await lane.wake
                continue
            event, state, index, running = items.popleft()
            try:
                calls = self._calls(event)
                args = (state,) if event is None else (event, state)
                while True:
                    if running is not None:
                        sub, _, name, timeout = calls[index - 1]
                        await self._finish(running, sub, name, timeout, event, state)
                    left = self._call_sync(calls, index, args, event, state)
                    if left is None:
                        break
                    index, running = left
            except Exception:  # pragma: no cover - _start/_finish catch what handlers raise
                _log.exception("consumer.dispatch_failed", match_id=lane.match_id)
            finally:
                if lane.behind and len(items) <= self.queue_size // 2:
                    self._catch_up(lane)
                lane.done()

    def _calls(self, event: Event | None) -> tuple[_Call, ...]:
        """The handlers ``event`` goes to (the state handlers for None), in order."""
        if event is None:
            return tuple(
                (sub, fn, handler_name(fn), None)
                for sub in self.subscribers
                for fn in sub.state_handlers
            )
        version = sum(map(len, self._registrations))
        if version != self._routes_version:
            self._routes.clear()
            self._routes_version = version
        key = (type(event), event.match_id)
        calls = self._routes.get(key)
        if calls is None:
            if len(self._routes) >= _ROUTES_CACHED:
                self._routes.clear()
            calls = self._routes[key] = tuple(
                (sub, r.handler, r.name, r.timeout)
                for sub in self.subscribers
                for r in sub.handlers_for(event)
            )
        return calls

    def _call_sync(
        self,
        calls: tuple[_Call, ...],
        index: int,
        args: tuple[object, ...],
        event: Event | None,
        state: MatchState,
    ) -> tuple[int, Awaitable[None]] | None:
        """Call ``calls[index:]`` in order until one returns an awaitable; then the index of
        the next call and that awaitable, for the worker to await. None when all are done."""
        while index < len(calls):
            sub, fn, name, _ = calls[index]
            index += 1
            running = self._start(sub, fn, name, args, event, state)
            if running is not None:
                return index, running
        return None

    def _catch_up(self, lane: _Lane) -> None:
        state = lane.seq.state
        assert state is not None
        lane.behind = False
        self.stats.catch_ups += 1
        _log.info(
            "consumer.caught_up", match_id=lane.match_id, seq=state.last_seq, skipped=lane.skipped
        )
        lane.skipped = 0
        lane.put((None, state, 0, None))

    def _start(
        self,
        sub: Subscriber,
        fn: _Fn,
        name: str,
        args: tuple[object, ...],
        event: Event | None,
        state: MatchState,
    ) -> Awaitable[None] | None:
        """Call one handler; the awaitable it returned (for :meth:`_finish`), or None when it
        is done (a sync handler: its outcome is recorded here)."""
        t0 = time.monotonic()
        try:
            result = fn(*args)
        except Exception as err:
            self._record(sub, name, event, state, "error", err)
            return None
        finally:
            if (blocked := time.monotonic() - t0) > BLOCKING_WARN_S:
                _log.warning(
                    "handler.blocked_loop",
                    handler=f"{sub.name}.{name}",
                    match_id=state.match_id,
                    seq=event.seq if event else state.last_seq,
                    blocked_s=round(blocked, 3),
                    hint="a sync handler stalls every match; make it async (asyncio.to_thread)",
                )
        if result is None and self.observer is None:  # the usual case, kept short
            self.stats.handled += 1
            return None
        if result is None or not inspect.isawaitable(result):
            self._record(sub, name, event, state, "ok", None)
            return None
        return result

    async def _finish(
        self,
        result: Awaitable[None],
        sub: Subscriber,
        name: str,
        limit_s: float | None,
        event: Event | None,
        state: MatchState,
    ) -> None:
        """Await what an async handler returned, within its timeout, and record the outcome."""
        timeout = limit_s or self.handler_timeout
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                await result
        except Exception as err:
            if isinstance(err, TimeoutError) and deadline.expired():
                self.stats.handler_timeouts += 1
                _log.error(
                    "handler.timed_out",
                    handler=f"{sub.name}.{name}",
                    match_id=state.match_id,
                    seq=event.seq if event else state.last_seq,
                    timeout_s=timeout,
                )
                self._record(sub, name, event, state, "timeout", err)
            else:
                self._record(sub, name, event, state, "error", err)
        else:
            self._record(sub, name, event, state, "ok", None)

    def _record(
        self,
        sub: Subscriber,
        name: str,
        event: Event | None,
        state: MatchState,
        outcome: Literal["ok", "error", "timeout"],
        error: BaseException | None,
    ) -> None:
        if outcome == "ok":
            self.stats.handled += 1
        elif outcome == "error":
            self.stats.handler_errors += 1
            _log.error(
                "handler.failed",
                handler=f"{sub.name}.{name}",
                match_id=state.match_id,
                seq=event.seq if event else state.last_seq,
                event_type=event.type if event else "state",
                payload=event.model_dump(mode="json", exclude_none=True) if event else None,
                exc_info=error,
            )
        if self.observer is not None:
            call = HandlerCall(
                sub.name, f"{sub.name}.{name}", state.match_id, event, state, outcome, error
            )
            try:
                self.observer(call)
            except Exception:
                _log.exception("consumer.observer_failed", handler=f"{sub.name}.{name}")
