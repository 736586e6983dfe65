"""A lean asyncio MQTT client (5 and 3.1.1) for the hot paths: load generation and ``consume``.

aiomqtt (on paho) spends about 0.2 ms of CPU per message, which caps a Python load generator
or plug-in host far below what mosquitto routes. This client is a plain
:class:`asyncio.Protocol`: MQTT 5 packets are encoded and decoded by the Rust ``mqtt5`` codec,
MQTT 3.1.1 ones by :mod:`matchcast.transport.mqtt311`; outgoing packets are gathered and
written once per event-loop iteration (one ``send`` for many packets), and incoming ones are
decoded in bulk as each chunk of bytes arrives. It implements the same :class:`events.Publisher`,
:class:`events.MessageSource` and :class:`events.Reconnectable` protocols as
:class:`matchcast.transport.mqtt.MqttClient`, plus ``publish_nowait`` so a load generator can
keep many publishes in flight without a task each, and :class:`events.BatchSource`
(``set_batch_handler``), so a consumer can take each read's messages in one call instead of
one at a time from :meth:`FastClient.messages`.

Scope:

- MQTT 5 and 3.1.1: ``protocol="auto"`` tries 5 and falls back to 3.1.1 when the broker
  refuses it (NATS: return code 1), closes the connection before its CONNACK, or sends none
  within ``probe_timeout`` (RabbitMQ 3.10 never answers a v5 CONNECT); the answer is
  remembered per broker address.
- A list of brokers, tried as :class:`matchcast.transport.failover.Attempts` says; :meth:`reconnect`
  replaces a lost connection (backoff with jitter, giving up after ``max_outage`` with one
  :class:`events.BrokerError`) and restores the subscriptions where the broker kept no
  session for us.
- Persistent sessions (``clean_start=False``, a fixed ``client_id``, ``session_expiry`` on
  v5), the last will, QoS 0, 1 and 2 both ways with the broker's receive maximum respected
  (``max_inflight`` on 3.1.1, which has none), keepalive pings that also notice a silent
  broker, TLS and client certificates, username/password, a clean DISCONNECT.
- Not: publishes in flight when a connection is lost are failed with
  :class:`events.ConnectionLostError`, not resent on the next connection (the replayer, which
  needs that, resumes by itself at the first unacknowledged event); no MQTT 5 properties on a
  3.1.1 connection (the standard has none), no topic aliases, no enhanced authentication.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ssl
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from types import TracebackType
from typing import Literal, NamedTuple, Self

import mqtt5
import structlog

from events import (
    BrokerError,
    ConnectionLostError,
    Message,
    MessageProps,
    SubscribeDroppedError,
    SubscribeRefusedError,
)
from matchcast.transport import mqtt311
from matchcast.transport.connection import (
    SUBSCRIBE_DROP_WINDOW_S,
    BrokerURL,
    Protocol,
    WillSpec,
    cannot_connect,
    connect_hint,
)
from matchcast.transport.failover import (
    FAILOVER_CONNECT_TIMEOUT,
    Attempt,
    Attempts,
    Session,
    fail_over,
)

__all__ = ["FastClient"]

_log = structlog.get_logger("matchcast.fastmqtt")

_QOS = (mqtt5.QoS.AT_MOST_ONCE, mqtt5.QoS.AT_LEAST_ONCE, mqtt5.QoS.EXACTLY_ONCE)
#: Messages :meth:`FastClient.messages` yields before it lets the event loop run other work.
_YIELD_EVERY = 256
#: A subscription restored at QoS 0 asks for its own QoS again after this, doubling to the max.
UPGRADE_RETRY_S = 0.5
UPGRADE_RETRY_MAX_S = 5.0
#: Write at once when this many packets are gathered, rather than at the end of the iteration.
_FLUSH_PACKETS = 2048
#: Keepalive periods without a byte from the broker after which the connection counts as lost.
_SILENT_PERIODS = 1.5
#: (host, port) -> the protocol the broker accepted, learnt by the first connection in auto.
_PROTOCOL_OF: dict[tuple[str, int], Literal["5", "3.1.1"]] = {}
#: CONNACK reason of a v5 broker that does not speak 5 (a 3.1.1 one says return code 1).
_V5_UNSUPPORTED = 0x84
_AUTH_CODES = frozenset((4, 5, 0x86, 0x87))
_LISTENER_HINT = " (is this port an MQTT listener, plain for mqtt:// and TLS for mqtts://?)"
_V5_HINT = (
    " (a broker that speaks only 3.1.1, such as RabbitMQ 3.10, never answers an MQTT 5 "
    "CONNECT: use --protocol auto or 3.1.1)"
)


#: A publish waiting to be written: topic, payload, QoS, retain, properties.
_Outgoing = tuple[str, bytes, int, bool, MessageProps | None]
#: Takes every message that arrived in one read from the socket.
BatchHandler = Callable[[list[Message]], None]
#: Makes a Message without the named tuple's keyword-handling ``__new__`` (a third the cost).
_new = tuple.__new__


def _encode(msg: _Outgoing, packet_id: int | None) -> bytes:
    topic, payload, qos, retain, props = msg
    if props is None:
        return mqtt5.PublishPacket(
            topic, payload, qos=_QOS[qos], retain=retain, packet_id=packet_id
        ).write()
    return mqtt5.PublishPacket(
        topic,
        payload,
        qos=_QOS[qos],
        retain=retain,
        packet_id=packet_id,
        content_type=props.content_type,
        message_expiry_interval=props.message_expiry,
        user_properties=list(props.user) or None,
    ).write()


def _encode_311(msg: _Outgoing, packet_id: int | None) -> bytes:
    topic, payload, qos, retain, _ = msg
    return mqtt311.encode_publish(topic, payload, qos, retain, packet_id)


class _ConnAck(NamedTuple):
    """What a CONNACK said, in either protocol."""

    v311: bool  # a 3.1.1-shaped answer (also what a 3.1.1 broker sends to a v5 CONNECT)
    session_present: bool
    code: int
    receive_max: int


class _NoConnAckError(Exception):
    """The broker closed the connection or said nothing before its CONNACK."""


class _RefusedError(Exception):
    """A CONNACK that refused us."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


class _Protocol(asyncio.Protocol):
    def __init__(self, client: FastClient) -> None:
        self.client = client

    def data_received(self, data: bytes) -> None:
        if self.client._proto is self:
            self.client._on_data(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.client._proto is self:
            self.client._on_lost(exc, by_broker=True)

    def pause_writing(self) -> None:
        if self.client._proto is self:
            self.client._paused = True

    def resume_writing(self) -> None:
        if self.client._proto is self:
            self.client._resume()


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
        #: Topic filter -> QoS of every subscription, restored after a reconnect.
        self._subscriptions: dict[str, int] = {}
        self._inbound_qos2: set[int] = set()
        self._upgrades: set[asyncio.Task[None]] = set()
        self._inbox: collections.deque[Message] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._batch_handler: BatchHandler | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._leaving = False
        #: Packets written, and how many writes (flushes) it took.
        self.packets_out = 0
        self.writes = 0
        self._reset()

    def _reset(self) -> None:
        """The state of one connection, fresh."""
        self._proto: _Protocol | None = None
        self._transport: asyncio.Transport | None = None
        self._v5 = True
        self._handshake = False
        self._buf = b""
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self._paused = False
        self._drain: asyncio.Future[None] | None = None
        self._connack: asyncio.Future[_ConnAck] | None = None
        self._next_id = 0
        self._acks: dict[int, asyncio.Future[None]] = {}
        self._subacks: dict[int, asyncio.Future[list[int]]] = {}
        #: Packet id -> the filter of a SUBSCRIBE awaiting its SUBACK, and when it was sent.
        self._subscribing: dict[int, tuple[str, float]] = {}
        self._active: dict[str, int] = {}
        #: Filters restored at QoS 0 while their own QoS is asked for again (:meth:`_restore`).
        self._wanted: dict[str, int] = {}
        self._quota = 0
        self._queued: collections.deque[tuple[_Outgoing, asyncio.Future[None]]] = (
            collections.deque()
        )
        self._closed = False
        self._error: BrokerError | None = None
        self._ping: asyncio.TimerHandle | None = None
        self._heard = True
        self._silent = 0.0
        self._lost: asyncio.Future[None] | None = None

    @property
    def _where(self) -> str:
        """The broker to name in an error: this connection's, or the whole list."""
        return str(self.url) if len(self.urls) == 1 else ",".join(map(str, self.urls))

    @property
    def is_v5(self) -> bool:
        """True where the broker accepted MQTT 5."""
        return self.protocol_version == "5"

    # ------------------------------------------------------------ connection

    async def __aenter__(self) -> Self:
        self._loop = asyncio.get_running_loop()
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

    async def _connect(self, url: BrokerURL, wait: float) -> None:
        """One connection to ``url``, in the protocol(s) ``protocol`` allows, waiting at most
        ``wait`` seconds for it (:attr:`matchcast.transport.failover.Attempt.timeout`).

        Raises:
            BrokerError: naming the cause and what to do about it.
        """
        self.url = url
        key = (url.host, url.port)
        version = _PROTOCOL_OF.get(key) if self.protocol == "auto" else self.protocol
        if version is not None:
            try:
                await self._connect_as(url, version, wait, wait)
            except _NoConnAckError as err:
                hint = _LISTENER_HINT if version == "3.1.1" or self.protocol == "auto" else _V5_HINT
                raise BrokerError(str(url), f"{err}{hint}") from None
            except _RefusedError as err:
                raise BrokerError(str(url), f"connection refused: {err.reason}") from None
            return
        try:
            await self._connect_as(url, "5", min(self._probe_timeout, wait), wait)
        except _NoConnAckError as err:
            v5_answer = str(err)
        except _RefusedError as err:
            if err.code not in (1, _V5_UNSUPPORTED):
                raise BrokerError(str(url), f"connection refused: {err.reason}") from None
            v5_answer = f"refused it ({err.reason})"
        else:
            _PROTOCOL_OF[key] = "5"
            return
        _log.info("broker.v5_refused", broker=str(url), answer=v5_answer, fallback="3.1.1")
        try:
            await self._connect_as(url, "3.1.1", wait, wait)
        except _NoConnAckError as err:
            raise BrokerError(
                str(url),
                f"no MQTT answer: to MQTT 5 it {v5_answer}, to 3.1.1 it {err}{_LISTENER_HINT}",
            ) from None
        except _RefusedError as err:
            raise BrokerError(str(url), f"connection refused: {err.reason}") from None
        # One cluster runs one engine: the other nodes of the list speak 3.1.1 only too, so a
        # failover costs no wait for an MQTT 5 answer that will not come.
        for other in self.urls:
            _PROTOCOL_OF.setdefault((other.host, other.port), "3.1.1")
        _PROTOCOL_OF[key] = "3.1.1"

    async def _connect_as(
        self,
        url: BrokerURL,
        version: Literal["5", "3.1.1"],
        connack_timeout: float,
        wait: float,
    ) -> None:
        """Connect within ``wait`` seconds, then wait ``connack_timeout`` for the CONNACK.

        Raises:
            _NoConnAckError: closed or silent before the CONNACK.
            _RefusedError: a CONNACK that refused us.
            BrokerError: no connection at all (the message says why).
        """
        loop = self._loop
        assert loop is not None
        self._drop()
        self._reset()
        self._v5 = version == "5"
        tls = self._tls
        if url.tls and tls is None:
            try:
                tls = url.context() or ssl.create_default_context()
            except ValueError as err:
                raise BrokerError(str(url), str(err)) from err
        proto = _Protocol(self)
        self._proto = proto
        try:
            async with asyncio.timeout(wait):
                transport, _ = await loop.create_connection(
                    lambda: proto, url.host, url.port, ssl=tls
                )
        except (OSError, TimeoutError) as err:
            self._drop()
            raise cannot_connect(url, err, connect_hint(err, tls=url.tls)) from err
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        transport.set_write_buffer_limits(high=4 * 1024 * 1024)
        self._lost = loop.create_future()
        self._connack = loop.create_future()
        self._handshake = True
        self._write(self._connect_packet())
        try:
            async with asyncio.timeout(connack_timeout):
                ack = await self._connack
        except TimeoutError:
            self._drop()
            raise _NoConnAckError(f"sent no CONNACK within {connack_timeout:g}s") from None
        except _NoConnAckError:
            self._drop()
            raise
        self._accept(url, version, ack)

    def _accept(self, url: BrokerURL, version: Literal["5", "3.1.1"], ack: _ConnAck) -> None:
        """Take the CONNACK, or raise what it refused."""
        loop = self._loop
        assert loop is not None
        if ack.code:
            self._drop()
            raise self._refusal(ack)
        if self._error is not None:  # lost in the CONNACK's own read (a malformed packet)
            raise self._error
        self.protocol_version = version
        self.session.present = ack.session_present
        self._quota = ack.receive_max if self._v5 else self.max_inflight
        if self.keepalive:
            self._ping = loop.call_later(self.keepalive / 2, self._tick)
        _log.debug(
            "broker.connected",
            broker=str(url),
            protocol=version,
            client_id=self.client_id,
            session_present=ack.session_present,
        )

    def _refusal(self, ack: _ConnAck) -> _RefusedError:
        if ack.v311:
            text = mqtt311.CONNACK_REASONS.get(ack.code, f"code {ack.code}")
        else:
            text = mqtt5.ConnAckReasonCode(ack.code).name.lower().replace("_", " ")
        if ack.code in (1, _V5_UNSUPPORTED):
            hint = (
                " (the broker does not speak this MQTT version: use --protocol auto)"
                if self.protocol != "auto"
                else ""
            )
        elif ack.code in _AUTH_CODES:
            hint = (
                " (check the user name and password: in the URL, or $MATCHCAST_USERNAME and "
                "$MATCHCAST_PASSWORD)"
            )
        elif ack.code in (2, 0x85):
            hint = " (the broker does not accept this client id: try another --client-id)"
        else:
            hint = ""
        return _RefusedError(ack.code, f"{text}{hint}")

    def _connect_packet(self) -> bytes:
        url, will = self.url, self.will
        if self._v5:
            password = url.password.encode() if url.password else None
            return mqtt5.ConnectPacket(
                self.client_id,
                username=url.username,
                password=password,
                clean_start=self.clean_start,
                keep_alive=self.keepalive,
                session_expiry_interval=self.session_expiry or 0,
                will=None
                if will is None
                else mqtt5.Will(
                    will.topic, payload=will.payload, qos=_QOS[will.qos], retain=will.retain
                ),
            ).write()
        return mqtt311.Connect(
            self.client_id,
            clean_session=self.clean_start,
            keepalive=self.keepalive,
            will=None
            if will is None
            else mqtt311.Will(will.topic, will.payload, will.qos, will.retain),
            username=url.username,
            password=url.password.encode() if url.password is not None else None,
        ).encode()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._leaving = True
        for task in list(self._upgrades):
            task.cancel()
        transport = self._transport
        self._closed = True
        if transport is not None and not transport.is_closing():
            self._write(
                mqtt5.DisconnectPacket().write() if self._v5 else mqtt311.Disconnect().encode()
            )
            self._flush()
            # close() writes out what is buffered first; wait for it, or a process that exits
            # right after would lose the tail of what it published at QoS 0.
            transport.close()
            if self._lost is not None:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._timeout):
                        await asyncio.shield(self._lost)
        self._fail_pending(BrokerError(str(self.url), "client closed"))
        self._wake()
        if self._ping is not None:
            self._ping.cancel()

    def _drop(self) -> None:
        """Forget the current connection at once (a failed attempt, or one being replaced)."""
        transport, proto = self._transport, self._proto
        self._proto = None
        self._closed = True
        if self._ping is not None:
            self._ping.cancel()
        if transport is not None:
            transport.abort()
        if proto is not None:
            err = self._error or ConnectionLostError(str(self.url), "connection replaced")
            if self._lost is not None and not self._lost.done():
                self._lost.set_result(None)
            self._fail_pending(err)
            self._wake()

    def _tick(self) -> None:
        """Every half keepalive: ping, and give up on a broker silent for 1.5 keepalives."""
        if self._closed:
            return
        if self._heard:
            self._heard, self._silent = False, 0.0
        else:
            self._silent += 0.5
            if self._silent >= _SILENT_PERIODS:
                waited = self._silent * self.keepalive
                self._on_lost(TimeoutError(f"no answer from the broker for {waited:g}s"))
                if self._transport is not None:
                    self._transport.abort()
                return
        self._write(mqtt5.PingReqPacket().write() if self._v5 else mqtt311.PingReq().encode())
        assert self._loop is not None
        self._ping = self._loop.call_later(self.keepalive / 2, self._tick)

    def _on_lost(self, exc: Exception | None, *, by_broker: bool = False) -> None:
        """The connection ended; ``by_broker``: the broker closed it (EOF, a reset, a v5
        DISCONNECT), not our keepalive or a malformed packet."""
        if self._lost is not None and not self._lost.done():
            self._lost.set_result(None)
        if self._handshake:  # no connection yet: the attempt reports it
            self._closed = True
            self._proto = None
            if self._connack is not None and not self._connack.done():
                self._connack.set_exception(
                    _NoConnAckError(f"closed the connection before its CONNACK ({exc or 'EOF'})")
                )
            return
        unexpected = not self._closed
        if unexpected:
            self._error = ConnectionLostError(
                str(self.url), f"connection lost: {exc or 'closed by broker'}"
            )
        self._closed = True
        self._proto = None
        if self._ping is not None:
            self._ping.cancel()
        if unexpected and by_broker:
            self._fail_dropped_subscribes()
        self._fail_pending(self._error or BrokerError(str(self.url), "connection closed"))
        self._resume()
        self._wake()
        if unexpected:  # last: state first, so a failing log handler cannot leave readers hanging
            _log.warning(
                "broker.connection_lost",
                broker=str(self.url),
                error=str(exc) if exc else "closed by the broker",
            )

    def _fail_dropped_subscribes(self) -> None:
        """Fail each SUBSCRIBE sent just before the broker closed the connection with
        :class:`events.SubscribeDroppedError`: the close was its answer."""
        assert self._loop is not None
        now = self._loop.time()
        for pid, (topic_filter, sent) in self._subscribing.items():
            sub = self._subacks.get(pid)
            if sub is not None and not sub.done() and now - sent <= SUBSCRIBE_DROP_WINDOW_S:
                sub.set_exception(SubscribeDroppedError(str(self.url), topic_filter))

    def _fail_pending(self, err: BrokerError) -> None:
        for fut in [*self._acks.values(), *(f for _, f in self._queued)]:
            if not fut.done():
                fut.set_exception(err)
                fut.exception()  # a load generator may never look; don't warn about it
        for sub in self._subacks.values():
            if not sub.done():
                sub.set_exception(err)
        self._acks.clear()
        self._queued.clear()
        self._subacks.clear()

    # ------------------------------------------------------------ reconnecting

    async def wait_lost(self) -> None:
        """Raise :class:`events.ConnectionLostError` when the current connection is lost; a
        connection closed by us is never "lost" (this then waits forever)."""
        lost = self._lost
        if lost is None:
            raise BrokerError(str(self.url), "not connected")
        await asyncio.shield(lost)
        if self._error is not None and self._lost is lost:
            raise self._error
        if not self._leaving:
            raise ConnectionLostError(str(self.url), "connection lost")
        await asyncio.Event().wait()

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
            await self._restore()
            if self.on_reconnect is not None:
                await self.on_reconnect(self)

    async def _restore(self) -> None:
        """Subscribe again to what the broker forgot (everything, unless it kept a session).

        A QoS 1 or 2 subscription the new node refuses is taken at QoS 0 at once and asked for
        again at its own QoS beside the traffic (:meth:`_upgrade`): NATS refuses a QoS 1
        SUBSCRIBE after 4 s while JetStream has no leader (4-9 s after the node that led it
        died), yet delivers at QoS 0 at once. A clean session has no queue to lose meanwhile;
        what QoS 1 adds on one connection (the broker's redelivery) is back once granted.
        """
        if self.session_present and not self.clean_start:
            self._active = dict(self._subscriptions)
            return
        self._inbound_qos2.clear()
        for topic_filter, qos in list(self._subscriptions.items()):
            try:
                await self.subscribe(topic_filter, qos=qos)
            except SubscribeRefusedError as err:
                if qos == 0:
                    raise
                _log.warning(
                    "broker.subscription_degraded",
                    broker=str(self.url),
                    topic_filter=topic_filter,
                    qos=qos,
                    reason=err.reason,
                )
                await self.subscribe(topic_filter, qos=0)
                self._subscriptions[topic_filter] = qos  # what to restore next time
                self._wanted[topic_filter] = qos
                task = asyncio.create_task(self._upgrade(topic_filter, qos, self._generation))
                self._upgrades.add(task)
                task.add_done_callback(self._upgrades.discard)

    async def _upgrade(self, topic_filter: str, qos: int, generation: int) -> None:
        """Ask for ``topic_filter`` at ``qos`` again, with backoff, until granted or the
        connection is replaced (its reconnect restores the subscription afresh)."""
        wait = UPGRADE_RETRY_S
        tries = 1
        while self._generation == generation and not self._closed:
            await asyncio.sleep(wait)
            wait = min(wait * 2, UPGRADE_RETRY_MAX_S)
            tries += 1
            try:
                await self._send_subscribe(topic_filter, qos)
            except SubscribeRefusedError:
                continue
            except BrokerError:
                return  # the connection is gone: the next reconnect restores it
            if self._generation == generation:
                self._wanted.pop(topic_filter, None)
                self._active[topic_filter] = qos
                _log.info(
                    "broker.subscription_restored",
                    broker=str(self.url),
                    topic_filter=topic_filter,
                    qos=qos,
                    tries=tries,
                )
            return

    # ------------------------------------------------------------ writing

    def _write(self, packet: bytes) -> None:
        self._out.append(packet)
        if len(self._out) >= _FLUSH_PACKETS:
            self._flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            assert self._loop is not None
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        out = self._out
        if not out:
            return
        self._out = []
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        self.packets_out += len(out)
        self.writes += 1
        transport.write(b"".join(out))

    def _resume(self) -> None:
        self._paused = False
        drain, self._drain = self._drain, None
        if drain is not None and not drain.done():
            drain.set_result(None)

    def _packet_id(self) -> int:
        for _ in range(65535):
            self._next_id = self._next_id % 65535 + 1
            if self._next_id not in self._acks:
                return self._next_id
        raise BrokerError(str(self.url), "65535 publishes in flight: no packet id free")

    # ------------------------------------------------------------ publishing

    def publish_nowait(
        self, topic: str, payload: bytes, qos: int, retain: bool
    ) -> asyncio.Future[None] | None:
        """Queue a publish without a task.

        Returns:
            None for QoS 0 when the connection can take more; else a future done when the
            write buffer drained (QoS 0) or the broker acknowledged (QoS 1) or completed (QoS 2).
        """
        return self._publish((topic, payload, qos, retain, None))

    def _publish(self, msg: _Outgoing) -> asyncio.Future[None] | None:
        if self._closed:
            raise self._error or BrokerError(str(self.url), "not connected")
        loop = self._loop
        assert loop is not None
        if msg[2] == 0:
            self._write(_encode(msg, None) if self._v5 else _encode_311(msg, None))
            if self._paused:
                if self._drain is None:
                    self._drain = loop.create_future()
                return self._drain
            return None
        fut: asyncio.Future[None] = loop.create_future()
        if self._quota > 0:
            self._send_acked(msg, fut)
        else:
            self._queued.append((msg, fut))
        return fut

    def _send_acked(self, msg: _Outgoing, fut: asyncio.Future[None]) -> None:
        self._quota -= 1
        pid = self._packet_id()
        self._acks[pid] = fut
        self._write(_encode(msg, pid) if self._v5 else _encode_311(msg, pid))

    def _release(self) -> None:
        self._quota += 1
        while self._quota > 0 and self._queued:
            msg, fut = self._queued.popleft()
            self._send_acked(msg, fut)

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
            BrokerError: the connection is gone or the broker refused the message.
        """
        fut = self._publish((topic, payload, qos, retain, props))
        if fut is not None:
            await fut

    # ------------------------------------------------------------ subscribing

    async def subscribe(self, topic_filter: str, *, qos: int = 1) -> None:
        """Subscribe and wait for the SUBACK; remembered, and restored after a reconnect.

        A filter this connection already has (restored by :meth:`reconnect`) is not sent again,
        so the broker does not send its retained messages twice.

        Raises:
            BrokerError: the broker refused it or the connection is gone.
        """
        if self._closed:
            raise self._error or BrokerError(str(self.url), "not connected")
        self._subscriptions[topic_filter] = qos
        if self._active.get(topic_filter) == qos or self._wanted.get(topic_filter) == qos:
            return  # restored, or restored at QoS 0 while this QoS is asked for again
        self._wanted.pop(topic_filter, None)
        try:
            await self._send_subscribe(topic_filter, qos)
        except SubscribeRefusedError:
            self._subscriptions.pop(topic_filter, None)
            raise
        self._active[topic_filter] = qos

    async def _send_subscribe(self, topic_filter: str, qos: int) -> None:
        """One SUBSCRIBE and its SUBACK, waited for as long as a CONNACK (``connect_timeout``).

        Raises:
            SubscribeRefusedError: the broker refused it.
            SubscribeDroppedError: the broker closed the connection in answer to it.
            BrokerError: the connection is gone, or no SUBACK came in time (RabbitMQ 3.10 can
                hold one under a client id whose queue is on a node that is down).
        """
        if self._closed:
            raise self._error or BrokerError(str(self.url), "not connected")
        assert self._loop is not None
        pid = self._packet_id()
        fut: asyncio.Future[list[int]] = self._loop.create_future()
        self._subacks[pid] = fut
        self._subscribing[pid] = (topic_filter, self._loop.time())
        self._acks[pid] = self._loop.create_future()  # reserve the id
        if self._v5:
            flt = mqtt5.TopicFilter(topic_filter, max_qos=_QOS[qos])
            self._write(mqtt5.SubscribePacket(pid, [flt]).write())
        else:
            self._write(mqtt311.Subscribe(pid, ((topic_filter, qos),)).encode())
        try:
            async with asyncio.timeout(self._timeout):
                codes = await fut
        except TimeoutError:
            raise BrokerError(
                str(self.url),
                f"no SUBACK to a subscribe to {topic_filter!r} within {self._timeout:g}s",
            ) from None
        finally:
            self._subacks.pop(pid, None)
            self._acks.pop(pid, None)
            self._subscribing.pop(pid, None)
        if any(c >= 0x80 for c in codes):
            raise SubscribeRefusedError(str(self.url), topic_filter, codes)

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def messages(self) -> AsyncIterator[Message]:
        """Messages as they arrive; ends when the connection is closed by us.

        Raises:
            BrokerError: the connection was lost.
        """
        inbox = self._inbox
        while True:
            # A chunk from the socket can hold thousands of messages. Hand the loop back every
            # so often, or the acks of this process's publishers wait behind them (a QoS 1
            # load run's sender stalled at a fifth of its rate).
            for _ in range(_YIELD_EVERY):
                if not inbox:
                    break
                yield inbox.popleft()
            else:
                await asyncio.sleep(0)
                continue
            if self._closed:
                if self._error is not None:
                    raise self._error
                return
            assert self._loop is not None
            self._waiter = self._loop.create_future()
            await self._waiter

    def set_batch_handler(self, handler: BatchHandler | None) -> None:
        """Hand received messages to ``handler`` in batches instead of to :meth:`messages`.

        ``handler`` is called from the socket's read callback with every message one read
        brought (hundreds under load; messages already queued go first): no queue and no
        task switch per message (see :class:`events.BatchSource`). It must not block. An
        exception from it is logged as ``broker.batch_handler_failed`` and the connection
        carries on. None goes back to :meth:`messages`.
        """
        self._batch_handler = handler
        if handler is not None and self._inbox:
            queued = list(self._inbox)
            self._inbox.clear()
            self._hand_over(handler, queued)

    def _hand_over(self, handler: BatchHandler, batch: list[Message]) -> None:
        try:
            handler(batch)
        except Exception as err:  # a handler bug must not drop the connection
            _log.error(
                "broker.batch_handler_failed",
                broker=str(self.url),
                messages=len(batch),
                error=str(err),
                exc_info=err,
            )

    async def wait_closed(self) -> None:
        """Wait until the connection ends.

        Raises:
            ConnectionLostError: the connection was lost (not closed by us).
        """
        lost = self._lost
        assert lost is not None, "not connected"
        await asyncio.shield(lost)
        if self._error is not None:
            raise self._error
        if self._lost is not lost and not self._leaving:
            raise ConnectionLostError(str(self.url), "connection replaced")

    # ------------------------------------------------------------ reading

    def _on_data(self, data: bytes) -> None:
        self._heard = True
        if self._handshake:
            self._on_handshake(data)
        elif self._v5:
            self._read_v5(data)
        else:
            self._read_311(data)

    def _on_handshake(self, data: bytes) -> None:
        """The CONNACK, in whichever protocol the broker answered; what follows it is read on."""
        buf = self._buf + data
        try:
            found = mqtt311.frame(buf)
            if found is None:
                self._buf = buf
                return
            first, start, end = found
            if first != 0x20:
                raise mqtt311.MalformedPacketError(f"packet {first:#x} before the CONNACK")
            if end - start == 2:  # the 3.1.1 shape: flags and return code
                packet = mqtt311.decode(first, buf, start, end)
                assert isinstance(packet, mqtt311.ConnAck)
                ack = _ConnAck(True, packet.session_present, packet.code, 0)
            elif self._v5:
                connack, _ = mqtt5.read(memoryview(buf)[:end])
                if not isinstance(connack, mqtt5.ConnAckPacket):
                    raise mqtt311.MalformedPacketError("not a CONNACK")
                ack = _ConnAck(
                    False,
                    connack.session_present,
                    int(connack.reason_code),
                    connack.receive_max or 65535,
                )
            else:
                raise mqtt311.MalformedPacketError(f"CONNACK of {end - start} bytes (must be 2)")
        except (ValueError, IndexError) as err:
            _log.error("broker.malformed_packet", broker=str(self.url), error=str(err))
            if self._connack is not None and not self._connack.done():
                self._connack.set_exception(
                    BrokerError(str(self.url), f"malformed CONNACK from the broker: {err}")
                )
            self._closed = True
            if self._transport is not None:
                self._transport.abort()
            return
        self._handshake = False
        self._buf = b""
        if self._connack is not None and not self._connack.done():
            self._connack.set_result(ack)
        if end < len(buf) and not ack.code:
            self._on_data(buf[end:])  # session messages can come in the CONNACK's read

    def _malformed(
        self, err: Exception, handler: BatchHandler | None, batch: list[Message]
    ) -> None:
        if batch and handler is not None:  # what came before the bad packet still counts
            self._hand_over(handler, batch)
        _log.error("broker.malformed_packet", broker=str(self.url), error=str(err))
        self._on_lost(ConnectionError(f"malformed packet from the broker: {err}"))
        if self._transport is not None:
            self._transport.abort()

    def _deliver(self, handler: BatchHandler | None, batch: list[Message]) -> None:
        if handler is None:
            if self._inbox:
                self._wake()
        elif batch:
            self._hand_over(handler, batch)

    def _read_v5(self, data: bytes) -> None:
        buf = self._buf + data if self._buf else data
        view = memoryview(buf)
        end = len(buf)
        off = 0
        handler = self._batch_handler
        batch: list[Message] = []
        # messages() takes them from the inbox; a batch handler gets the whole read at once
        append = self._inbox.append if handler is None else batch.append
        read, publish, at_most_once = mqtt5.read, mqtt5.PublishPacket, mqtt5.QoS.AT_MOST_ONCE
        try:
            while off < end:
                packet, used = read(view[off:])
                off += used
                if type(packet) is publish:
                    qos = packet.qos
                    if qos == at_most_once:
                        append(_new(Message, (packet.topic, packet.payload, 0, packet.retain)))
                    elif self._acknowledge(packet):
                        append(
                            _new(Message, (packet.topic, packet.payload, int(qos), packet.retain))
                        )
                else:
                    self._on_control(packet)
        except IndexError:
            pass  # an incomplete packet: wait for the rest
        except ValueError as err:
            self._malformed(err, handler, batch)
            return
        finally:
            view.release()
        self._buf = buf[off:] if off < end else b""
        self._deliver(handler, batch)

    def _read_311(self, data: bytes) -> None:
        buf = self._buf + data if self._buf else data
        end = len(buf)
        off = 0
        handler = self._batch_handler
        batch: list[Message] = []
        append = self._inbox.append if handler is None else batch.append
        frame, decode_publish = mqtt311.frame, mqtt311.decode_publish
        try:
            while off < end:
                found = frame(buf, off)
                if found is None:
                    break  # an incomplete packet: wait for the rest
                first, start, off = found
                if first >> 4 == 3:
                    p = decode_publish(first, buf, start, off)
                    if not p.qos:
                        append(_new(Message, (p.topic, p.payload, 0, p.retain)))
                    elif self._acknowledge_311(p.qos, p.packet_id):
                        append(_new(Message, (p.topic, p.payload, p.qos, p.retain)))
                else:
                    self._on_control_311(mqtt311.decode(first, buf, start, off))
        except ValueError as err:
            self._malformed(err, handler, batch)
            return
        self._buf = buf[off:] if off < end else b""
        self._deliver(handler, batch)

    def _acknowledge_311(self, qos: int, pid: int | None) -> bool:
        """Ack a QoS 1 or 2 PUBLISH; False if it is a QoS 2 resend already delivered."""
        assert pid is not None
        if qos == 1:
            self._write(mqtt311.PubAck(pid).encode())
            return True
        self._write(mqtt311.PubRec(pid).encode())
        if pid in self._inbound_qos2:
            return False
        self._inbound_qos2.add(pid)
        return True

    def _settle(self, pid: int, refused: str | None) -> None:
        fut = self._acks.pop(pid, None)
        if fut is not None and not fut.done():
            if refused is not None:
                fut.set_exception(BrokerError(str(self.url), f"publish refused: {refused}"))
            else:
                fut.set_result(None)
        self._release()

    def _on_control_311(self, packet: mqtt311.Packet) -> None:
        if isinstance(packet, mqtt311.PubAck | mqtt311.PubComp):
            self._settle(packet.packet_id, None)
        elif isinstance(packet, mqtt311.PubRec):
            self._write(mqtt311.PubRel(packet.packet_id).encode())
        elif isinstance(packet, mqtt311.PubRel):
            self._inbound_qos2.discard(packet.packet_id)
            self._write(mqtt311.PubComp(packet.packet_id).encode())
        elif isinstance(packet, mqtt311.SubAck):
            sub = self._subacks.pop(packet.packet_id, None)
            if sub is not None and not sub.done():
                sub.set_result(list(packet.codes))
        elif not isinstance(packet, mqtt311.PingResp | mqtt311.UnsubAck):
            name = type(packet).__name__.upper()
            raise mqtt311.MalformedPacketError(f"a {name} is not sent by a broker")

    def _acknowledge(self, packet: mqtt5.PublishPacket) -> bool:
        """Ack a QoS 1 or 2 PUBLISH; False if it is a QoS 2 resend already delivered."""
        pid = packet.packet_id
        assert pid is not None
        if packet.qos == mqtt5.QoS.AT_LEAST_ONCE:
            self._write(mqtt5.PubAckPacket(pid).write())
            return True
        self._write(mqtt5.PubRecPacket(pid).write())
        if pid in self._inbound_qos2:
            return False
        self._inbound_qos2.add(pid)
        return True

    def _on_control(self, packet: mqtt5.Packet) -> None:
        if isinstance(packet, mqtt5.PubAckPacket | mqtt5.PubCompPacket):
            fut = self._acks.pop(packet.packet_id, None)
            if fut is not None and not fut.done():
                code = int(packet.reason_code)
                if code >= 0x80:
                    fut.set_exception(
                        BrokerError(str(self.url), f"publish refused: {packet.reason_code}")
                    )
                else:
                    fut.set_result(None)
            self._release()
        elif isinstance(packet, mqtt5.PubRecPacket):
            if int(packet.reason_code) >= 0x80:
                fut = self._acks.pop(packet.packet_id, None)
                if fut is not None and not fut.done():
                    fut.set_exception(
                        BrokerError(str(self.url), f"publish refused: {packet.reason_code}")
                    )
                self._release()
            else:
                self._write(mqtt5.PubRelPacket(packet.packet_id).write())
        elif isinstance(packet, mqtt5.PubRelPacket):
            self._inbound_qos2.discard(packet.packet_id)
            self._write(mqtt5.PubCompPacket(packet.packet_id).write())
        elif isinstance(packet, mqtt5.SubAckPacket):
            sub = self._subacks.pop(packet.packet_id, None)
            if sub is not None and not sub.done():
                sub.set_result([int(c) for c in packet.reason_codes])
        elif isinstance(packet, mqtt5.DisconnectPacket):
            self._on_lost(
                ConnectionError(f"broker disconnected: {packet.reason_code}"), by_broker=True
            )
            if self._transport is not None:
                self._transport.close()
        # PINGRESP and anything else: nothing to do.
