"""One test per private part of aiomqtt and paho that the aiomqtt client uses
(matchcast/transport/aiomqtt_private.py lists them and says why each is needed).

Each fails with a message naming the attribute and the versions installed when an upgrade
removes or changes what is used. Fake brokers on loopback: no mosquitto, a fraction of a
second each."""

from __future__ import annotations

import asyncio

import aiomqtt
import mqtt5
import pytest
from paho.mqtt.client import ConnectFlags
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.reasoncodes import ReasonCode

from events import ConnectionLostError, MessageProps, PublishRefusedError
from matchcast.transport.aiomqtt_private import (
    WRITTEN_FOR,
    PahoHooks,
    PrivateAPIError,
    disconnected,
    encode_properties,
    installed,
    paho_client,
)
from matchcast.transport.mqtt import MqttClient
from tests._fake_broker import fake_broker, read_packet


async def test_private_use_1_aiomqtt_keeps_its_paho_client_in__client() -> None:
    """``aiomqtt.Client._client`` is the paho client, with aiomqtt's own on_connect on it, which
    the hooks call on after noting the CONNACK's session-present flag."""
    client = aiomqtt.Client("127.0.0.1", 1)
    try:
        paho = paho_client(client)
        hooks = PahoHooks(client, "mqtt://127.0.0.1:1", 1.0)
    except PrivateAPIError as err:
        pytest.fail(str(err))
    accepted = ReasonCode(PacketTypes.CONNACK, identifier=0)
    assert paho.on_connect is not None
    paho.on_connect(paho, None, ConnectFlags(session_present=True), accepted, None)
    assert hooks.session_present, (
        f"the session-present hook on aiomqtt.Client._client's on_connect did not run "
        f"({installed()}; written for {WRITTEN_FOR})"
    )


async def test_private_use_2_aiomqtt_ends__disconnected_when_the_broker_goes() -> None:
    """``aiomqtt.Client._disconnected`` gets an exception when the broker closes the connection
    (what ``MqttClient.wait_lost`` and ``subscribe`` wait on)."""

    async def accept_then_hang_up(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await read_packet(r)
        w.write(b"\x20\x02\x00\x00")  # CONNACK, 3.1.1, accepted
        await w.drain()
        await asyncio.sleep(0.05)

    async with fake_broker(accept_then_hang_up) as url:
        client = aiomqtt.Client(url.host, url.port, timeout=5)
        await client.__aenter__()
        try:
            lost = disconnected(client)
        except PrivateAPIError as err:
            pytest.fail(str(err))
        try:
            async with asyncio.timeout(5):
                await asyncio.wait([lost])
        except TimeoutError:
            pytest.fail(
                f"aiomqtt.Client._disconnected did not end when the broker closed the "
                f"connection ({installed()}; written for {WRITTEN_FOR})"
            )
        assert isinstance(lost.exception(), aiomqtt.MqttError)
        await client.__aexit__(None, None, None)


async def test_private_use_3_paho_sends_packed_properties_through_pack_alone() -> None:
    """A PUBLISH with matchcast's own encoded properties goes out through paho as the broker
    should read it, and its PUBACK's refusal comes back as a PublishRefusedError."""
    sent: list[mqtt5.PublishPacket] = []

    async def v5_broker(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await read_packet(r)
        w.write(mqtt5.ConnAckPacket().write())
        for code in (mqtt5.PubAckReasonCode.SUCCESS, mqtt5.PubAckReasonCode.NOT_AUTHORIZED):
            packet, _ = mqtt5.read(memoryview(await read_packet(r)))
            assert isinstance(packet, mqtt5.PublishPacket)
            assert packet.packet_id is not None
            sent.append(packet)
            w.write(mqtt5.PubAckPacket(packet.packet_id, reason_code=code).write())
        await asyncio.Event().wait()

    props = MessageProps(content_type="application/json", user=(("seq", "7"),))
    async with fake_broker(v5_broker) as url, MqttClient(url, protocol="5") as client:
        try:
            await client.publish("m/events/x", b"{}", qos=1, props=props)
            with pytest.raises(PublishRefusedError) as info:
                await client.publish("m/deadletter/c", b"{}", qos=1, props=props)
        except (AttributeError, TypeError) as err:
            pytest.fail(
                f"paho no longer sends PUBLISH properties through Properties.pack() alone "
                f"({err!r}; {installed()}; aiomqtt_private.PackedProperties was written for "
                f"{WRITTEN_FOR})"
            )
    assert [(p.content_type, p.user_properties) for p in sent] == [
        ("application/json", [("seq", "7")])
    ] * 2
    assert (info.value.code, info.value.name) == (0x87, "Not authorized")
    packed = encode_properties(props)
    assert packed is not None
    assert str(packed).startswith("[packed: ")  # paho's debug line of each PUBLISH names it


async def test_a_publish_in_flight_fails_when_the_connection_ends_not_after_its_timeout() -> None:
    """The end of the connection (private use 2) fails what waits for an acknowledgement at
    once, with ConnectionLostError; aiomqtt's own publish waits out its whole timeout."""

    async def swallow_then_hang_up(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        await read_packet(r)
        w.write(b"\x20\x02\x00\x00")
        await w.drain()
        await read_packet(r)  # the PUBLISH, never acknowledged

    async with (
        fake_broker(swallow_then_hang_up) as url,
        MqttClient(url, protocol="3.1.1", connect_timeout=60) as client,
    ):
        with pytest.raises(ConnectionLostError, match="connection lost"):
            async with asyncio.timeout(10):
                await client.publish("m/events/x", b"{}", qos=1)
