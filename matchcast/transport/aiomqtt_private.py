"""What the aiomqtt client needs of aiomqtt 2.x and paho that they do not offer publicly: every
such use, in one place, each checked.

aiomqtt 2.5's public API has no way to learn the CONNACK's session-present flag, a publish's
reason code (so a publish an ACL refuses, 0x87, would look delivered), or the end of a
connection while nothing reads its messages. paho, underneath, gives the first two through its
public API: the ``on_connect`` and ``on_publish`` callbacks, and ``publish()``, which returns
the message id; :class:`PahoHooks` uses them. Three uses are private, and only three:

1. ``aiomqtt.Client._client``, the paho client itself (:func:`paho_client`). aiomqtt sets its
   own ``on_connect`` on it when it is made; the hook calls it on. ``on_publish`` is the
   hooks' alone: publishes go through paho, not aiomqtt's ``publish()``.
2. ``aiomqtt.Client._disconnected``, the future aiomqtt ends when the connection does
   (:func:`disconnected`): by paho's ``on_disconnect``, or when reading or writing the socket
   raised, which paho's callbacks never hear of. Its messages iterator ends on it, but only
   while it is read.
3. :class:`PackedProperties`: a ``paho.mqtt.properties.Properties`` holding MQTT 5 PUBLISH
   properties already encoded, because paho's generic packer costs about 20 times what
   encoding the three properties matchcast sends does (91 us against 4 us a message here,
   ``python -m timeit``; docs/benchmarks.md: a replay reached 0.57x the raw loop with it). It
   relies on paho calling nothing but ``pack()`` on a PUBLISH's properties (and ``str()``,
   for its debug log), and sets its field past ``Properties.__setattr__``, which only takes
   property names.

Each is pinned by one test in ``tests/test_aiomqtt_private.py`` that fails with a message
naming the attribute and the versions; :func:`paho_client` and :func:`disconnected` fail the
same way at run time (:class:`PrivateAPIError`) rather than with an ``AttributeError`` deep in
a callback. The versions they were written for are :data:`WRITTEN_FOR`, the bounds of both
in pyproject.toml.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
from typing import TYPE_CHECKING, Any

import aiomqtt
from paho.mqtt.client import Client as PahoClient
from paho.mqtt.client import ConnectFlags, MQTTMessageInfo, error_string
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from events import BrokerError, ConnectionLostError, MessageProps
from matchcast.transport.mqtt311 import encode_string, encode_varint

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "WRITTEN_FOR",
    "PackedProperties",
    "PahoHooks",
    "PrivateAPIError",
    "connect_properties",
    "disconnected",
    "encode_properties",
    "installed",
    "paho_client",
    "will_properties",
]

#: The versions of aiomqtt and paho-mqtt these private uses were written and tested against
#: (pyproject.toml bounds both to them).
WRITTEN_FOR = "aiomqtt >=2.5,<3 and paho-mqtt >=2.1,<3"


class PrivateAPIError(RuntimeError):
    """aiomqtt or paho no longer has a private part matchcast uses: an upgrade past the versions
    :data:`WRITTEN_FOR` names."""


def installed() -> str:
    """The versions installed, for an error message."""
    return ", ".join(
        f"{name} {importlib.metadata.version(name)}" for name in ("aiomqtt", "paho-mqtt")
    )


def paho_client(client: aiomqtt.Client) -> PahoClient:
    """aiomqtt's paho client (``aiomqtt.Client._client``: private use 1).

    Raises:
        PrivateAPIError: aiomqtt no longer keeps one there, or no longer sets its own
            ``on_connect`` on it.
    """
    paho = getattr(client, "_client", None)
    if not isinstance(paho, PahoClient):
        raise PrivateAPIError(
            f"aiomqtt.Client._client is not a paho.mqtt.client.Client ({installed()}; "
            f"matchcast's aiomqtt client was written for {WRITTEN_FOR}): see "
            "matchcast/transport/aiomqtt_private.py"
        )
    if paho.on_connect is None:
        raise PrivateAPIError(
            f"aiomqtt no longer sets its on_connect on its paho client "
            f"(aiomqtt.Client._client; {installed()}; written for {WRITTEN_FOR})"
        )
    return paho


def disconnected(client: aiomqtt.Client) -> asyncio.Future[None]:
    """The future aiomqtt ends with the connection (``aiomqtt.Client._disconnected``: private
    use 2): a result when closed cleanly, an exception when lost.

    Raises:
        PrivateAPIError: aiomqtt no longer keeps one there.
    """
    lost = getattr(client, "_disconnected", None)
    if not isinstance(lost, asyncio.Future):
        raise PrivateAPIError(
            f"aiomqtt.Client._disconnected is not an asyncio.Future ({installed()}; "
            f"matchcast's aiomqtt client was written for {WRITTEN_FOR}): see "
            "matchcast/transport/aiomqtt_private.py"
        )
    return lost


class PahoHooks:
    """What aiomqtt keeps to itself, learnt from its paho client: the session-present flag, and
    each publish's reason code; and the end of the connection, from aiomqtt.

    Publishes go through paho's public ``publish()`` (:meth:`publish`), for the message id
    that aiomqtt's ``publish`` does not return; ``on_publish`` is this class's alone.
    """

    def __init__(self, client: aiomqtt.Client, where: str, timeout: float) -> None:
        self.client = client
        self.paho = paho_client(client)
        disconnected(client)  # checked now, not on the first loss
        self.where = where
        #: Seconds a publish waits for its acknowledgement.
        self.timeout = timeout
        #: The CONNACK's flag, once connected.
        self.session_present = False
        self._acks: dict[int, asyncio.Future[ReasonCode]] = {}
        #: Set while paho.publish() runs: an on_publish then is for the publish being made.
        self._publishing: dict[int, ReasonCode] | None = None
        on_connect = self.paho.on_connect
        assert on_connect is not None
        self._aiomqtt_on_connect: Callable[..., None] = on_connect
        self.paho.on_connect = self._on_connect
        self.paho.on_publish = self._on_publish

    @property
    def lost(self) -> asyncio.Future[None]:
        """Done when the connection ends: a result when closed cleanly, an exception (an
        ``aiomqtt.MqttError``) when lost."""
        return disconnected(self.client)

    def connected(self) -> None:
        """The connection is up: fail what is in flight at once when it ends, rather than after
        the whole publish timeout."""
        self.lost.add_done_callback(self._fail_pending)

    def _fail_pending(self, lost: asyncio.Future[None]) -> None:
        failure = None if lost.cancelled() else lost.exception()
        err = (
            ConnectionLostError(self.where, f"connection lost: {failure}")
            if failure is not None
            else BrokerError(self.where, "connection closed")
        )
        for fut in self._acks.values():
            if not fut.done():
                fut.set_exception(err)
        self._acks.clear()

    def _on_connect(
        self,
        client: PahoClient,
        userdata: Any,
        flags: ConnectFlags,
        reason_code: ReasonCode,
        properties: Properties | None,
    ) -> None:
        self.session_present = bool(flags.session_present)
        self._aiomqtt_on_connect(client, userdata, flags, reason_code, properties)

    def _on_publish(
        self,
        client: PahoClient,
        userdata: Any,
        mid: int,
        reason_code: ReasonCode,
        properties: Properties | None,
    ) -> None:
        fut = self._acks.pop(mid, None)
        if fut is not None:
            if not fut.done():
                fut.set_result(reason_code)
        elif self._publishing is not None:
            self._publishing[mid] = reason_code

    async def publish(
        self,
        topic: str,
        payload: bytes,
        qos: int,
        retain: bool,
        properties: Properties | None,
    ) -> ReasonCode:
        """Publish through paho and wait :attr:`timeout` seconds at most for it to be written
        (QoS 0) or acknowledged; the PUBACK's (or PUBREC's) reason code.

        Raises:
            ConnectionLostError: the connection ended first.
            BrokerError: paho refused to send it, or no acknowledgement came in time.
        """
        lost = self.lost
        if lost.done():
            failure = None if lost.cancelled() else lost.exception()
            raise ConnectionLostError(self.where, f"connection lost: {failure or 'closed'}")
        early: dict[int, ReasonCode] = {}
        self._publishing = early
        try:
            info: MQTTMessageInfo = self.paho.publish(topic, payload, qos, retain, properties)
        finally:
            self._publishing = None
        if info.rc:
            raise BrokerError(self.where, f"publish to {topic!r} failed: {error_string(info.rc)}")
        if info.mid in early:
            return early[info.mid]
        fut: asyncio.Future[ReasonCode] = asyncio.get_running_loop().create_future()
        self._acks[info.mid] = fut
        timeout = self.timeout
        try:
            async with asyncio.timeout(timeout):
                return await fut
        except TimeoutError:
            raise BrokerError(
                self.where, f"publish to {topic!r} failed: no acknowledgement within {timeout:g}s"
            ) from None
        finally:
            if self._acks.get(info.mid) is fut:
                del self._acks[info.mid]


class PackedProperties(Properties):
    """MQTT 5 PUBLISH properties encoded once, by :func:`encode_properties` (private use 2).

    paho calls only ``pack()`` on the properties of a publish; its own packer costs about 20
    times this encoding. ``Properties.__setattr__`` takes only property names, so the one
    field is set past it, and ``Properties.__init__`` is not run (its fields would be
    unused).
    """

    def __init__(self, packed: bytes) -> None:
        object.__setattr__(self, "packetType", PacketTypes.PUBLISH)
        object.__setattr__(self, "_packed", packed)

    def pack(self) -> bytes:
        """The encoded properties, length prefix included."""
        packed: bytes = object.__getattribute__(self, "_packed")
        return packed

    def __str__(self) -> str:
        # paho names the properties in its debug log line of each PUBLISH: Properties'
        # own __str__ reads the fields __init__ was not there to set.
        return f"[packed: {self.pack().hex()}]"


_CONTENT_TYPE, _EXPIRY, _USER = 0x03, 0x02, 0x26


def will_properties(expiry: int | None) -> Properties | None:
    """The properties of an MQTT 5 will (paho's public ``Properties``): its message expiry."""
    if expiry is None:
        return None
    props = Properties(PacketTypes.WILLMESSAGE)  # type: ignore[no-untyped-call]
    props.MessageExpiryInterval = expiry
    return props


def connect_properties(session_expiry: int | None) -> Properties | None:
    """The properties of an MQTT 5 CONNECT (paho's public ``Properties``): the session expiry."""
    if session_expiry is None:
        return None
    props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call] # paho's is not typed
    props.SessionExpiryInterval = session_expiry
    return props


def encode_properties(props: MessageProps | None) -> PackedProperties | None:
    """The properties of an MQTT 5 PUBLISH (section 3.3.2.3): a variable byte integer length,
    then identifier and value pairs, as paho's ``Properties.pack()`` would give them."""
    if props is None:
        return None
    body = bytearray()
    if props.message_expiry is not None:
        body += bytes([_EXPIRY]) + props.message_expiry.to_bytes(4, "big")
    if props.content_type:
        body += bytes([_CONTENT_TYPE]) + encode_string(props.content_type)
    for key, value in props.user:
        body += bytes([_USER]) + encode_string(key) + encode_string(value)
    return PackedProperties(encode_varint(len(body)) + bytes(body))
