"""What the fast client's one state machine reads and writes, in either MQTT version.

A codec per version (:mod:`.codec5` on the Rust ``mqtt5`` package, :mod:`.codec311` on
:mod:`matchcast.transport.mqtt311`) turns the broker's bytes into the shapes below and
encodes what the client sends; :class:`matchcast.transport.fast.link.Link` is written once,
against :class:`Codec`.

Inbound, the packets that come once per message take the shortest way, with no shape in
between: a PUBLISH becomes the :class:`events.Message` it delivers, which goes straight to the
reader at QoS 0 (``deliver``) and to :meth:`Inbound.acknowledge` with its packet id at QoS 1
or 2; a PUBACK or PUBCOMP is a packet id and a reason code for :meth:`Inbound.settle`. Every
other packet becomes one of the named tuples of :data:`Control` and goes to
:meth:`Inbound.control`. (A named tuple per acknowledgement cost a QoS 1 publisher 8 % more
CPU per message, measured with benchmarks/codec_bench.py.) A codec keeps no state: which
packet may come when is the state machine's to know.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, NamedTuple, Protocol

if TYPE_CHECKING:
    from events import Message, MessageProps
    from matchcast.transport.connection import WillSpec

__all__ = [
    "MALFORMED_PACKET",
    "PROTOCOL_ERROR",
    "Codec",
    "ConnAck",
    "Control",
    "Disconnect",
    "Inbound",
    "PingResp",
    "ProtocolViolationError",
    "PubRec",
    "PubRel",
    "SubAck",
    "Unexpected",
    "UnsubAck",
]

#: The MQTT 5 DISCONNECT reason codes of a violation (section 4.13): bytes that are not a
#: packet, and a well-formed packet that may not come (from a broker, or at this point).
MALFORMED_PACKET = 0x81
PROTOCOL_ERROR = 0x82


class ConnAck(NamedTuple):
    """CONNACK: ``code`` 0 accepts; ``v311`` for the 3.1.1 shape (also what a 3.1.1-only
    broker answers to an MQTT 5 CONNECT), which has no receive maximum (0)."""

    session_present: bool
    code: int
    receive_max: int
    v311: bool


class PubRec(NamedTuple):
    """PUBREC: QoS 2, part 1; a ``code`` of 0x80 or more refuses the message (MQTT 5)."""

    packet_id: int
    code: int = 0


class PubRel(NamedTuple):
    """PUBREL: QoS 2, part 2 (the broker releases a message it sent us)."""

    packet_id: int


class SubAck(NamedTuple):
    """SUBACK: the granted QoS (0-2) or a refusal (0x80 or more) per filter."""

    packet_id: int
    codes: tuple[int, ...]


class UnsubAck(NamedTuple):
    """UNSUBACK."""

    packet_id: int


class PingResp(NamedTuple):
    """PINGRESP."""


class Disconnect(NamedTuple):
    """DISCONNECT from the broker (MQTT 5 only; 3.1.1 has none): ``reason`` names ``code``."""

    code: int
    reason: str


class Unexpected(NamedTuple):
    """A well-formed packet a broker never sends in this version (CONNECT, SUBSCRIBE, PINGREQ,
    a 3.1.1 DISCONNECT, an MQTT 5 AUTH when no enhanced authentication was asked for)."""

    name: str


#: Every packet but a PUBLISH, as the state machine sees it.
Control = ConnAck | PubRec | PubRel | SubAck | UnsubAck | PingResp | Disconnect | Unexpected


class ProtocolViolationError(Exception):
    """The broker sent a well-formed packet that may not come: from a broker, or at this
    point of the exchange. ``code`` is the MQTT 5 DISCONNECT reason to answer with."""

    def __init__(self, reason: str, code: int = PROTOCOL_ERROR) -> None:
        super().__init__(reason)
        self.reason = reason
        self.code = code


class Inbound(Protocol):
    """Where a codec hands what it decoded: the state machine."""

    def acknowledge(self, message: Message, packet_id: int) -> None:
        """A QoS 1 or 2 PUBLISH: acknowledge it, and deliver it unless it is a resend."""

    def settle(self, packet_id: int, code: int) -> None:
        """A PUBACK or PUBCOMP: the publish under ``packet_id`` is done, or refused (MQTT 5:
        ``code`` 0x80 or more)."""

    def control(self, packet: Control) -> None:
        """Any packet but a PUBLISH, PUBACK or PUBCOMP.

        Raises:
            ProtocolViolationError: the packet may not come.
        """


class Codec(Protocol):
    """One MQTT version's packets, both ways. Encoders return a whole packet's bytes."""

    #: The version this codec speaks.
    version: Literal["5", "3.1.1"]

    def read(self, buf: bytes, deliver: Callable[[Message], None], inbound: Inbound) -> int:
        """Decode every whole packet at the start of ``buf``, in order: a QoS 0 PUBLISH to
        ``deliver``, a QoS 1 or 2 one to ``inbound.acknowledge``, a PUBACK or PUBCOMP to
        ``inbound.settle``, anything else to ``inbound.control``.

        Returns:
            The bytes used; the rest is the start of a packet still arriving.

        Raises:
            matchcast.transport.mqtt311.MalformedPacketError: bytes that are not a packet of
                this version (what came before them has been handed over).
            ProtocolViolationError: from ``inbound.control``.
        """
        ...

    def connack(self, buf: bytes) -> tuple[ConnAck, int] | None:
        """The CONNACK at the start of ``buf`` and its length; None until it is whole.

        Raises:
            matchcast.transport.mqtt311.MalformedPacketError: not a CONNACK.
        """
        ...

    def connect(
        self,
        client_id: str,
        *,
        clean_start: bool,
        keepalive: int,
        will: WillSpec | None,
        username: str | None,
        password: str | None,
        session_expiry: int | None,
    ) -> bytes:
        """CONNECT (``session_expiry`` is MQTT 5's; 3.1.1 keeps a session until it is cleaned)."""
        ...

    def publish(
        self,
        topic: str,
        payload: bytes,
        qos: int,
        retain: bool,
        packet_id: int | None,
        props: MessageProps | None,
    ) -> bytes:
        """PUBLISH (``props`` are dropped in 3.1.1, which has none)."""
        ...

    def puback(self, packet_id: int) -> bytes:
        """PUBACK."""
        ...

    def pubrec(self, packet_id: int) -> bytes:
        """PUBREC."""
        ...

    def pubrel(self, packet_id: int) -> bytes:
        """PUBREL."""
        ...

    def pubcomp(self, packet_id: int) -> bytes:
        """PUBCOMP."""
        ...

    def subscribe(self, packet_id: int, topic_filter: str, qos: int) -> bytes:
        """SUBSCRIBE to one filter."""
        ...

    def pingreq(self) -> bytes:
        """PINGREQ."""
        ...

    def disconnect(self, code: int = 0) -> bytes:
        """DISCONNECT (``code`` is MQTT 5's; 3.1.1's DISCONNECT has none)."""
        ...

    def connack_reason(self, code: int) -> str:
        """What a CONNACK's code means, in lower case (``bad user name or password``)."""
        ...

    def ack_reason(self, code: int) -> str:
        """What a PUBACK's or PUBREC's refusal means (``Not authorized``)."""
        ...
