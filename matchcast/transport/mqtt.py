"""The aiomqtt client: the module that talks to the MQTT client library (aiomqtt 2.x).

:class:`MqttClient` implements the :class:`events.Publisher` and :class:`events.MessageSource`
protocols the rest of matchcast is written against. It connects with MQTT 5 and falls back to
3.1.1 where the broker refuses v5 (amqtt does), so MQTT 5 properties (content type, message
expiry, user properties) are sent where the broker speaks them and dropped where it does not.

What it connects to, the broker URL with its credentials and TLS options, is
:mod:`matchcast.transport.connection`, which both clients share. What aiomqtt 2 keeps to
itself (the session-present flag, a publish's reason code, the loss of a connection) is learnt
through paho's public callbacks in :mod:`matchcast.transport.aiomqtt_private`, the one module
that reaches into aiomqtt's private parts; publishes go through paho's ``publish()`` there, for
their message id and reason code.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, Literal, Self

import aiomqtt
import structlog
from aiomqtt.exceptions import MqttConnectError

from events import (
    BrokerError,
    ConnectionLostError,
    Message,
    MessageProps,
    PublishRefusedError,
    SubscribeDroppedError,
    SubscribeRefusedError,
)
from matchcast.transport.aiomqtt_private import (
    PahoHooks,
    connect_properties,
    encode_properties,
    will_properties,
)
from matchcast.transport.connection import (
    SUBSCRIBE_DROP_WINDOW_S,
    BrokerURL,
    Protocol,
    WillSpec,
    cannot_connect,
    connect_hint,
    describe,
)
from matchcast.transport.failover import (
    FAILOVER_CONNECT_TIMEOUT,
    Attempt,
    Attempts,
    Session,
    fail_over,
)

__all__ = ["V5_CONNACK_TIMEOUT", "MqttClient"]

_log = structlog.get_logger("matchcast.mqtt")

#: Messages an aiomqtt connection holds received but not yet read; past it each new one is
#: dropped (``broker.messages_dropped``, a consumer repairs the gap from the next snapshot).
#: Unbounded, a flood of new match ids piled up unread in ``watch`` and ``web``: 130 to 250 MB
#: whatever their match limit.
MAX_QUEUED_INCOMING = 10_000


class _DroppedMessages(logging.Filter):
    """aiomqtt logs each message it drops from a full queue: counted instead, and said at most
    once a second as ``broker.messages_dropped`` (a flood would log a line per message)."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped = 0
        self._said_at = 0.0

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("Message queue is full"):
            return True
        self.dropped += 1
        now = time.monotonic()
        if now - self._said_at >= 1.0:
            self._said_at = now
            _log.warning("broker.messages_dropped", dropped=self.dropped, queue=MAX_QUEUED_INCOMING)
        return False


#: On aiomqtt's logger (``mqtt``, which paho logs through too: see matchcast/logs.py).
_DROPPED = _DroppedMessages()
logging.getLogger("mqtt").addFilter(_DROPPED)

#: (host, port) -> whether the broker accepted MQTT 5, learnt on the first connection.
_V5_SUPPORT: dict[tuple[str, int], bool] = {}
#: Seconds to wait for the CONNACK of an MQTT 5 CONNECT before trying 3.1.1 (``--protocol
#: auto``): RabbitMQ 3.x never answers one, NATS refuses it at once.
V5_CONNACK_TIMEOUT = 3.0


async def _close_if_cancelled(client: aiomqtt.Client) -> None:
    """Close a connection just made and raise CancelledError if this task was cancelled
    (Ctrl-C, SIGTERM) though no CancelledError came: Python 3.11's ``asyncio.wait_for``, which
    aiomqtt 2 waits for the CONNACK with, returns the result instead when the cancel lands as
    the CONNACK arrives (see :func:`matchcast.transport.failover.raise_if_cancelled`)."""
    task = asyncio.current_task()
    if task is None or not task.cancelling():
        return
    with contextlib.suppress(Exception):
        async with asyncio.timeout(1):
            await client.__aexit__(None, None, None)
    raise asyncio.CancelledError


def _abandon(hooks: PahoHooks) -> None:
    """Close the socket of a client whose CONNECT failed, which aiomqtt leaves open: paho's
    public ``disconnect()`` sends a DISCONNECT and closes the socket once it is written."""
    with contextlib.suppress(OSError, ValueError):
        hooks.paho.disconnect()


def _connect_failure(
    err: aiomqtt.MqttError, version: str, protocol: str, timeout: float, url: BrokerURL
) -> str:
    """Why a CONNECT failed without a CONNACK, and what to do about it."""
    text = str(err)
    if "timed out" not in text.lower():
        return f"{text}{connect_hint(err, tls=url.tls)}"
    if protocol == "5":
        return (
            f"no CONNACK to MQTT 5 within {timeout:g}s: a broker that speaks MQTT 3.1.1 only "
            "(RabbitMQ 3.x) never answers one; use --protocol 3.1.1 or auto"
        )
    return (
        f"no CONNACK to MQTT {version} within {timeout:g}s: is this port an MQTT listener, "
        "and is the broker overloaded?"
    )


class MqttClient:
    """A connection to one broker of a list; implements ``Publisher`` and ``MessageSource``.

    Given several brokers (the nodes of one cluster), it connects to the first that answers
    and, when that node is lost, :meth:`reconnect` fails over to the others on the schedule of
    :class:`matchcast.transport.failover.Attempts`. Use as an async context manager::

        async with MqttClient(BrokerURL.parse("mqtt://127.0.0.1:1883")) as client:
            await client.publish("a/b", b"{}", qos=1)
    """

    def __init__(
        self,
        url: BrokerURL | Sequence[BrokerURL],
        *,
        client_id: str | None = None,
        protocol: Protocol = "auto",
        will: WillSpec | None = None,
        clean_start: bool = True,
        session_expiry: int | None = None,
        keepalive: int = 30,
        connect_timeout: float = 10.0,
        connack_timeout: float = V5_CONNACK_TIMEOUT,
        failover_timeout: float = FAILOVER_CONNECT_TIMEOUT,
        max_inflight: int = 100,
        max_queued_incoming: int = MAX_QUEUED_INCOMING,
        tls_context: ssl.SSLContext | None = None,
        backoff_initial: float = 0.1,
        backoff_max: float = 5.0,
        max_outage: float = 300.0,
        on_reconnect: Callable[[MqttClient], Awaitable[None]] | None = None,
    ) -> None:
        #: The brokers given, in order; :attr:`url` is the one connected to (or tried last).
        self.urls: tuple[BrokerURL, ...] = (url,) if isinstance(url, BrokerURL) else tuple(url)
        if not self.urls:
            raise ValueError("no broker to connect to")
        self.url = self.urls[0]
        # With other nodes to try, a node that stalls a CONNECT (NATS while JetStream elects
        # new leaders) gets a short wait in a failover: the next node may answer at once.
        self.attempts = Attempts(
            self.urls,
            initial=backoff_initial,
            cap=backoff_max,
            connect_timeout=connect_timeout,
            failover_timeout=failover_timeout,
        )
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.max_outage = max_outage
        self.on_reconnect = on_reconnect
        #: Connections replaced by :meth:`reconnect` so far.
        self.reconnects = 0
        self._reconnect_lock = asyncio.Lock()
        self._generation = 0
        #: The client id, clean start and session-present flag across connections.
        self.session = Session(
            client_id or f"matchcast-{uuid.uuid4().hex[:12]}", clean_start=clean_start
        )
        self._protocol = protocol
        self._will = will
        self._session_expiry = session_expiry
        self._keepalive = keepalive
        self._timeout = connect_timeout
        self._connack_timeout = min(connack_timeout, connect_timeout)
        #: The connect wait of the attempt under way (:attr:`Attempt.timeout`).
        self._attempt_timeout = connect_timeout
        self._max_inflight = max_inflight
        self._max_queued_incoming = max_queued_incoming
        try:
            self._tls = [tls_context if tls_context is not None else u.context() for u in self.urls]
        except ValueError as err:
            raise BrokerError(describe(self.urls), str(err)) from err
        self._client: aiomqtt.Client | None = None
        self._hooks: PahoHooks | None = None
        self.protocol_version: Literal["5", "3.1.1"] | None = None

    @property
    def broker(self) -> str:
        """The broker list as shown in logs and errors (passwords hidden)."""
        return describe(self.urls)

    def _make(self, index: int, version: Literal["5", "3.1.1"]) -> tuple[aiomqtt.Client, PahoHooks]:
        url = self.urls[index]
        v5 = version == "5"
        will = None
        if self._will:
            will = aiomqtt.Will(
                self._will.topic,
                self._will.payload,
                self._will.qos,
                self._will.retain,
                properties=will_properties(self._will.expiry) if v5 else None,
            )
        kwargs: dict[str, Any] = {}
        if v5:
            kwargs["clean_start"] = self.session.clean_start
        else:
            kwargs["clean_session"] = self.session.clean_start
        client = aiomqtt.Client(
            url.host,
            url.port,
            username=url.username,
            password=url.password,
            identifier=self.client_id,
            protocol=aiomqtt.ProtocolVersion.V5 if v5 else aiomqtt.ProtocolVersion.V311,
            will=will,
            # A v5 CONNECT that a 3.1.1-only broker ignores (RabbitMQ 3.x) waits only briefly.
            timeout=min(
                self._attempt_timeout,
                self._connack_timeout if v5 and self._protocol == "auto" else self._timeout,
            ),
            keepalive=self._keepalive,
            max_inflight_messages=self._max_inflight,
            max_queued_incoming_messages=self._max_queued_incoming,
            properties=connect_properties(self._session_expiry) if v5 else None,
            tls_context=self._tls[index],
            **kwargs,
        )
        return client, PahoHooks(client, str(url), self._timeout)

    async def _probe_v5(self, index: int) -> bool:
        """Whether the broker accepts MQTT 5, asked once per broker address.

        A will in a v5 CONNECT makes amqtt's 3.1.1 parser hang instead of refusing, so a
        client with a will asks with a bare CONNECT first.
        """
        url = self.urls[index]
        key = (url.host, url.port)
        if key not in _V5_SUPPORT:
            probe = MqttClient(
                url,
                protocol="auto",
                # A failover's probe waits as briefly as the failover attempt itself.
                connect_timeout=self._attempt_timeout,
                connack_timeout=self._connack_timeout,
                tls_context=self._tls[index],
            )
            async with probe:
                pass  # connecting remembers whether v5 was accepted
            if not _V5_SUPPORT.get(key, False):
                self._v311_only(key)  # for the whole list, not only the probe's one address
        return _V5_SUPPORT.get(key, False)

    async def __aenter__(self) -> Self:
        await self._connect()
        return self

    async def _connect(self) -> None:
        """Connect to the first broker of the list that answers.

        Raises:
            BrokerError: none answered; with one broker, its reason, else each node's.
        """
        failures: list[BrokerError] = []
        for attempt in self.attempts.first_pass():
            try:
                await self._connect_to(attempt.index)
            except BrokerError as err:
                if len(self.urls) == 1:
                    raise
                _log.info("broker.connect_failed", broker=str(attempt.url), reason=err.reason)
                failures.append(err)
                continue
            self.attempts.connected(attempt.index)
            return
        reasons = "; ".join(f"{f.url}: {f.reason}" for f in failures)
        raise BrokerError(f"list of {len(self.urls)}", f"no node answered ({reasons})")

    async def _connect_to(self, index: int) -> None:
        """Connect to ``urls[index]``, negotiating the protocol (remembered per address).

        Raises:
            BrokerError: refused or unreachable, with the cause and what to do about it.
        """
        url = self.urls[index]
        self.url = url
        key = (url.host, url.port)
        versions: list[Literal["5", "3.1.1"]]
        if self._protocol != "auto":
            versions = [self._protocol]
        elif _V5_SUPPORT.get(key) is False or (
            self._will is not None and not await self._probe_v5(index)
        ):
            versions = ["3.1.1"]
        else:
            versions = ["5", "3.1.1"]
        v5_failure = ""
        for version in versions:
            client, hooks = self._make(index, version)
            try:
                await client.__aenter__()
            except MqttConnectError as err:
                _abandon(hooks)
                refused_v5 = version == "5" and "protocol" in str(err.rc).lower()
                if refused_v5 and self._protocol == "auto":
                    self._v311_only(key)
                    _log.info("broker.v5_refused", broker=str(url), fallback="3.1.1")
                    continue
                if refused_v5:
                    raise BrokerError(
                        str(url),
                        f"refused MQTT 5 (CONNACK: {err.rc}): it speaks MQTT 3.1.1 only; "
                        "use --protocol 3.1.1 or auto",
                    ) from err
                raise BrokerError(
                    str(url), f"connection refused (CONNACK: {err.rc}){connect_hint(err)}"
                ) from err
            except aiomqtt.MqttError as err:
                _abandon(hooks)
                timed_out = "timed out" in str(err).lower()
                if version == "5" and self._protocol == "auto" and timed_out:
                    # RabbitMQ 3.x crashes on a v5 CONNECT and never answers it.
                    v5_failure = f"no CONNACK to MQTT 5 within {self._connack_timeout:g}s, "
                    _log.info("broker.v5_unanswered", broker=str(url), fallback="3.1.1")
                    continue
                reason = _connect_failure(err, version, self._protocol, self._attempt_timeout, url)
                raise cannot_connect(url, f"{v5_failure}{reason}") from err
            await _close_if_cancelled(client)
            if version == "5":
                _V5_SUPPORT[key] = True
            elif v5_failure:
                self._v311_only(key)
            client.timeout = self._timeout  # a short connect wait is not a short subscribe wait
            self._client, self._hooks = client, hooks
            hooks.connected()
            self.session.present = hooks.session_present
            self.protocol_version = version
            _log.debug(
                "broker.connected", broker=str(url), protocol=version, client_id=self.client_id
            )
            return
        raise BrokerError(str(url), "refused both MQTT 5 and MQTT 3.1.1")  # pragma: no cover

    @property
    def client_id(self) -> str:
        """The client id of the current (or next) connection."""
        return self.session.client_id

    @property
    def persistent(self) -> bool:
        """See :attr:`matchcast.transport.failover.Session.persistent`."""
        return self.session.persistent

    @property
    def session_resumed(self) -> bool:
        """See :attr:`matchcast.transport.failover.Session.resumed` (aiomqtt keeps the
        CONNACK's flag to itself: :class:`matchcast.transport.aiomqtt_private.PahoHooks`)."""
        return self.session.resumed

    def start_clean(self) -> None:
        """See :meth:`matchcast.transport.failover.Session.start_clean`."""
        self.session.start_clean()

    def _v311_only(self, key: tuple[str, int]) -> None:
        """Remember that this address speaks 3.1.1 only, and assume so of the other nodes of
        the list not asked yet (one cluster runs one engine): a failover then costs no wait
        for a CONNACK to MQTT 5 that will not come."""
        _V5_SUPPORT[key] = False
        for url in self.urls:
            _V5_SUPPORT.setdefault((url.host, url.port), False)

    async def wait_lost(self) -> None:
        """Return when the current connection is lost (not when we close it ourselves).

        Raises:
            BrokerError: always, once the connection is lost.
        """
        client = self._c
        lost = self._h.lost
        try:
            await asyncio.shield(lost)
        except aiomqtt.MqttError as err:
            raise ConnectionLostError(str(self.url), f"connection lost: {err}") from err
        if self._client is client:
            raise ConnectionLostError(str(self.url), "connection closed by the broker")
        await asyncio.Event().wait()  # closed by us: never "lost"

    async def reconnect(self, *, same_node_first: bool = False) -> None:
        """Replace a lost connection: fail over to the other brokers, with backoff and jitter.

        The attempts follow :meth:`matchcast.transport.failover.Attempts.after_loss`: the nodes
        after the lost one first, the lost one last, then round-robin, each pass waiting longer
        (from ``backoff_initial`` doubling to ``backoff_max``, a random fraction of it each
        time). ``same_node_first`` asks the current node first: the connection was given up,
        not lost (a session the node could not resume, see :meth:`start_clean`).
        Calls ``on_reconnect`` once connected.

        Raises:
            BrokerError: still unreachable after ``max_outage`` seconds.
        """
        generation = self._generation
        async with self._reconnect_lock:
            if self._generation != generation:
                return  # another task replaced the connection while this one waited
            await self._replace(same_node_first)
            self._generation += 1

    async def _replace(self, same_node_first: bool = False) -> None:
        old, self._client, self._hooks = self._client, None, None
        if old is not None:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for loses a cancel (Ctrl-C,
            # SIGTERM) that lands as the wrapped call ends, and a reconnect loop went on.
            with contextlib.suppress(Exception):
                async with asyncio.timeout(1):
                    await old.__aexit__(None, None, None)

        lost = self.attempts.current

        async def connect(attempt: Attempt) -> None:
            self._attempt_timeout = attempt.timeout
            self.session.before(attempt, lost)
            try:
                await self._connect_to(attempt.index)
            finally:
                self._attempt_timeout = self._timeout

        await fail_over(
            self.attempts,
            connect,
            where=self.broker,
            max_outage=self.max_outage,
            current_first=same_node_first,
        )
        self.reconnects += 1
        if self.on_reconnect is not None:
            await self.on_reconnect(self)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        client, self._client, self._hooks = self._client, None, None
        if client is not None:
            with contextlib.suppress(aiomqtt.MqttError):
                await client.__aexit__(exc_type, exc, tb)

    @property
    def _c(self) -> aiomqtt.Client:
        if self._client is None:
            raise BrokerError(str(self.url), "not connected")
        return self._client

    @property
    def _h(self) -> PahoHooks:
        if self._hooks is None:
            raise BrokerError(str(self.url), "not connected")
        return self._hooks

    @property
    def is_v5(self) -> bool:
        """True where the broker accepted MQTT 5."""
        return self.protocol_version == "5"

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
            BrokerError: the connection is gone or the publish timed out.
        """
        properties = encode_properties(props) if self.is_v5 else None
        try:
            reason = await self._h.publish(topic, payload, qos, retain, properties)
        except ValueError as err:  # paho: a topic or payload it cannot send
            raise BrokerError(str(self.url), f"publish to {topic!r} failed: {err}") from err
        if reason.is_failure:
            raise PublishRefusedError(str(self.url), topic, int(reason.value), str(reason))
        if qos:
            self.attempts.losses.progress = True  # acknowledged: as a message that came in

    async def publish_refusal(
        self, topic: str, payload: bytes, *, props: MessageProps | None = None
    ) -> str | None:
        """Publish at QoS 1 and return the broker's refusal, None when it took the message.

        MQTT 5 brokers give a reason in the PUBACK (``Not authorized`` from an ACL); over
        3.1.1 a refused message is dropped silently, and this returns None.

        Raises:
            BrokerError: the connection is gone or no acknowledgement came.
        """
        try:
            await self.publish(topic, payload, qos=1, props=props)
        except PublishRefusedError as err:
            return f"{err.name} (0x{err.code:02x})"
        return None

    async def subscribe(self, topic_filter: str, *, qos: int = 1) -> None:
        """Subscribe and wait for the SUBACK, or for the connection to end first.

        aiomqtt waits out its whole timeout for a SUBACK the broker answered by closing the
        connection; the wait here ends with the connection.

        Raises:
            SubscribeDroppedError: the broker closed the connection in answer to it (RabbitMQ
                3.10, for a client id whose queue lives on a node that is down).
            SubscribeRefusedError: the broker refused it.
            BrokerError: the connection is gone, or no SUBACK came in time.
        """
        client = self._c
        loop = asyncio.get_running_loop()
        sent = loop.time()
        lost = self._h.lost
        if lost.done():
            raise ConnectionLostError(
                str(self.url), f"subscribe to {topic_filter!r}: connection lost"
            )
        request = asyncio.ensure_future(client.subscribe(topic_filter, qos=qos))
        waiting: set[asyncio.Future[Any]] = {request, lost}
        try:
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not request.done():
                request.cancel()
        if not request.done() or request.cancelled():
            failure = lost.exception() if lost.done() and not lost.cancelled() else None
            if failure is None:  # closed by us
                raise BrokerError(str(self.url), f"subscribe to {topic_filter!r}: not connected")
            if loop.time() - sent <= SUBSCRIBE_DROP_WINDOW_S:
                raise SubscribeDroppedError(str(self.url), topic_filter) from failure
            raise ConnectionLostError(str(self.url), f"connection lost: {failure}") from failure
        try:
            result = request.result()
        except aiomqtt.MqttError as err:
            raise BrokerError(
                str(self.url), f"subscribe to {topic_filter!r} failed: {err}"
            ) from err
        codes = [r if isinstance(r, int) else int(r.value) for r in result]
        if any(c >= 0x80 for c in codes):
            raise SubscribeRefusedError(str(self.url), topic_filter, codes)

    async def messages(self) -> AsyncIterator[Message]:
        """Messages as they arrive; ends when the connection is closed by us.

        Raises:
            BrokerError: the connection was lost.
        """
        try:
            async for m in self._c.messages:
                self.attempts.losses.progress = True  # Attempts.progressed, inlined: per message
                payload = (
                    m.payload
                    if isinstance(m.payload, bytes | bytearray)
                    else str(m.payload).encode()
                )
                yield Message(
                    topic=m.topic.value, payload=bytes(payload), qos=m.qos, retain=m.retain
                )
        except aiomqtt.MqttError as err:
            raise ConnectionLostError(str(self.url), f"connection lost: {err}") from err
