"""The fast client's one state machine against brokers that break the rules, in both versions:
a packet a broker may not send, a refused publish, an acknowledgement of nothing in flight.

Fake brokers on loopback: no mosquitto needed, each test a fraction of a second."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Literal

import mqtt5
import pytest
from structlog.testing import capture_logs

from events import ConnectionLostError, Message, PublishRefusedError
from matchcast.transport import mqtt311
from matchcast.transport.fastmqtt import FastClient
from tests._fake_broker import fake_broker, read_packet

Version = Literal["5", "3.1.1"]
PROTOCOLS: list[Version] = ["5", "3.1.1"]


def _connack(protocol: Version, receive_max: int = 65535) -> bytes:
    if protocol == "5":
        return mqtt5.ConnAckPacket(receive_max=receive_max).write()
    return mqtt311.ConnAck(False, 0).encode()


def _publish(protocol: Version, payload: bytes) -> bytes:
    if protocol == "5":
        return mqtt5.PublishPacket("t", payload).write()
    return mqtt311.Publish("t", payload).encode()


#: Packets no broker may send, per version: (name in the error, bytes).
FORBIDDEN = {
    "5": [
        ("PINGREQ", mqtt5.PingReqPacket().write()),
        ("SUBSCRIBE", mqtt5.SubscribePacket(1, [mqtt5.TopicFilter("t")]).write()),
        ("CONNECT", mqtt5.ConnectPacket("x").write()),
        ("AUTH", mqtt5.AuthPacket().write()),
        ("second CONNACK", mqtt5.ConnAckPacket().write()),
    ],
    "3.1.1": [
        ("PINGREQ", mqtt311.PingReq().encode()),
        ("SUBSCRIBE", mqtt311.Subscribe(1, (("t", 0),)).encode()),
        ("CONNECT", mqtt311.Connect("x").encode()),
        ("DISCONNECT", mqtt311.Disconnect().encode()),
        ("second CONNACK", mqtt311.ConnAck(False, 0).encode()),
    ],
}


@pytest.mark.parametrize(
    ("protocol", "name", "forbidden"),
    [pytest.param(p, name, raw, id=f"{p}-{name}") for p in PROTOCOLS for name, raw in FORBIDDEN[p]],
)
async def test_a_packet_a_broker_may_not_send_closes_the_connection_in_both_versions(
    protocol: Version, name: str, forbidden: bytes
) -> None:
    """A protocol violation (3.1.1 section 4.8, 5.0 section 4.13) ends the connection with a
    clean ConnectionLostError naming the packet, one error line, and, in MQTT 5, a DISCONNECT
    with reason 0x82 Protocol Error; what came before it is delivered."""
    after: list[bytes] = []
    hung_up = asyncio.Event()

    async def hostile(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_packet(reader)
        writer.write(_connack(protocol))
        await read_packet(reader)  # the client's first publish: now the forbidden packet
        writer.write(_publish(protocol, b"before") + forbidden + _publish(protocol, b"after"))
        await writer.drain()
        with contextlib.suppress(asyncio.IncompleteReadError):
            while True:
                after.append(await read_packet(reader))
        hung_up.set()

    got: list[Message] = []

    async def read_all(client: FastClient) -> None:
        async with asyncio.timeout(5):
            async for m in client.messages():
                got.append(m)

    async with fake_broker(hostile) as url, FastClient(url, protocol=protocol) as client:
        await client.publish("go", b"", qos=0)
        with capture_logs() as logs, pytest.raises(ConnectionLostError) as info:
            await read_all(client)
        async with asyncio.timeout(5):
            await hung_up.wait()
    assert f"protocol violation from the broker: a {name}" in str(info.value)
    assert [m.payload for m in got] == [b"before"]
    errors = [e for e in logs if e["log_level"] == "error"]
    assert [(e["event"], e["protocol"]) for e in errors] == [
        ("broker.protocol_violation", protocol)
    ]
    if protocol == "5":
        assert after == [
            mqtt5.DisconnectPacket(reason_code=mqtt5.DisconnectReasonCode(0x82)).write()
        ]
    else:
        assert after == []  # 3.1.1 has no DISCONNECT for a broker: the connection just closes


async def test_bytes_that_are_no_mqtt_5_packet_get_a_disconnect_saying_malformed() -> None:
    after: list[bytes] = []
    hung_up = asyncio.Event()

    async def hostile(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_packet(reader)
        writer.write(_connack("5"))
        await read_packet(reader)
        writer.write(b"\x00\x00")
        with contextlib.suppress(asyncio.IncompleteReadError):
            while True:
                after.append(await read_packet(reader))
        hung_up.set()

    async with fake_broker(hostile) as url, FastClient(url, protocol="5") as client:
        await client.publish("go", b"", qos=0)
        with pytest.raises(ConnectionLostError, match="malformed packet from the broker"):
            async with asyncio.timeout(5):
                await client.wait_lost()
        async with asyncio.timeout(5):
            await hung_up.wait()
    assert after == [mqtt5.DisconnectPacket(reason_code=mqtt5.DisconnectReasonCode(0x81)).write()]


@pytest.mark.parametrize("qos", [1, 2])
async def test_a_publish_the_broker_refuses_is_a_publish_refused_error(qos: int) -> None:
    """MQTT 5's PUBACK (QoS 1) or PUBREC (QoS 2) with 0x87 Not authorized (an ACL): the error a
    dead letter's sender tells from a lost connection, as with the aiomqtt client. The place in
    flight is freed: the next publish goes."""

    async def acl(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_packet(reader)
        writer.write(mqtt5.ConnAckPacket(receive_max=1).write())
        packet, _ = mqtt5.read(memoryview(await read_packet(reader)))
        assert isinstance(packet, mqtt5.PublishPacket) and packet.packet_id is not None
        refused = mqtt5.PubAckReasonCode.NOT_AUTHORIZED
        if qos == 1:
            writer.write(mqtt5.PubAckPacket(packet.packet_id, reason_code=refused).write())
        else:
            writer.write(
                mqtt5.PubRecPacket(
                    packet.packet_id, reason_code=mqtt5.PubRecReasonCode(0x87)
                ).write()
            )
        packet, _ = mqtt5.read(memoryview(await read_packet(reader)))
        assert isinstance(packet, mqtt5.PublishPacket) and packet.packet_id is not None
        writer.write(mqtt5.PubAckPacket(packet.packet_id).write())
        await writer.drain()
        await asyncio.Event().wait()

    async with fake_broker(acl) as url, FastClient(url, protocol="5") as client:
        with pytest.raises(PublishRefusedError) as info:
            await client.publish("m/deadletter/c", b"{}", qos=qos)
        async with asyncio.timeout(5):
            await client.publish("m/other", b"{}", qos=1)
    assert (info.value.topic, info.value.code, info.value.name) == (
        "m/deadletter/c",
        0x87,
        "Not authorized",
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_an_acknowledgement_of_nothing_in_flight_frees_no_place(protocol: Version) -> None:
    """PUBACKs for packet ids the client has nothing in flight under are ignored: they do not
    let more than the receive maximum (v5) or max_inflight (3.1.1) out."""
    publishes: list[int] = []

    async def stray(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_packet(reader)
        writer.write(_connack(protocol, receive_max=2))
        while True:
            packet = await read_packet(reader)
            if packet[0] >> 4 == 3:
                publishes.append(packet[0])
                if len(publishes) == 2:  # the window is full: acknowledge other ids
                    for pid in (60001, 60002, 60003):
                        stale = (
                            mqtt5.PubAckPacket(pid).write()
                            if protocol == "5"
                            else mqtt311.PubAck(pid).encode()
                        )
                        writer.write(stale)
                    writer.write(_publish(protocol, b"sync"))
                    await writer.drain()

    async with (
        fake_broker(stray) as url,
        FastClient(url, protocol=protocol, max_inflight=2) as client,
    ):
        futures = [client.publish_nowait("t", b"x", 1, False) for _ in range(10)]
        async with asyncio.timeout(5):
            async for m in client.messages():
                assert m.payload == b"sync"  # the broker sent it after the stale acks
                break
        # The stale acks came first and were handled in the read that brought them; what the
        # client sent in answer was flushed before this task was woken: CONNECT and 2 PUBLISH.
        assert client.packets_out == 3
        for f in futures:
            assert f is not None
            f.cancel()
    assert len(publishes) == 2
