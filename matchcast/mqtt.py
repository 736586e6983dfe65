"""The one module that talks to the MQTT client library (aiomqtt 2.x).

:class:`MqttClient` implements the :class:`events.Publisher` and :class:`events.MessageSource`
protocols the rest of matchcast is written against. It connects with MQTT 5 and falls back to
3.1.1 where the broker refuses v5 (amqtt does), so MQTT 5 properties (content type, message
expiry, user properties) are sent where the broker speaks them and dropped where it does not.

Security lives here too: :class:`BrokerURL` carries the credentials and the :class:`TLSOptions`
of a connection, :func:`broker_url_from` fills them in from the environment, and
:meth:`TLSOptions.context` is the one place an ``ssl.SSLContext`` is built. A password is never
part of ``str()`` or ``repr()`` of either, so it stays out of logs and error messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import ssl
import time
import typing
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self
from urllib.parse import unquote, urlsplit

import aiomqtt
import structlog
from aiomqtt.exceptions import MqttConnectError
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from events import BrokerError, ConnectionLostError, Message, MessageProps

__all__ = [
    "ENV_BROKER",
    "ENV_CA_FILE",
    "ENV_CERT_FILE",
    "ENV_KEY_FILE",
    "ENV_KEY_PASSWORD",
    "ENV_PASSWORD",
    "ENV_USERNAME",
    "BrokerURL",
    "MqttClient",
    "TLSOptions",
    "WillSpec",
    "broker_url_from",
]

_log = structlog.get_logger("matchcast.mqtt")

#: Environment variable holding the broker URL when ``--broker`` is not given.
ENV_BROKER = "MATCHCAST_BROKER"
#: Credentials, so a password need not be on the command line (where ``ps`` shows it).
ENV_USERNAME = "MATCHCAST_USERNAME"
ENV_PASSWORD = "MATCHCAST_PASSWORD"  # noqa: S105 - the variable's name, not a password
#: TLS files for an ``mqtts://`` broker: the CA that signed it, and a client certificate.
ENV_CA_FILE = "MATCHCAST_CA_FILE"
ENV_CERT_FILE = "MATCHCAST_CERT_FILE"
ENV_KEY_FILE = "MATCHCAST_KEY_FILE"
#: Passphrase of an encrypted client key (without it, OpenSSL would prompt on the terminal).
ENV_KEY_PASSWORD = "MATCHCAST_KEY_PASSWORD"  # noqa: S105 - the variable's name
Protocol = Literal["auto", "5", "3.1.1"]
#: (host, port) -> whether the broker accepted MQTT 5, learnt by a probe.
_V5_SUPPORT: dict[tuple[str, int], bool] = {}


@dataclass(frozen=True, slots=True)
class TLSOptions:
    """How to check an ``mqtts://`` broker and prove who we are to it.

    Attributes:
        ca_file: PEM file of the CA(s) that signed the broker's certificate; the system's
            trust store when None.
        cert_file: PEM client certificate (with its key, unless ``key_file`` is given).
        key_file: PEM private key of the client certificate.
        key_password: passphrase of an encrypted ``key_file``; never shown.
        insecure: skip checking the broker's certificate and name. Anyone on the path can
            then read and change the stream: for a test broker only.
    """

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    key_password: str | None = field(default=None, repr=False)
    insecure: bool = False

    @property
    def given(self) -> bool:
        """True when any option is set (so a broker URL without TLS is a mistake)."""
        return bool(self.ca_file or self.cert_file or self.key_file or self.insecure)

    def merged(self, other: TLSOptions) -> TLSOptions:
        """These options with whatever ``other`` sets on top."""
        return TLSOptions(
            ca_file=other.ca_file or self.ca_file,
            cert_file=other.cert_file or self.cert_file,
            key_file=other.key_file or self.key_file,
            key_password=other.key_password or self.key_password,
            insecure=other.insecure or self.insecure,
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> TLSOptions:
        """The options ``$MATCHCAST_CA_FILE``, ``_CERT_FILE``, ``_KEY_FILE`` (and the key's
        ``$MATCHCAST_KEY_PASSWORD``) give."""

        def path(name: str) -> Path | None:
            value = environ.get(name)
            return Path(value) if value else None

        return cls(
            ca_file=path(ENV_CA_FILE),
            cert_file=path(ENV_CERT_FILE),
            key_file=path(ENV_KEY_FILE),
            key_password=environ.get(ENV_KEY_PASSWORD) or None,
        )

    def context(self) -> ssl.SSLContext:
        """A client ``SSLContext``: TLS 1.2 or later, the broker's certificate and host name
        checked against ``ca_file`` (or the system CAs) unless ``insecure``.

        Raises:
            ValueError: a file is missing or is not what it should be; the message names it.
        """
        if self.key_file and not self.cert_file:
            raise ValueError(f"key file {self.key_file} given without a certificate file")
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.ca_file is not None:
            try:
                ctx.load_verify_locations(cafile=self.ca_file)
            except (OSError, ssl.SSLError) as err:
                raise ValueError(
                    f"CA file {self.ca_file}: {_ssl_reason(err)} (expected PEM certificates)"
                ) from None
        if self.cert_file is not None:
            try:
                ctx.load_cert_chain(self.cert_file, self.key_file, password=self._key_password)
            except (OSError, ssl.SSLError) as err:
                key = f" / key file {self.key_file}" if self.key_file else ""
                raise ValueError(
                    f"certificate file {self.cert_file}{key}: {_ssl_reason(err)} (expected a "
                    f"PEM certificate and its key; an encrypted key needs ${ENV_KEY_PASSWORD})"
                ) from None
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx

    def _key_password(self) -> str:
        # A callable, so OpenSSL never prompts on the terminal for an encrypted key.
        return self.key_password or ""


def _hint(err: Exception, *, tls: bool = False) -> str:
    text = str(err)
    if "authori" in text.lower() or "user name or password" in text.lower():
        return (
            f" (check the user name and password: in the URL, or ${ENV_USERNAME} and "
            f"${ENV_PASSWORD})"
        )
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return (
            " (is the broker's certificate signed by the CA of --ca-file / "
            f"${ENV_CA_FILE}, and issued for this host name?)"
        )
    tls_mismatch = ("WRONG_VERSION_NUMBER", "record layer failure", "reset by peer", "EOF")
    if tls and any(s in text for s in tls_mismatch):
        return " (is this port TLS? mqtts:// needs a TLS listener, mqtt:// a plain one)"
    return ""


def _ssl_reason(err: OSError | ssl.SSLError) -> str:
    if isinstance(err, ssl.SSLError):
        return err.reason or str(err)
    return err.strerror or str(err)


@dataclass(frozen=True, slots=True)
class BrokerURL:
    """A parsed ``mqtt://[user:pass@]host:port`` (or ``mqtts://`` for TLS).

    ``tls_options`` say how an ``mqtts://`` broker is checked; the password is in neither
    ``str()`` nor ``repr()``.
    """

    host: str
    port: int
    tls: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls_options: TLSOptions = TLSOptions()

    @classmethod
    def parse(cls, url: str) -> BrokerURL:
        """Parse a broker URL; a bare ``host[:port]`` means ``mqtt://``.

        Raises:
            ValueError: with what is wrong and what a good URL looks like.
        """
        raw = url if "://" in url else f"mqtt://{url}"
        parts = urlsplit(raw)
        if parts.scheme not in ("mqtt", "mqtts", "tcp", "ssl"):
            raise ValueError(
                f"broker URL {cls._redact(url)!r}: scheme must be mqtt:// or mqtts://, "
                f"e.g. mqtt://127.0.0.1:1883"
            )
        tls = parts.scheme in ("mqtts", "ssl")
        try:
            port = parts.port or (8883 if tls else 1883)
        except ValueError:
            raise ValueError(
                f"broker URL {cls._redact(url)!r}: the port must be a number 1-65535"
            ) from None
        if not parts.hostname:
            raise ValueError(
                f"broker URL {cls._redact(url)!r} has no host, e.g. mqtt://127.0.0.1:1883"
            )
        return cls(
            host=parts.hostname,
            port=port,
            tls=tls,
            username=unquote(parts.username) if parts.username else None,
            password=unquote(parts.password) if parts.password else None,
        )

    @staticmethod
    def _redact(url: str) -> str:
        head, at, tail = url.rpartition("@")
        if not at:
            return url
        scheme, sep, creds = head.partition("://")
        user = creds.split(":", 1)[0]
        return f"{scheme}{sep}{user}:***@{tail}" if sep else f"{user}:***@{tail}"

    def __str__(self) -> str:
        """The URL with the password replaced by ``***``: safe to log."""
        user = (
            f"{self.username}:***@"
            if self.username and self.password
            else (f"{self.username}@" if self.username else "")
        )
        return f"{'mqtts' if self.tls else 'mqtt'}://{user}{self.host}:{self.port}"

    def with_credentials(self, username: str | None, password: str | None) -> BrokerURL:
        """This URL with the user name and password the URL itself leaves out filled in."""
        return replace(self, username=self.username or username, password=self.password or password)

    def with_tls(self, options: TLSOptions) -> BrokerURL:
        """This URL with ``options`` on top of its own TLS options.

        Raises:
            ValueError: TLS options for a plain ``mqtt://`` broker (a mistake that would
                otherwise send everything in clear).
        """
        if options.given and not self.tls:
            raise ValueError(
                f"TLS options were given but the broker {self} is not TLS: use mqtts://"
            )
        return replace(self, tls_options=self.tls_options.merged(options))

    def context(self) -> ssl.SSLContext | None:
        """The ``SSLContext`` for this broker, or None for plain ``mqtt://``.

        Raises:
            ValueError: a TLS file cannot be used.
        """
        return self.tls_options.context() if self.tls else None


@dataclass(frozen=True, slots=True)
class WillSpec:
    """A last will: published by the broker when the client vanishes."""

    topic: str
    payload: bytes
    qos: int = 1
    retain: bool = True


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


class MqttClient:
    """A connection to a broker; implements ``Publisher`` and ``MessageSource``.

    Use as an async context manager::

        async with MqttClient(BrokerURL.parse("mqtt://127.0.0.1:1883")) as client:
            await client.publish("a/b", b"{}", qos=1)
    """

    def __init__(
        self,
        url: BrokerURL,
        *,
        client_id: str | None = None,
        protocol: Protocol = "auto",
        will: WillSpec | None = None,
        clean_start: bool = True,
        session_expiry: int | None = None,
        keepalive: int = 30,
        connect_timeout: float = 10.0,
        max_inflight: int = 100,
        tls_context: ssl.SSLContext | None = None,
        backoff_initial: float = 0.1,
        backoff_max: float = 5.0,
        max_outage: float = 300.0,
        on_reconnect: Callable[[MqttClient], Awaitable[None]] | None = None,
    ) -> None:
        self.url = url
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.max_outage = max_outage
        self.on_reconnect = on_reconnect
        #: Connections replaced by :meth:`reconnect` so far.
        self.reconnects = 0
        self._reconnect_lock = asyncio.Lock()
        self._generation = 0
        self.client_id = client_id or f"matchcast-{uuid.uuid4().hex[:12]}"
        self._protocol = protocol
        self._will = will
        self._clean_start = clean_start
        self._session_expiry = session_expiry
        self._keepalive = keepalive
        self._timeout = connect_timeout
        self._max_inflight = max_inflight
        try:
            self._tls = tls_context if tls_context is not None else url.context()
        except ValueError as err:
            raise BrokerError(str(url), str(err)) from err
        self._client: aiomqtt.Client | None = None
        self.protocol_version: Literal["5", "3.1.1"] | None = None

    def _make(self, version: Literal["5", "3.1.1"]) -> aiomqtt.Client:
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
            kwargs["clean_start"] = self._clean_start
        else:
            kwargs["clean_session"] = self._clean_start
        client = aiomqtt.Client(
            self.url.host,
            self.url.port,
            username=self.url.username,
            password=self.url.password,
            identifier=self.client_id,
            protocol=aiomqtt.ProtocolVersion.V5 if v5 else aiomqtt.ProtocolVersion.V311,
            will=will,
            timeout=self._timeout,
            keepalive=self._keepalive,
            max_inflight_messages=self._max_inflight,
            properties=props,
            tls_context=self._tls,
            **kwargs,
        )
        client.pending_calls_threshold = 1_000_000  # we bound in-flight calls ourselves
        return client

    async def _probe_v5(self) -> bool:
        """Whether the broker accepts MQTT 5, asked once per broker address.

        A will in a v5 CONNECT makes amqtt's 3.1.1 parser hang instead of refusing, so a
        client with a will asks with a bare CONNECT first.
        """
        key = (self.url.host, self.url.port)
        if key not in _V5_SUPPORT:
            probe = MqttClient(
                self.url, protocol="5", connect_timeout=self._timeout, tls_context=self._tls
            )
            try:
                async with probe:
                    _V5_SUPPORT[key] = True
            except BrokerError as err:
                if "protocol" not in err.reason.lower():
                    raise
                _V5_SUPPORT[key] = False
        return _V5_SUPPORT[key]

    async def __aenter__(self) -> Self:
        await self._connect()
        return self

    async def _connect(self) -> None:
        versions: list[Literal["5", "3.1.1"]] = (
            ["5", "3.1.1"] if self._protocol == "auto" else [self._protocol]
        )
        if self._protocol == "auto" and self._will is not None and not await self._probe_v5():
            versions = ["3.1.1"]
        last: Exception | None = None
        for version in versions:
            client = self._make(version)
            try:
                await client.__aenter__()
            except MqttConnectError as err:
                last = err
                if (
                    version == "5"
                    and self._protocol == "auto"
                    and "protocol" in str(err.rc).lower()
                ):
                    _log.info("broker.v5_refused", broker=str(self.url), fallback="3.1.1")
                    continue
                raise BrokerError(
                    str(self.url), f"connection refused: {err.rc}{_hint(err)}"
                ) from err
            except aiomqtt.MqttError as err:
                raise BrokerError(
                    str(self.url), f"cannot connect: {err}{_hint(err, tls=self.url.tls)}"
                ) from err
            self._client = client
            self.protocol_version = version
            _log.debug(
                "broker.connected", broker=str(self.url), protocol=version, client_id=self.client_id
            )
            return
        raise BrokerError(str(self.url), f"connection refused: {last}")

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

    async def reconnect(self) -> None:
        """Replace a lost connection, retrying with exponential backoff and full jitter.

        Waits ``backoff_initial`` doubling up to ``backoff_max`` seconds between attempts (each
        a random fraction of that, so many clients do not return at once), and calls
        ``on_reconnect`` once connected.

        Raises:
            BrokerError: still unreachable after ``max_outage`` seconds.
        """
        generation = self._generation
        async with self._reconnect_lock:
            if self._generation != generation:
                return  # another task replaced the connection while this one waited
            await self._replace()
            self._generation += 1

    async def _replace(self) -> None:
        old, self._client = self._client, None
        if old is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(old.__aexit__(None, None, None), timeout=1)
        started = time.monotonic()
        delay = self.backoff_initial
        attempt = 0
        while True:
            attempt += 1
            await asyncio.sleep(random.uniform(0, delay))
            try:
                await self._connect()
            except BrokerError as err:
                waited = time.monotonic() - started
                _log.warning(
                    "broker.reconnect_failed",
                    broker=str(self.url),
                    attempt=attempt,
                    reason=err.reason,
                    outage_s=round(waited, 2),
                )
                if waited > self.max_outage:
                    raise BrokerError(
                        str(self.url), f"unreachable for {waited:.0f}s, giving up: {err.reason}"
                    ) from err
                delay = min(delay * 2, self.backoff_max)
                continue
            self.reconnects += 1
            _log.info(
                "broker.reconnected",
                broker=str(self.url),
                attempt=attempt,
                outage_s=round(time.monotonic() - started, 3),
            )
            if self.on_reconnect is not None:
                await self.on_reconnect(self)
            return

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
            BrokerError: the connection is gone or the publish timed out.
        """
        properties = _properties(props) if self.is_v5 else None
        try:
            await self._c.publish(topic, payload, qos=qos, retain=retain, properties=properties)
        except aiomqtt.MqttError as err:
            raise BrokerError(str(self.url), f"publish to {topic!r} failed: {err}") from err

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
        """Subscribe and wait for the SUBACK.

        Raises:
            BrokerError: the broker refused it or the connection is gone.
        """
        try:
            result = await self._c.subscribe(topic_filter, qos=qos)
        except aiomqtt.MqttError as err:
            raise BrokerError(
                str(self.url), f"subscribe to {topic_filter!r} failed: {err}"
            ) from err
        codes = [r if isinstance(r, int) else int(r.value) for r in result]
        if any(c >= 0x80 for c in codes):
            raise BrokerError(
                str(self.url), f"subscribe to {topic_filter!r} refused (code {codes})"
            )

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


def broker_url_from(
    option: str | None, environ: Mapping[str, str] | None = None
) -> BrokerURL | None:
    """The broker from ``--broker``, else ``$MATCHCAST_BROKER``, else None (embedded).

    ``$MATCHCAST_USERNAME`` and ``$MATCHCAST_PASSWORD`` fill in what the URL leaves out, and
    ``$MATCHCAST_CA_FILE``, ``_CERT_FILE``, ``_KEY_FILE`` give the TLS files of an ``mqtts://``
    broker.

    Raises:
        ValueError: a bad URL, a password without a user name, or TLS files for a broker
            that is not ``mqtts://``.
    """
    env = os.environ if environ is None else environ
    raw = option or env.get(ENV_BROKER)
    if not raw:
        return None
    url = BrokerURL.parse(raw).with_credentials(
        env.get(ENV_USERNAME) or None, env.get(ENV_PASSWORD) or None
    )
    if url.password and not url.username:
        raise ValueError(
            f"a password is set but no user name: put it in the URL (mqtt://USER@host) "
            f"or in ${ENV_USERNAME}"
        )
    from_env = TLSOptions.from_env(env)
    if from_env.given and not url.tls:
        raise ValueError(
            f"${ENV_CA_FILE}/${ENV_CERT_FILE}/${ENV_KEY_FILE} are set but the broker {url} "
            "is not TLS: use mqtts://"
        )
    return url.with_tls(from_env)
