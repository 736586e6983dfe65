"""One load run: connect probes and publishers, send, drain, and keep every figure.

The probes subscribe before anything is sent; the run ends when every consumer has every
event the sender published, or when nothing has arrived for ``drain_idle_s`` (what is still
missing then is loss).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import structlog

from events import (
    BatchSource,
    BrokerError,
    MatchcastError,
    Message,
    MessageSource,
    Publisher,
    Topics,
)
from matchcast.load._accounting import (
    DUPLICATE,
    ConsumerAccount,
    LatencyUnion,
    StreamStats,
    parse_probe_fields,
)
from matchcast.load._nodes import NodeTally, node_key
from matchcast.load._sender import Sender, SenderStats
from matchcast.load._stages import Stages
from matchcast.load._verify import collect_reported_states, verify_states
from matchcast.load._workload import LoadShape, MatchTemplate
from matchcast.transport import failover
from matchcast.transport.failover import QuickLosses
from simulator import ChaosSpec

if TYPE_CHECKING:
    from matchcast.transport.connection import BrokerURL

__all__ = [
    "ClientFactory",
    "ConnectionHealth",
    "LoadClient",
    "LoadOptions",
    "LoadRun",
    "Progress",
    "probe_filter",
]

_log = structlog.get_logger("matchcast.load")


class LoadClient(Publisher, MessageSource, Protocol):
    """A connection that both publishes and subscribes (both MQTT clients are one)."""

    @property
    def url(self) -> BrokerURL:
        """The node of the current connection (after a failover, the new one)."""
        ...


#: Makes a client from a client id and a role (``pub``, ``probe``, ``verify``); entering it
#: connects.
ClientFactory = Callable[[str, str], AbstractAsyncContextManager[LoadClient]]


@dataclass(frozen=True, slots=True)
class LoadOptions:
    """Everything about a run except the broker connection.

    Attributes:
        shape: the load shape.
        topics: the topic tree.
        subscribers: probe connections.
        subscriber_stages: the probe connections over time instead (``--subscriber-stages``):
            probes join and leave on the way to each stage's target; each is expected to
            receive what was sent while it listened.
        shared_group: put the probes in this shared subscription group (``$share/NAME/...``)
            so together they act as one consumer; None for plain subscriptions, each probe a
            consumer of its own.
        publishers: publishing connections.
        max_inflight: publishes awaiting the broker at once, per connection.
        overrun_ms: a send later than this against its due time counts as a sender overrun.
        drain_idle_s: after the last send, stop waiting once nothing arrived for this long.
        drain_max_s: and in any case after this long.
        verify_state: afterwards, compare the final state each consumer reported (see
            :mod:`matchcast.load._verify`) with the truth for every match played to the end.
        verify_timeout_s: how long to wait for the consumers' reports.
        expect_consumers: consumer ids that must report (others are checked if they do).
        shard: ``(i, n)``: this process is shard i of n. It sends matches i, i+n, i+2n, ...
            of the run; its probes see every shard's matches, and it drains until the
            broker goes quiet, so merged reports account every stream (see ``merge_reports``).
        start_at: epoch seconds to start sending at, once connected and subscribed: shards
            of one run start together, so no shard's probes miss another's first events.
        start_gate: awaited once connected and subscribed, before anything is sent (and
            before ``start_at``): the worker processes of one machine tell their parent they
            are ready and wait for its go, so none sends before every probe listens, however
            slowly a loaded machine starts them.
        reconnect: reconnect a probe whose connection dropped (counted; what it missed
            meanwhile is loss).
        chaos: faults to inject into each copy's stream (see :mod:`simulator._chaos`).
        seed: the chaos seed: with a copy's index, it decides that copy's faults.
    """

    shape: LoadShape
    topics: Topics
    subscribers: int = 1
    subscriber_stages: Stages | None = None
    shared_group: str | None = None
    publishers: int = 1
    max_inflight: int = 1000
    overrun_ms: float = 10.0
    drain_idle_s: float = 2.0
    drain_max_s: float = 60.0
    verify_state: bool = False
    verify_timeout_s: float = 15.0
    expect_consumers: tuple[str, ...] = ()
    shard: tuple[int, int] | None = None
    start_at: float | None = None
    start_gate: Callable[[], Awaitable[None]] | None = None
    reconnect: bool = True
    chaos: ChaosSpec | None = None
    seed: int = 0


def probe_filter(topics: Topics, shared_group: str | None) -> str:
    """What a probe subscribes to: every match's events, in a shared group if asked."""
    plain = topics.events("+")
    return f"$share/{shared_group}/{plain}" if shared_group else plain


@dataclass(slots=True)
class ConnectionHealth:
    """Connections of one kind (publishers or probes)."""

    connect_ms: list[float] = field(default_factory=list)
    failures: int = 0
    failure_reasons: list[str] = field(default_factory=list)
    disconnects: int = 0
    reconnects: int = 0


@dataclass(frozen=True, slots=True)
class Progress:
    """A glance at a run in progress, for the live view."""

    elapsed_s: float
    matches_active: int
    matches_started: int
    sent_per_s: int
    delivered_per_s: int
    p99_ms: float
    overruns: int
    failures: int


class LoadRun:
    """One run; :meth:`run` does it, the attributes hold what it measured."""

    def __init__(
        self,
        options: LoadOptions,
        templates: Sequence[MatchTemplate],
        factory: ClientFactory,
        *,
        wrap_publisher: Callable[[Publisher], Publisher] | None = None,
        id_prefix: str = "",
    ) -> None:
        self.options = options
        self.templates = list(templates)
        self.factory = factory
        self.wrap_publisher = wrap_publisher
        self.id_prefix = id_prefix
        self.first_index, self.index_step = options.shard or (0, 1)
        self.probes = ConnectionHealth()
        self.pubs = ConnectionHealth()
        self.accounts: list[ConsumerAccount] = []
        #: Every probe's latencies, by second: one series per node, read as one.
        self.latency = LatencyUnion()
        #: What flowed through each node, by its name in reports (see ``node_key``).
        self.nodes: dict[str, NodeTally] = {}
        #: The node of each publisher connection, in the sender's order.
        self.publisher_nodes: list[str] = []
        self.sender: Sender | None = None
        self.last_rx = 0.0
        self.first_rx = 0.0
        self.ended = 0.0
        self.verification: dict[str, Any] | None = None
        #: Probe connections open now.
        self.probes_live = 0
        #: Set when the sender starts (its clock, ``sender.mono0``, is set).
        self.sending = asyncio.Event()
        #: Why the run was cut short (``--abort-on-fail``: the check, its value, the second).
        self.aborted: dict[str, Any] | None = None

    def abort(self, why: dict[str, Any]) -> None:
        """End the run now: stop sending, skip the drain; ``why`` goes in the report."""
        self.aborted = why
        if self.sender is not None:
            self.sender.stop()

    def _tally(self, url: BrokerURL) -> NodeTally:
        """The figures of node ``url``, new the first time it is named."""
        key = node_key(url)
        tally = self.nodes.get(key)
        if tally is None:
            tally = self.nodes[key] = NodeTally(latency=self.latency.part())
        return tally

    def publisher_figures(self) -> list[tuple[str, int, int, int]]:
        """Per publisher connection: its node, events published, acknowledged and failures."""
        sender = self.sender
        if sender is None:
            return []
        return list(
            zip(
                self.publisher_nodes,
                sender.conn_events,
                sender.conn_acked,
                sender.conn_failures,
                strict=True,
            )
        )

    @property
    def stats(self) -> SenderStats:
        """The sender's figures."""
        assert self.sender is not None, "the run has not started"
        return self.sender.stats

    async def _connect(
        self,
        stack: contextlib.AsyncExitStack,
        kind: str,
        n: int,
        health: ConnectionHealth,
        *,
        first: int = 0,
    ) -> list[LoadClient]:
        out = []
        failed: list[tuple[str, MatchcastError | OSError]] = []
        tag = self.options.shape.tag
        for i in range(first, first + n):
            client_id = f"mc-load-{tag}-{kind}-{self.first_index}-{i}"
            t = time.monotonic()
            try:
                client = await stack.enter_async_context(self.factory(client_id, kind))
            except (MatchcastError, OSError) as err:
                health.failures += 1
                health.failure_reasons.append(str(err))
                failed.append((client_id, err))
                continue
            health.connect_ms.append((time.monotonic() - t) * 1000)
            self._tally(client.url).connections[kind] += 1
            if kind == "probe":
                self.probes_live += 1
            if kind == "pub":
                self.publisher_nodes.append(node_key(client.url))
            out.append(client)
        if n and not out:
            # One error, the line every command says of a broker it cannot reach (the broker
            # named once, no warnings before it).
            last = failed[-1][1] if failed else None
            if isinstance(last, BrokerError):
                raise last
            raise BrokerError("?", f"no {kind} connection succeeded: {last}")
        for client_id, error in failed:
            _log.warning("connection.failed", kind=kind, client_id=client_id, error=str(error))
        return out

    async def run(self) -> None:
        """Connect, send, drain. Raises ``BrokerError`` if no connection at all succeeds."""
        opts = self.options
        async with contextlib.AsyncExitStack() as stack:
            staged = opts.subscriber_stages
            first_probes = 0 if staged is not None else opts.subscribers
            probes = await self._connect(stack, "probe", first_probes, self.probes)
            flt = probe_filter(opts.topics, opts.shared_group)
            for probe in probes:
                await probe.subscribe(flt, qos=opts.shape.qos)
            if opts.shared_group:
                group = ConsumerAccount(f"$share/{opts.shared_group}", members=len(probes))
                self.accounts = [group]
                routes = [group] * len(probes)
            else:
                self.accounts = [ConsumerAccount(self._probe_name(i)) for i in range(len(probes))]
                routes = self.accounts
            clients = await self._connect(stack, "pub", opts.publishers, self.pubs)
            publishers: list[Publisher] = list(clients)
            if self.wrap_publisher is not None:
                publishers = [self.wrap_publisher(p) for p in publishers]
            if opts.start_gate is not None:
                await opts.start_gate()
            if opts.start_at is not None:
                wait = opts.start_at - time.time()
                if wait < 0:
                    _log.warning("load.start_missed", late_s=round(-wait, 3))
                await asyncio.sleep(max(wait, 0))
            self.sender = sender = Sender(
                self.templates,
                opts.shape,
                publishers,
                topics=opts.topics,
                max_inflight=opts.max_inflight,
                overrun_ms=opts.overrun_ms,
                id_prefix=self.id_prefix,
                first_index=self.first_index,
                index_step=self.index_step,
                chaos=opts.chaos,
                seed=opts.seed,
            )
            # Whoever waits on it runs once this task next yields: inside sender.run(), whose
            # clock is set before its first await.
            self.sending.set()
            _log.info(
                "load.started",
                matches=opts.shape.matches,
                subscribers=len(probes),
                publishers=len(publishers),
                qos=opts.shape.qos,
            )
            async with asyncio.TaskGroup() as tg:
                readers = [
                    tg.create_task(self._read(p, acc, i))
                    for i, (p, acc) in enumerate(zip(probes, routes, strict=True))
                ]
                readers.append(tg.create_task(self._seal()))
                if staged is not None:
                    readers.append(tg.create_task(self._probe_stages(staged)))
                try:
                    await sender.run()
                    await self._drain()
                finally:
                    for r in readers:
                        r.cancel()
            self.ended = time.monotonic()
            if opts.verify_state:
                await self._verify(stack)
        _log.info("load.finished", events=self.stats.events, failures=self.stats.failures)

    async def _probe_stages(self, stages: Stages) -> None:
        """Under ``--subscriber-stages``: probes join and leave (the newest first) on the way
        to this shard's share of each stage's target, on the sender's clock."""
        leaving: list[asyncio.Event] = []
        async with asyncio.TaskGroup() as tg:
            while True:
                sender = self.sender
                elapsed = time.monotonic() - sender.mono0 if sender and sender.mono0 else 0.0
                want = len(range(self.first_index, stages.target(elapsed), self.index_step))
                while len(leaving) < want:
                    leave = asyncio.Event()
                    tg.create_task(self._staged_probe(len(leaving), leave))
                    leaving.append(leave)
                while len(leaving) > want:
                    leaving.pop().set()
                await asyncio.sleep(0.1)

    async def _staged_probe(self, index: int, leave: asyncio.Event) -> None:
        """One probe of ``--subscriber-stages``: it is expected to receive what is sent from
        when it listens until it is told to leave, and gets ``drain_idle_s`` to receive what
        was sent before it left."""
        opts = self.options
        async with contextlib.AsyncExitStack() as stack:
            try:
                [probe] = await self._connect(stack, "probe", 1, self.probes, first=index)
                await probe.subscribe(probe_filter(opts.topics, None), qos=opts.shape.qos)
            except (MatchcastError, OSError) as err:
                _log.warning("probe.join_failed", index=index, error=str(err))
                return
            sent = self.sender.stats.expected if self.sender is not None else {}
            account = ConsumerAccount(self._probe_name(index), since=dict(sent))
            self.accounts.append(account)
            reader = asyncio.ensure_future(self._read(probe, account, index))
            try:
                await leave.wait()
                account.until = dict(self.sender.stats.expected if self.sender else {})
                deadline = time.monotonic() + opts.drain_idle_s
                while True:  # what was sent before it left: until it has it, or idle time
                    if not account.owed(account.until) or time.monotonic() >= deadline:
                        break
                    await asyncio.sleep(0.05)
            finally:
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await reader
                self.probes_live -= 1

    def _probe_name(self, index: int) -> str:
        """Probe ``index``'s consumer name in reports."""
        return (
            f"probe-{index}" if self.options.shard is None else f"probe-{self.first_index}-{index}"
        )

    async def _seal(self) -> None:
        """Compress the latencies of seconds past, so a long run's memory stays flat."""
        while True:
            await asyncio.sleep(1.0)
            sender = self.sender
            if sender is not None and sender.wall0:
                second = int(time.time() - sender.wall0) - 2
                self.latency.seal_before(second)
                sender.stats.lateness.seal_before(second)

    async def _verify(self, stack: contextlib.AsyncExitStack) -> None:
        opts = self.options
        stats = self.stats
        [client] = await self._connect(stack, "verify", 1, ConnectionHealth())
        truth = {
            m: stats.truth[m] if m in stats.truth else stats.templates[m].final_state(m)
            for m in stats.completed
        }
        reported = await collect_reported_states(
            client,
            opts.topics,
            list(truth),
            consumers=opts.expect_consumers,
            timeout_s=opts.verify_timeout_s,
        )
        self.verification = verify_states(reported, truth)
        _log.info("load.verified", ok=self.verification["ok"], matches=len(truth))

    async def _drain(self) -> None:
        if self.aborted is not None:
            return
        opts = self.options
        expected = self.stats.expected
        start = time.monotonic()
        self.last_rx = max(self.last_rx, time.time())
        while True:
            idle = time.time() - self.last_rx
            complete = all(acc.complete(expected) for acc in self.accounts)
            if complete and (opts.shard is None or idle >= opts.drain_idle_s):
                return
            now = time.monotonic()
            if idle >= opts.drain_idle_s or now - start >= opts.drain_max_s:
                _log.info("load.drain_gave_up", idle_s=round(idle, 2))
                return
            await asyncio.sleep(0.02)

    async def _read(self, probe: LoadClient, account: ConsumerAccount, index: int) -> None:
        """Account what ``probe`` receives; reconnect (and count it) if the connection drops."""
        losses = QuickLosses()  # the one failover policy's wait (transport/failover.py)
        losses.connected()
        async with contextlib.AsyncExitStack() as stack:
            while True:
                try:
                    await self._consume(probe, account)
                except BrokerError as err:
                    self.probes.disconnects += 1
                    self.probes_live -= 1
                    _log.warning("probe.disconnected", consumer=account.name, error=str(err))
                else:
                    return
                if not self.options.reconnect:
                    return
                probe = await self._reconnect(stack, index, losses)
                self.probes.reconnects += 1
                self.probes_live += 1

    async def _reconnect(
        self, stack: contextlib.AsyncExitStack, index: int, losses: QuickLosses
    ) -> LoadClient:
        """A new probe in place of a lost one; each attempt after the policy's wait (a probe
        whose broker drops it at once, or refuses it, is not replaced in a storm)."""
        opts = self.options
        client_id = f"mc-load-{opts.shape.tag}-probe-{self.first_index}-{index}"
        while True:
            wait = losses.wait()
            if wait:
                _log.info("probe.reconnect_delayed", client_id=client_id, wait_s=wait)
                await failover.backoff(wait)
            t = time.monotonic()
            try:
                client = await stack.enter_async_context(self.factory(client_id, "probe"))
                await client.subscribe(
                    probe_filter(opts.topics, opts.shared_group), qos=opts.shape.qos
                )
            except (MatchcastError, OSError) as err:
                self.probes.failures += 1
                self.probes.failure_reasons.append(str(err))
                continue
            losses.connected()
            self.probes.connect_ms.append((time.monotonic() - t) * 1000)
            self._tally(client.url).connections["probe"] += 1
            _log.info("probe.reconnected", client_id=client_id, broker=node_key(client.url))
            return client

    async def _consume(self, probe: LoadClient, account: ConsumerAccount) -> None:
        ingest = self._ingester(account, probe)
        if isinstance(probe, BatchSource):
            probe.set_batch_handler(lambda batch: ingest(batch, time.time()))
            try:
                await probe.wait_closed()
            finally:
                probe.set_batch_handler(None)
            return
        async for message in probe.messages():
            ingest([message], time.time())

    def _ingester(
        self, account: ConsumerAccount, probe: LoadClient
    ) -> Callable[[Sequence[Message], float], None]:
        """Accounts a batch of messages that arrived at ``now`` (epoch seconds) on ``probe``.

        What arrives counts for the consumer and for the node ``probe`` is connected to: the
        node's counters are added to once per batch, and its latency series takes the latency
        instead of a run-wide one, so a node costs the hot path no lookup per message.
        """
        topics = self.options.topics
        match_of: dict[str, str | None] = {}  # topic -> match id; None: not an event topic
        streams = account.streams
        plain = self.options.shared_group is None
        url = probe.url
        tally = self._on_node(account, url, plain)

        def ingest(batch: Sequence[Message], now: float) -> None:
            nonlocal url, tally
            if probe.url is not url:  # the client failed over: the rest counts on its new node
                url = probe.url
                tally = self._on_node(account, url, plain, moved=True)
            add = tally.latency.add
            sender = self.sender
            wall0 = sender.wall0 if sender is not None and sender.wall0 else now
            second = int(now - wall0)
            skipped = duplicates = reordered = 0
            for topic, payload, _, _ in batch:
                try:
                    match_id = match_of[topic]
                except KeyError:
                    if len(match_of) > 100_000:
                        match_of.clear()
                    parsed = topics.parse(topic)
                    match_id = match_of[topic] = (
                        parsed[1] if parsed is not None and parsed[0] == "events" else None
                    )
                if match_id is None:
                    account.unexpected += 1
                    skipped += 1
                    continue
                try:
                    seq, scheduled = parse_probe_fields(payload)
                except ValueError:
                    account.malformed += 1
                    skipped += 1
                    continue
                stream = streams.get(match_id)
                if stream is None:
                    stream = streams[match_id] = StreamStats()
                if outcome := stream.record(seq):
                    if outcome == DUPLICATE:
                        duplicates += 1
                    else:
                        reordered += 1
                add(second, int((now - scheduled) * 1e6) if scheduled is not None else 0)
            if batch:
                tally.received += len(batch) - skipped
                tally.duplicates += duplicates
                tally.reordered += reordered
                self._arrived(now)

        return ingest

    def _arrived(self, now: float) -> None:
        if not self.first_rx:
            self.first_rx = now
        self.last_rx = now

    def _on_node(
        self, account: ConsumerAccount, url: BrokerURL, plain: bool, *, moved: bool = False
    ) -> NodeTally:
        """The tally of ``url``, where ``account``'s probe now reads (``moved``: its client
        connected there by failing over, a connection of its own); a plain probe's consumer
        moves there (its loss is counted on the node of its last connection)."""
        tally = self._tally(url)
        if moved:
            tally.connections["probe"] += 1
        if plain:
            for other in self.nodes.values():
                other.consumers.discard(account.name)
            tally.consumers.add(account.name)
        return tally

    def progress(self) -> Progress:
        """The run at a glance, for the live view."""
        sender = self.sender
        if sender is None or not sender.mono0:
            return Progress(0.0, 0, 0, 0, 0, 0.0, 0, 0)
        stats = sender.stats
        elapsed = time.monotonic() - sender.mono0
        sec = max(int(elapsed) - 1, 0)
        delivered = self.latency.count(sec)
        p99 = 0.0
        counts = self.latency.counts(sec)
        total = sum(counts.values())
        if total:
            running, limit = 0, total * 0.99
            for v in sorted(counts):
                running += counts[v]
                if running >= limit:
                    p99 = v / 1000
                    break
        return Progress(
            elapsed_s=elapsed,
            matches_active=stats.matches_started - stats.matches_completed,
            matches_started=stats.matches_started,
            sent_per_s=stats.sent.get(sec, 0),
            delivered_per_s=delivered,
            p99_ms=p99,
            overruns=stats.overruns,
            failures=stats.failures,
        )
