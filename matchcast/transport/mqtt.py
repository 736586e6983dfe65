"""The one module that talks to the MQTT client library (aiomqtt 2.x).

:class:`MqttClient` implements the :class:`events.Publisher` and :class:`events.MessageSource`
protocols the rest of matchcast is written against. It connects with MQTT 5 and falls back to
3.1.1 where the broker refuses v5 (amqtt does), so MQTT 5 properties (content type, message
expiry, user properties) are sent where the broker speaks them and dropped where it does not.

What it connects to, the broker URL with its credentials and TLS options, is
:mod:`matchcast.transport.connection`, which both clients share.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import ssl
import typing
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, Literal, Self

import aiomqtt
import structlog
from aiomqtt.exceptions import MqttConnectError
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from events import (
    BrokerError,
    ConnectionLostError,
    Message,
    MessageProps,
    PublishRefusedError,
    SubscribeDroppedError,
    SubscribeRefusedError,
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

#: (host, port) -> whether the broker accepted MQTT 5, learnt on the first connection.
_V5_SUPPORT: dict[tuple[str, int], bool] = {}
#: Seconds to wait for the CONNACK of an MQTT 5 CONNECT before trying 3.1.1 (``--protocol
#: auto``): RabbitMQ 3.x never answers one, NATS refuses it at once.
V5_CONNACK_TIMEOUT = 3.0


def _abandon(client: aiomqtt.Client) -> None:
    """Close the socket of a client whose CONNECT failed (aiomqtt leaves it open)."""
    with contextlib.suppress(Exception):
        client._client._sock_close()  # paho has no public way for this


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


def _vbi(n: int) -> bytes:
    out = bytearray()
    while True:
        n, digit = divmod(n, 128)
        out.append(digit | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _utf8(text: str) -> bytes:
    raw = text.encode()
    return len(raw).to_bytes(2, "big") + raw


class _PackedProperties(Properties):
    """PUBLISH properties encoded once, by us.

    paho only ever calls ``pack()`` on the properties of a publish, and its generic packer
    costs about 35 us a message: as much as the rest of the publish path. The encoding is
    MQTT 5 section 2.2.2: a variable byte integer length, then identifier + value pairs.
    """

    def __init__(self, packed: bytes) -> None:
        object.__setattr__(self, "packetType", PacketTypes.PUBLISH)
        object.__setattr__(self, "_packed", packed)

    def pack(self) -> bytes:
        """The encoded properties, length prefix included."""
        packed: bytes = object.__getattribute__(self, "_packed")
        return packed


_CONTENT_TYPE, _EXPIRY, _USER = 0x03, 0x02, 0x26


def _properties(props: MessageProps | None) -> Properties | None:
    if props is None:
        return None
    body = bytearray()
    if props.message_expiry is not None:
        body += bytes([_EXPIRY]) + props.message_expiry.to_bytes(4, "big")
    if props.content_type:
        body += bytes([_CONTENT_TYPE]) + _utf8(props.content_type)
    for key, value in props.user:
        body += bytes([_USER]) + _utf8(key) + _utf8(value)
    return _PackedProperties(_vbi(len(body)) + bytes(body))


#: The message ids of the publish running in this task (aiomqtt does not return them).
_PUBLISH_MIDS: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "matchcast_publish_mids", default=None
)


def _note_session_present(client: aiomqtt.Client, note: Callable[[bool], None]) -> None:
    """Tell ``note`` the CONNACK's session-present flag: aiomqtt 2 keeps it to itself, and a
    consumer must know whether what was published while it was away comes queued."""
    paho_client = client._client
    on_connect: Callable[..., None] | None = paho_client.on_connect
    assert on_connect is not None

    def on_connect_noting(c: Any, userdata: Any, flags: Any, *rest: Any) -> None:
        note(bool(getattr(flags, "session_present", False)))
        on_connect(c, userdata, flags, *rest)

    paho_client.on_connect = on_connect_noting


def _watch_refusals(client: aiomqtt.Client, refused: dict[int, tuple[int, str]]) -> None:
    """Keep the reason code of every publish the broker refuses.

    aiomqtt 2 drops the PUBACK's reason code, so a refused publish (the ACL's 0x87) would look
    delivered. paho's publish and on_publish are wrapped: the first tells the running
    :meth:`MqttClient.publish` its message id, the second notes a failure code for it.
    """
    paho_client = client._client
    publish = paho_client.publish
    on_publish: Callable[..., None] | None = paho_client.on_publish
    assert on_publish is not None

    def publish_noting_mid(*args: Any, **kwargs: Any) -> Any:
        info = publish(*args, **kwargs)
        refused.pop(info.mid, None)  # a reused id: any earlier outcome is not this one's
        mids = _PUBLISH_MIDS.get()
        if mids is not None:
            mids.append(info.mid)
        return info

    def on_publish_noting_refusal(
        c: Any, userdata: Any, mid: int, reason_code: Any, properties: Any
    ) -> None:
        if getattr(reason_code, "is_failure", False):
            refused[mid] = (int(reason_code.value), str(reason_code))
        on_publish(c, userdata, mid, reason_code, properties)

    paho_client.publish = publish_noting_mid  # type: ignore[method-assign]
    paho_client.on_publish = on_publish_noting_refusal


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
        #: Message ids the broker refused (MQTT 5 reason >= 0x80), until their publish sees it.
        self._refused: dict[int, tuple[int, str]] = {}
        try:
            self._tls = [tls_context if tls_context is not None else u.context() for u in self.urls]
        except ValueError as err:
            raise BrokerError(describe(self.urls), str(err)) from err
        self._client: aiomqtt.Client | None = None
        self.protocol_version: Literal["5", "3.1.1"] | None = None

    @property
    def broker(self) -> str:
        """The broker list as shown in logs and errors (passwords hidden)."""
        return describe(self.urls)

    def _make(self, index: int, version: Literal["5", "3.1.1"]) -> aiomqtt.Client:
        url = self.urls[index]
        v5 = version == "5"
        will = None
        if self._will:
            will = aiomqtt.Will(
                self._will.topic, self._will.payload, self._will.qos, self._will.retain
            )
        props = None
        if v5 and self._session_expiry is not None:
            props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
            props.SessionExpiryInterval = self._session_expiry
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
            properties=props,
            tls_context=self._tls[index],
            **kwargs,
        )
        client.pending_calls_threshold = 1_000_000  # we bound in-flight calls ourselves
        _watch_refusals(client, self._refused)
        _note_session_present(client, self._note_session)
        return client

    def _note_session(self, present: bool) -> None:
        self.session.present = present

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
            client = self._make(index, version)
            try:
                await client.__aenter__()
            except MqttConnectError as err:
                _abandon(client)
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
                _abandon(client)
                timed_out = "timed out" in str(err).lower()
                if version == "5" and self._protocol == "auto" and timed_out:
                    # RabbitMQ 3.x crashes on a v5 CONNECT and never answers it.
                    v5_failure = f"no CONNACK to MQTT 5 within {self._connack_timeout:g}s, "
                    _log.info("broker.v5_unanswered", broker=str(url), fallback="3.1.1")
                    continue
                reason = _connect_failure(err, version, self._protocol, self._attempt_timeout, url)
                raise cannot_connect(url, f"{v5_failure}{reason}") from err
            if version == "5":
                _V5_SUPPORT[key] = True
            elif v5_failure:
                self._v311_only(key)
            client.timeout = self._timeout  # a short connect wait is not a short publish wait
            self._client = client
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
        CONNACK's flag to itself: :func:`_note_session_present`)."""
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

        aiomqtt leaves an unacknowledged publish waiting for its full timeout after the
        connection is gone; a caller with publishes in flight races them against this to learn
        of the loss at once.

        Raises:
            BrokerError: always, once the connection is lost.
        """
        client = self._c
        lost = client._disconnected  # aiomqtt 2.x exposes no public signal for this
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
        old, self._client = self._client, None
        if old is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(old.__aexit__(None, None, None), timeout=1)

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
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(aiomqtt.MqttError):
                await client.__aexit__(exc_type, exc, tb)

    @property
    def _c(self) -> aiomqtt.Client:
        if self._client is None:
            raise BrokerError(str(self.url), "not connected")
        return self._client

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
        properties = _properties(props) if self.is_v5 else None
        mids: list[int] = []
        token = _PUBLISH_MIDS.set(mids)
        try:
            await self._c.publish(topic, payload, qos=qos, retain=retain, properties=properties)
        except aiomqtt.MqttError as err:
            raise BrokerError(str(self.url), f"publish to {topic!r} failed: {err}") from err
        finally:
            _PUBLISH_MIDS.reset(token)
        for mid in mids:
            refused = self._refused.pop(mid, None)
            if refused is not None:
                raise PublishRefusedError(str(self.url), topic, *refused)

    async def publish_refusal(
        self, topic: str, payload: bytes, *, props: MessageProps | None = None
    ) -> str | None:
        """Publish at QoS 1 and return the broker's refusal, None when it took the message.

        MQTT 5 brokers give a reason in the PUBACK (``Not authorized`` from an ACL); over
        3.1.1 a refused message is dropped silently, and this returns None.

        Raises:
            BrokerError: the connection is gone or no acknowledgement came.
        """
        if not self.is_v5:
            await self.publish(topic, payload, qos=1, props=props)
            return None
        paho_client = self._c._client
        original = paho_client.on_publish
        reasons: dict[int, Any] = {}
        acked = asyncio.Event()

        def on_publish(client: Any, userdata: Any, mid: int, reason: Any, properties: Any) -> None:
            reasons[mid] = reason
            acked.set()
            if original is not None:
                typing.cast("Any", original)(client, userdata, mid, reason, properties)

        paho_client.on_publish = on_publish
        try:
            info = paho_client.publish(topic, payload, 1, False, _properties(props))
            async with asyncio.timeout(10):
                while info.mid not in reasons:
                    acked.clear()
                    await acked.wait()
        except TimeoutError as err:
            raise BrokerError(str(self.url), f"no acknowledgement of {topic!r}") from err
        finally:
            paho_client.on_publish = original
        reason = reasons[info.mid]
        if getattr(reason, "is_failure", False):
            return f"{reason} (0x{int(reason.value):02x})"
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
        lost = client._disconnected  # aiomqtt 2.x exposes no public signal for this
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
