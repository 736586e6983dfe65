"""MQTT 5 for the fast client, on the Rust ``mqtt5`` codec: the one module that imports it.

Why ``mqtt5`` and what would replace it: docs/architecture.md, "MQTT clients".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

import mqtt5

from events import Message
from matchcast.transport import mqtt311
from matchcast.transport.fast.codec311 import decode_connack, frame_connack
from matchcast.transport.fast.packets import (
    ConnAck,
    Control,
    Disconnect,
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

__all__ = ["CODEC", "Codec5"]

_QOS = (mqtt5.QoS.AT_MOST_ONCE, mqtt5.QoS.AT_LEAST_ONCE, mqtt5.QoS.EXACTLY_ONCE)
_new = tuple.__new__
_PINGREQ = mqtt5.PingReqPacket().write()
_PINGRESP = PingResp()


def _name(code: int, names: type[mqtt5.ConnAckReasonCode | mqtt5.PubAckReasonCode]) -> str:
    try:
        return names(code).name.replace("_", " ").capitalize()
    except (ValueError, OverflowError):
        return f"code {code:#x}"


def _disconnect_name(code: int) -> str:
    try:
        return mqtt5.DisconnectReasonCode(code).name.replace("_", " ").lower()
    except (ValueError, OverflowError):
        return f"code {code:#x}"


def _control(packet: mqtt5.Packet) -> Control:
    """The common shape of a packet other than PUBLISH, PUBACK and PUBCOMP."""
    if type(packet) is mqtt5.PubRecPacket:
        return _new(PubRec, (packet.packet_id, int(packet.reason_code)))
    if type(packet) is mqtt5.PubRelPacket:
        return PubRel(packet.packet_id)
    if type(packet) is mqtt5.SubAckPacket:
        return SubAck(packet.packet_id, tuple(int(c) for c in packet.reason_codes))
    if type(packet) is mqtt5.UnsubAckPacket:
        return UnsubAck(packet.packet_id)
    if type(packet) is mqtt5.PingRespPacket:
        return _PINGRESP
    if type(packet) is mqtt5.DisconnectPacket:
        code = int(packet.reason_code)
        return Disconnect(code, packet.reason_str or _disconnect_name(code))
    if type(packet) is mqtt5.ConnAckPacket:
        return _connack(packet)
    # CONNECT, SUBSCRIBE, UNSUBSCRIBE, PINGREQ; AUTH, since this client asks for no
    # enhanced authentication.
    return Unexpected(type(packet).__name__.removesuffix("Packet").upper())


def _connack(packet: mqtt5.ConnAckPacket) -> ConnAck:
    return ConnAck(packet.session_present, int(packet.reason_code), packet.receive_max, False)


class Codec5:
    """MQTT 5, on the ``mqtt5`` package (Rust)."""

    version: Literal["5", "3.1.1"] = "5"

    def read(self, buf: bytes, deliver: Callable[[Message], None], inbound: Inbound) -> int:
        """See :meth:`matchcast.transport.fast.packets.Codec.read`."""
        view = memoryview(buf)
        end = len(buf)
        off = 0
        read, publish, at_most_once = mqtt5.read, mqtt5.PublishPacket, mqtt5.QoS.AT_MOST_ONCE
        puback, pubcomp = mqtt5.PubAckPacket, mqtt5.PubCompPacket
        acknowledge, settle, control = inbound.acknowledge, inbound.settle, inbound.control
        try:
            while off < end:
                try:
                    packet, used = read(view[off:])
                except IndexError:
                    break  # an incomplete packet: wait for the rest
                except ValueError as err:
                    raise mqtt311.MalformedPacketError(str(err)) from None
                off += used
                if type(packet) is publish:
                    qos = packet.qos
                    if qos == at_most_once:
                        deliver(_new(Message, (packet.topic, packet.payload, 0, packet.retain)))
                    else:
                        message = _new(
                            Message, (packet.topic, packet.payload, int(qos), packet.retain)
                        )
                        acknowledge(message, packet.packet_id)  # type: ignore[arg-type]
                elif type(packet) is puback or type(packet) is pubcomp:
                    settle(packet.packet_id, int(packet.reason_code))
                else:
                    control(_control(packet))
        finally:
            view.release()
        return off

    def connack(self, buf: bytes) -> tuple[ConnAck, int] | None:
        """See :meth:`matchcast.transport.fast.packets.Codec.connack`: either shape, since a
        3.1.1-only broker answers an MQTT 5 CONNECT with a 3.1.1 CONNACK (NATS: code 1)."""
        found = frame_connack(buf)
        if found is None:
            return None
        start, end = found
        if end - start == 2:
            return decode_connack(buf, start, end), end
        try:
            packet, used = mqtt5.read(memoryview(buf)[:end])
        except (ValueError, IndexError) as err:
            raise mqtt311.MalformedPacketError(f"CONNACK: {err}") from None
        assert isinstance(packet, mqtt5.ConnAckPacket)
        return _connack(packet), used

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
        return mqtt5.ConnectPacket(
            client_id,
            username=username,
            password=password.encode() if password else None,
            clean_start=clean_start,
            keep_alive=keepalive,
            session_expiry_interval=session_expiry or 0,
            will=None
            if will is None
            else mqtt5.Will(
                will.topic,
                payload=will.payload,
                qos=_QOS[will.qos],
                retain=will.retain,
                message_expiry_interval=will.expiry,
            ),
        ).write()

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

    def puback(self, packet_id: int) -> bytes:
        """PUBACK."""
        return mqtt5.PubAckPacket(packet_id).write()

    def pubrec(self, packet_id: int) -> bytes:
        """PUBREC."""
        return mqtt5.PubRecPacket(packet_id).write()

    def pubrel(self, packet_id: int) -> bytes:
        """PUBREL."""
        return mqtt5.PubRelPacket(packet_id).write()

    def pubcomp(self, packet_id: int) -> bytes:
        """PUBCOMP."""
        return mqtt5.PubCompPacket(packet_id).write()

    def subscribe(self, packet_id: int, topic_filter: str, qos: int) -> bytes:
        """SUBSCRIBE to one filter."""
        flt = mqtt5.TopicFilter(topic_filter, max_qos=_QOS[qos])
        return mqtt5.SubscribePacket(packet_id, [flt]).write()

    def pingreq(self) -> bytes:
        """PINGREQ."""
        return _PINGREQ

    def disconnect(self, code: int = 0) -> bytes:
        """DISCONNECT with reason ``code``."""
        return mqtt5.DisconnectPacket(reason_code=mqtt5.DisconnectReasonCode(code)).write()

    def connack_reason(self, code: int) -> str:
        """The name of a CONNACK reason code, in lower case."""
        return _name(code, mqtt5.ConnAckReasonCode).lower()

    def ack_reason(self, code: int) -> str:
        """The name of a PUBACK or PUBREC reason code (``Not authorized``)."""
        return _name(code, mqtt5.PubAckReasonCode)


#: The one MQTT 5 codec (it keeps no state).
CODEC = Codec5()
