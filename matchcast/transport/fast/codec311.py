"""MQTT 3.1.1 for the fast client: :mod:`matchcast.transport.mqtt311`'s packets as
:class:`~matchcast.transport.fast.packets.Codec` speaks them."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from events import Message
from matchcast.transport import mqtt311
from matchcast.transport.fast.packets import (
    ConnAck,
    Control,
    Inbound,
    PingResp,
    PubRec,
    PubRel,
    SubAck,
    Unexpected,
    UnsubAck,
)

if TYPE_CHECKING:
    from events import MessageProps
    from matchcast.transport.connection import WillSpec

__all__ = ["CODEC", "Codec311", "decode_connack", "frame_connack"]

#: Makes a Message without the named tuple's keyword-handling ``__new__`` (a third the cost).
_new = tuple.__new__
_PINGREQ = mqtt311.PingReq().encode()
_PINGRESP = PingResp()
_DISCONNECT = mqtt311.Disconnect().encode()
#: The first byte of a PUBACK and a PUBCOMP (flags 0; anything else goes to the strict decoder).
_SETTLES = {0x40: "PUBACK", 0x70: "PUBCOMP"}


def _control(packet: mqtt311.Packet) -> Control:
    """The common shape of a packet other than PUBLISH, PUBACK and PUBCOMP."""
    if type(packet) is mqtt311.PubRec:
        return _new(PubRec, (packet.packet_id, 0))
    if type(packet) is mqtt311.PubRel:
        return PubRel(packet.packet_id)
    if type(packet) is mqtt311.SubAck:
        return SubAck(packet.packet_id, packet.codes)
    if type(packet) is mqtt311.UnsubAck:
        return UnsubAck(packet.packet_id)
    if type(packet) is mqtt311.PingResp:
        return _PINGRESP
    if type(packet) is mqtt311.ConnAck:
        return ConnAck(packet.session_present, packet.code, 0, True)
    # CONNECT, SUBSCRIBE, UNSUBSCRIBE, PINGREQ, and DISCONNECT: 3.1.1 has no broker-sent one.
    return Unexpected(type(packet).__name__.upper())


def frame_connack(buf: bytes) -> tuple[int, int] | None:
    """Where the body of the CONNACK at the start of ``buf`` starts and ends (either version:
    the framing is the same); None until it is whole.

    Raises:
        MalformedPacketError: the first packet is not a CONNACK.
    """
    found = mqtt311.frame(buf)
    if found is None:
        return None
    first, start, end = found
    if first != 0x20:
        raise mqtt311.MalformedPacketError(f"packet {first:#x} before the CONNACK")
    return start, end


def decode_connack(buf: bytes, start: int, end: int) -> ConnAck:
    """The 3.1.1-shaped CONNACK framed at ``buf[start:end]`` (flags, return code).

    Raises:
        MalformedPacketError: not two bytes, or a malformed one.
    """
    packet = mqtt311.decode(0x20, buf, start, end)
    assert isinstance(packet, mqtt311.ConnAck)
    return ConnAck(packet.session_present, packet.code, 0, True)


class Codec311:
    """MQTT 3.1.1 (OASIS, 2014), on :mod:`matchcast.transport.mqtt311`."""

    version: Literal["5", "3.1.1"] = "3.1.1"

    def read(self, buf: bytes, deliver: Callable[[Message], None], inbound: Inbound) -> int:
        """See :meth:`matchcast.transport.fast.packets.Codec.read`."""
        frame, decode_publish, decode = mqtt311.frame, mqtt311.decode_publish, mqtt311.decode
        acknowledge, settle, control = inbound.acknowledge, inbound.settle, inbound.control
        end = len(buf)
        off = 0
        while off < end:
            found = frame(buf, off)
            if found is None:
                break  # an incomplete packet: wait for the rest
            first, start, stop = found
            if first >> 4 == 3:
                p = decode_publish(first, buf, start, stop)
                if p.qos:
                    assert p.packet_id is not None
                    acknowledge(_new(Message, (p.topic, p.payload, p.qos, p.retain)), p.packet_id)
                else:
                    deliver(_new(Message, (p.topic, p.payload, 0, p.retain)))
            elif first in _SETTLES and stop - start == 2:  # PUBACK, PUBCOMP: 2 bytes of id
                pid = buf[start] << 8 | buf[start + 1]
                if not pid:
                    raise mqtt311.MalformedPacketError(f"{_SETTLES[first]} with packet id 0")
                settle(pid, 0)
            else:
                control(_control(decode(first, buf, start, stop)))
            off = stop
        return off

    def connack(self, buf: bytes) -> tuple[ConnAck, int] | None:
        """See :meth:`matchcast.transport.fast.packets.Codec.connack`."""
        found = frame_connack(buf)
        if found is None:
            return None
        start, end = found
        return decode_connack(buf, start, end), end

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
        """See :meth:`matchcast.transport.fast.packets.Codec.connect`."""
        return mqtt311.Connect(
            client_id,
            clean_session=clean_start,
            keepalive=keepalive,
            will=None
            if will is None
            else mqtt311.Will(will.topic, will.payload, will.qos, will.retain),
            username=username,
            password=password.encode() if password is not None else None,
        ).encode()

    def publish(
        self,
        topic: str,
        payload: bytes,
        qos: int,
        retain: bool,
        packet_id: int | None,
        props: MessageProps | None,
    ) -> bytes:
        """See :meth:`matchcast.transport.fast.packets.Codec.publish`."""
        return mqtt311.encode_publish(topic, payload, qos, retain, packet_id)

    def puback(self, packet_id: int) -> bytes:
        """PUBACK."""
        return mqtt311.PubAck(packet_id).encode()

    def pubrec(self, packet_id: int) -> bytes:
        """PUBREC."""
        return mqtt311.PubRec(packet_id).encode()

    def pubrel(self, packet_id: int) -> bytes:
        """PUBREL."""
        return mqtt311.PubRel(packet_id).encode()

    def pubcomp(self, packet_id: int) -> bytes:
        """PUBCOMP."""
        return mqtt311.PubComp(packet_id).encode()

    def subscribe(self, packet_id: int, topic_filter: str, qos: int) -> bytes:
        """SUBSCRIBE to one filter."""
        return mqtt311.Subscribe(packet_id, ((topic_filter, qos),)).encode()

    def pingreq(self) -> bytes:
        """PINGREQ."""
        return _PINGREQ

    def disconnect(self, code: int = 0) -> bytes:
        """DISCONNECT."""
        return _DISCONNECT

    def connack_reason(self, code: int) -> str:
        """See :data:`matchcast.transport.mqtt311.CONNACK_REASONS`."""
        return mqtt311.CONNACK_REASONS.get(code, f"code {code}")

    def ack_reason(self, code: int) -> str:
        """3.1.1 acknowledges without a reason; a refused publish is dropped silently."""
        return f"code {code}"


#: The one 3.1.1 codec (it keeps no state).
CODEC = Codec311()
