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

The :class:`Runner` is one object built in layers, a module each, every layer calling only
itself and those below it:

- this module: its options, the lifecycle (start and stop hooks, drain), subscribing, reading;
- consumers/_intake.py: each message through the one boundary, its checks, dead letters;
- consumers/_memory.py: a match's lane made, forgotten after its grace, evicted at the bound;
- consumers/_gaps.py: the wait for a missing seq, the snapshot asked for after a gap;
- consumers/_lanes.py: the lanes, their workers, and the calls of the handlers.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, Self

import structlog

from consumers._deadletter import consumer_name
from consumers._errors import PluginError
from consumers._gaps import REORDER_WAIT_S
from consumers._intake import _PARSED_CACHE, MAX_SEQ_JUMP, _Intake
from consumers._lanes import HandlerCall, _Call, _Lane
from consumers._latejoin import (
    REPLAYER_WAIT_S,
    ReplayerWatch,
    StatusDiscovery,
    expect_snapshots,
    resumed,
    subscribe_exact_states,
)
from consumers._memory import FINISHED_GRACE_S, MAX_MATCHES
from consumers._sequencer import REORDER_WINDOW, RunnerStats
from consumers._subscriber import Subscriber, call_handler, handler_name
from events import (
    BatchSource,
    Event,
    MatchState,
    Message,
    MessageSource,
    Publisher,
    TopicKind,
    Topics,
    replayer_id_problem,
)

__all__ = ["MAX_MATCHES", "HandlerCall", "Runner", "RunnerStats"]

_log = structlog.get_logger("matchcast.consumer")


class Runner(_Intake):
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
