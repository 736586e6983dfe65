"""A lean asyncio MQTT client (5 and 3.1.1) for the hot paths: load generation and ``consume``.

aiomqtt (on paho) spends about 0.2 ms of CPU per message, which caps a Python load generator
or plug-in host far below what mosquitto routes. :class:`FastClient` implements the same
:class:`events.Publisher`, :class:`events.MessageSource` and :class:`events.Reconnectable`
protocols as :class:`matchcast.transport.mqtt.MqttClient`, plus ``publish_nowait`` so a load
generator can keep many publishes in flight without a task each, and
:class:`events.BatchSource` (``set_batch_handler``), so a consumer can take each read's
messages in one call instead of one at a time from :meth:`FastClient.messages`.

It is built in :mod:`matchcast.transport.fast`:

- :mod:`~matchcast.transport.fast.link`: one connection, and the one QoS state machine over
  it, written once for both versions;
- :mod:`~matchcast.transport.fast.codec5` (the Rust ``mqtt5`` codec) and
  :mod:`~matchcast.transport.fast.codec311` (:mod:`matchcast.transport.mqtt311`): each
  version's packets, to and from the shapes of :mod:`~matchcast.transport.fast.packets`;
- :mod:`~matchcast.transport.fast.connect`: the socket, CONNECT and CONNACK, and which version
  the broker speaks;
- :mod:`~matchcast.transport.fast.session`: the subscriptions and QoS 2 state across
  connections; :mod:`~matchcast.transport.fast.inbox`: where received messages go.

Scope:

- MQTT 5 and 3.1.1: ``protocol="auto"`` finds the version the broker speaks, once per broker
  address (:mod:`~matchcast.transport.fast.connect`).
- A list of brokers, tried as :class:`matchcast.transport.failover.Attempts` says; :meth:`reconnect`
  replaces a lost connection (backoff with jitter, giving up after ``max_outage`` with one
  :class:`events.BrokerError`) and restores the subscriptions where the broker kept no
  session for us.
- Persistent sessions (``clean_start=False``, a fixed ``client_id``, ``session_expiry`` on
  v5), the last will, QoS 0, 1 and 2 both ways with the broker's receive maximum respected
  (``max_inflight`` on 3.1.1, which has none), keepalive pings that also notice a silent
  broker, TLS and client certificates, username/password, a clean DISCONNECT. A packet the
  broker may not send closes the connection, in both versions
  (:mod:`~matchcast.transport.fast.link` says why).
- Not: publishes in flight when a connection is lost are failed with
  :class:`events.ConnectionLostError`, not resent on the next connection (the replayer, which
  needs that, resumes by itself at the first unacknowledged event); no MQTT 5 properties on a
  3.1.1 connection (the standard has none), no topic aliases, no enhanced authentication.
"""

from __future__ import annotations

import asyncio
import ssl
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from types import TracebackType
from typing import Literal, Self

import structlog

from events import BrokerError, ConnectionLostError, Message, MessageProps
from matchcast.transport.connection import BrokerURL, Protocol, WillSpec
from matchcast.transport.failover import (
    FAILOVER_CONNECT_TIMEOUT,
    Attempt,
    Attempts,
    Session,
    fail_over,
)
from matchcast.transport.fast.connect import Hello, open_link
from matchcast.transport.fast.inbox import BatchHandler, Inbox
from matchcast.transport.fast.link import Link, WriteCounts
from matchcast.transport.fast.packets import Codec
from matchcast.transport.fast.session import Subscriptions

__all__ = ["FastClient"]

_log = structlog.get_logger("matchcast.fastmqtt")

#: Messages :meth:`FastClient.messages` yields before it lets the event loop run other work.
_YIELD_EVERY = 256


class FastClient:
    """A connection to one of a list of brokers; implements ``Publisher``, ``MessageSource``,
    ``BatchSource`` and ``Reconnectable``.

    Use as an async context manager, like :class:`matchcast.transport.mqtt.MqttClient`::

        async with FastClient(BrokerURL.parse("mqtt://127.0.0.1:1883")) as client:
            await client.publish("a/b", b"{}", qos=1)
    """

    def __init__(
        self,
        urls: BrokerURL | Sequence[BrokerURL],
        *,
        client_id: str | None = None,
        protocol: Protocol = "auto",
        will: WillSpec | None = None,
        clean_start: bool = True,
        session_expiry: int | None = None,
        keepalive: int = 30,
        connect_timeout: float = 10.0,
        probe_timeout: float = 3.0,
        failover_timeout: float = FAILOVER_CONNECT_TIMEOUT,
        max_inflight: int = 100,
        tls_context: ssl.SSLContext | None = None,
        backoff_initial: float = 0.1,
        backoff_max: float = 5.0,
        max_outage: float = 300.0,
        on_reconnect: Callable[[FastClient], Awaitable[None]] | None = None,
    ) -> None:
        self.urls = (urls,) if isinstance(urls, BrokerURL) else tuple(urls)
        if not self.urls:
            raise ValueError("no broker to connect to")
        #: The broker of the current (or last) connection.
        self.url = self.urls[0]
        #: The client id, clean start and session-present flag across connections.
        self.session = Session(
            client_id or f"matchcast-{uuid.uuid4().hex[:12]}", clean_start=clean_start
        )
        self.keepalive = keepalive
        self.protocol = protocol
        self.will = will
        self.session_expiry = session_expiry
        self.max_inflight = max_inflight
        self.max_outage = max_outage
        self.on_reconnect = on_reconnect
        #: Connections replaced by :meth:`reconnect` so far.
        self.reconnects = 0
        #: The protocol of the current connection, once connected.
        self.protocol_version: Literal["5", "3.1.1"] | None = None
        # A failover attempt on a list waits briefly for a node that stalls its CONNECT (NATS
        # while JetStream elects new leaders): the next node may answer at once.
        self._attempts = Attempts(
            self.urls,
            initial=backoff_initial,
            cap=backoff_max,
            connect_timeout=connect_timeout,
            failover_timeout=failover_timeout,
        )
        self._timeout = connect_timeout
        self._probe_timeout = min(probe_timeout, connect_timeout)
        self._tls = tls_context
        self._reconnect_lock = asyncio.Lock()
        self._generation = 0
        self._subscriptions = Subscriptions()
        self._inbox = Inbox()
        self._counts = WriteCounts()
        self._link: Link | None = None
        self._leaving = False

    @property
    def packets_out(self) -> int:
        """Packets written, over every connection."""
        return self._counts.packets

    @property
    def writes(self) -> int:
        """How many writes (flushes) :attr:`packets_out` took."""
        return self._counts.writes

    @property
    def _where(self) -> str:
        """The broker to name in an error: this connection's, or the whole list."""
        return str(self.url) if len(self.urls) == 1 else ",".join(map(str, self.urls))

    @property
    def is_v5(self) -> bool:
        """True where the broker accepted MQTT 5."""
        return self.protocol_version == "5"

    def _current(self) -> Link:
        """The current connection.

        Raises:
            BrokerError: there is none, or it is gone.
        """
        link = self._link
        if link is None:
            raise BrokerError(str(self.url), "not connected")
        if link.closed:
            raise link.error or BrokerError(str(self.url), "not connected")
        return link

    # ------------------------------------------------------------ connection

    async def __aenter__(self) -> Self:
        self._leaving = False
        failures: list[str] = []
        for attempt in self._attempts.first_pass():
            try:
                await self._connect(attempt.url, attempt.timeout)
            except BrokerError as err:
                if len(self.urls) == 1:
                    raise
                failures.append(f"{attempt.url}: {err.reason}")
                _log.warning("broker.connect_failed", broker=str(attempt.url), reason=err.reason)
                continue
            self._attempts.connected(attempt.index)
            return self
        # Worded as MqttClient words it: each node named once, with its reason.
        raise BrokerError(f"list of {len(self.urls)}", f"no node answered ({'; '.join(failures)})")

    def _new_link(self, codec: Codec) -> Link:
        return Link(
            self.url,
            codec,
            self._inbox,
            self._subscriptions.inbound_qos2,
            self._counts,
            max_inflight=self.max_inflight,
            keepalive=self.keepalive,
            timeout=self._timeout,
        )

    async def _connect(self, url: BrokerURL, wait: float) -> None:
        """One connection to ``url``, waiting at most ``wait`` seconds for it
        (:attr:`matchcast.transport.failover.Attempt.timeout`).

        Raises:
            BrokerError: naming the cause and what to do about it.
        """
        self._drop()
        self.url = url
        hello = Hello(
            self.client_id, self.clean_start, self.keepalive, self.will, self.session_expiry
        )
        link, ack = await open_link(
            url,
            self.protocol,
            hello,
            self._new_link,
            nodes=self.urls,
            tls=self._tls,
            wait=wait,
            probe_timeout=self._probe_timeout,
        )
        self._link = link
        self._subscriptions.new_connection()
        self.protocol_version = link.codec.version
        self.session.present = ack.session_present
        _log.debug(
            "broker.connected",
            broker=str(url),
            protocol=self.protocol_version,
            client_id=self.client_id,
            session_present=ack.session_present,
        )

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._leaving = True
        self._subscriptions.cancel()
        if self._link is not None:
            await self._link.close(BrokerError(str(self.url), "client closed"))
        self._inbox.wake()

    def _drop(self) -> None:
        """Forget the current connection at once (one being replaced)."""
        if self._link is not None:
            self._link.abort()

    # ------------------------------------------------------------ reconnecting

    async def wait_lost(self) -> None:
        """Raise :class:`events.ConnectionLostError` when the current connection is lost; a
        connection closed by us is never "lost" (this then waits forever)."""
        link = self._link
        if link is None:
            raise BrokerError(str(self.url), "not connected")
        await asyncio.shield(link.lost)
        if link.error is not None and self._link is link:
            raise link.error
        if not self._leaving:
            raise ConnectionLostError(str(self.url), "connection lost")
        await asyncio.Event().wait()

    async def wait_closed(self) -> None:
        """Wait until the connection ends.

        Raises:
            ConnectionLostError: the connection was lost (not closed by us).
        """
        link = self._link
        assert link is not None, "not connected"
        await asyncio.shield(link.lost)
        if link.error is not None:
            raise link.error
        if self._link is not link and not self._leaving:
            raise ConnectionLostError(str(self.url), "connection replaced")

    @property
    def client_id(self) -> str:
        """The client id of the current (or next) connection."""
        return self.session.client_id

    @property
    def clean_start(self) -> bool:
        """Whether connections start clean (no session resumed)."""
        return self.session.clean_start

    @property
    def session_present(self) -> bool:
        """Whether the broker resumed a session of ours on the current connection."""
        return self.session.present

    @property
    def persistent(self) -> bool:
        """See :attr:`matchcast.transport.failover.Session.persistent`."""
        return self.session.persistent

    @property
    def session_resumed(self) -> bool:
        """See :attr:`matchcast.transport.failover.Session.resumed`."""
        return self.session.resumed

    def start_clean(self) -> None:
        """See :meth:`matchcast.transport.failover.Session.start_clean`."""
        self.session.start_clean()

    async def reconnect(self, *, same_node_first: bool = False) -> None:
        """Replace a lost connection: the brokers in :class:`matchcast.transport.failover.Attempts`'
        order, with backoff and jitter; subscriptions restored where the broker kept no
        session; then ``on_reconnect``. ``same_node_first`` asks the current node first: the
        connection was given up, not lost (a session the node would not serve, see
        :meth:`start_clean`).

        Raises:
            SubscribeDroppedError: the new node closed the connection in answer to a
                subscription restored.
            BrokerError: no broker for ``max_outage`` seconds.
        """
        generation = self._generation
        async with self._reconnect_lock:
            if self._generation != generation:
                return  # another task replaced the connection while this one waited
            self._drop()

            lost = self._attempts.current

            async def connect(attempt: Attempt) -> None:
                self.session.before(attempt, lost)
                await self._connect(attempt.url, attempt.timeout)

            def give_up_reason(err: BrokerError) -> str:
                return err.reason if len(self.urls) == 1 else str(err)

            await fail_over(
                self._attempts,
                connect,
                where=self._where,
                max_outage=self.max_outage,
                give_up_reason=give_up_reason,
                details=lambda: {"session_present": self.session_present},
                current_first=same_node_first,
            )
            self.reconnects += 1
            self._generation += 1
            kept = self.session_present and not self.clean_start
            await self._subscriptions.restore(self._current(), kept=kept)
            if self.on_reconnect is not None:
                await self.on_reconnect(self)

    # ------------------------------------------------------------ publishing

    def publish_nowait(
        self, topic: str, payload: bytes, qos: int, retain: bool
    ) -> asyncio.Future[None] | None:
        """Queue a publish without a task.

        Returns:
            None for QoS 0 when the connection can take more; else a future done when the
            write buffer drained (QoS 0) or the broker acknowledged (QoS 1) or completed (QoS 2).

        Raises:
            BrokerError: the connection is gone.
        """
        link = self._link
        if link is None:
            raise BrokerError(str(self.url), "not connected")
        return link.publish(topic, payload, qos, retain, None)

    async def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        props: MessageProps | None = None,
    ) -> None:
        """Publish and wait for the broker per QoS.

        Raises:
            PublishRefusedError: the broker refused it (MQTT 5 only: over 3.1.1 a broker
                drops a refused publish without telling).
            BrokerError: the connection is gone.
        """
        link = self._link
        if link is None:
            raise BrokerError(str(self.url), "not connected")
        fut = link.publish(topic, payload, qos, retain, props)
        if fut is not None:
            await fut
            self._attempts.progressed()  # acknowledged: a loss after this is no storm

    # ------------------------------------------------------------ subscribing

    async def subscribe(self, topic_filter: str, *, qos: int = 1) -> None:
        """Subscribe and wait for the SUBACK; remembered, and restored after a reconnect.

        A filter this connection already has (restored by :meth:`reconnect`) is not sent again,
        so the broker does not send its retained messages twice.

        Raises:
            SubscribeRefusedError: the broker refused it.
            SubscribeDroppedError: the broker closed the connection in answer to it.
            BrokerError: the connection is gone, or no SUBACK came in time.
        """
        await self._subscriptions.subscribe(self._current(), topic_filter, qos)

    # ------------------------------------------------------------ receiving

    async def messages(self) -> AsyncIterator[Message]:
        """Messages as they arrive; ends when the connection is closed by us.

        Raises:
            BrokerError: the connection was lost.
        """
        inbox = self._inbox
        queue = inbox.queue
        while True:
            if queue:
                self._attempts.progressed()  # a loss after this is no storm
            # A chunk from the socket can hold thousands of messages. Hand the loop back every
            # so often, or the acks of this process's publishers wait behind them (a QoS 1
            # load run's sender stalled at a fifth of its rate).
            for _ in range(_YIELD_EVERY):
                if not queue:
                    break
                yield queue.popleft()
            else:
                await asyncio.sleep(0)
                continue
            link = self._link
            if link is None or link.closed:
                if link is not None and link.error is not None:
                    raise link.error
                return
            await inbox.wait()

    def set_batch_handler(self, handler: BatchHandler | None) -> None:
        """Hand received messages to ``handler`` in batches instead of to :meth:`messages`.

        ``handler`` is called from the socket's read callback with every message one read
        brought (hundreds under load; messages already queued go first): no queue and no
        task switch per message (see :class:`events.BatchSource`). It must not block. An
        exception from it is logged as ``broker.batch_handler_failed`` and the connection
        carries on. None goes back to :meth:`messages`.
        """
        self._inbox.set_handler(handler, str(self.url))
