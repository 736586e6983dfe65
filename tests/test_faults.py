"""Broker and network faults: the replayer reconnects and resumes; nothing is lost at QoS 1."""

from __future__ import annotations

import asyncio

import aiomqtt
import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from events import Event, MatchClock, Topics, decode_event
from matchcast.app import run_replay
from matchcast.mqtt import BrokerURL, MqttClient
from matchcast.testbroker import FaultProxy, Mosquitto, mosquitto_binary
from simulator import ReplayOptions, expand, resolve_matches

SEMI = resolve_matches("semifinal")[0]
LAST_SEQ = len(expand(SEMI))
pytestmark = pytest.mark.mosquitto


def _persistent_mosquitto() -> Mosquitto:
    binary = mosquitto_binary()
    assert binary is not None
    return Mosquitto(binary, persistence=True).start()


async def _persistent_subscriber(
    url: BrokerURL, topics: Topics, got: list[Event], ready: asyncio.Event
) -> None:
    """A consumer with a persistent session (clean start off, session expiry), reconnecting."""
    props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
    props.SessionExpiryInterval = 600
    first = True
    while True:
        try:
            async with aiomqtt.Client(
                url.host,
                url.port,
                identifier="fault-sub",
                protocol=aiomqtt.ProtocolVersion.V5,
                clean_start=first,
                properties=props,
                keepalive=5,
            ) as client:
                if first:
                    await client.subscribe(topics.events("+"), qos=1)
                    first = False
                ready.set()
                async for message in client.messages:
                    assert isinstance(message.payload, bytes)
                    event = decode_event(message.payload)
                    got.append(event)
                    if event.type == "full_time":
                        return
        except aiomqtt.MqttError:
            await asyncio.sleep(0.1)


async def test_a_dropped_connection_is_replaced_through_a_proxy(
    mosquitto: Mosquitto, topics: Topics
) -> None:
    received: list[int] = []
    async with FaultProxy("127.0.0.1", mosquitto.port) as proxy:
        url = BrokerURL("127.0.0.1", proxy.port)
        async with aiomqtt.Client("127.0.0.1", mosquitto.port) as watcher:
            await watcher.subscribe(topics.events("+"), qos=1)

            async def collect() -> None:
                async for m in watcher.messages:
                    assert isinstance(m.payload, bytes)
                    e = decode_event(m.payload)
                    received.append(e.seq)
                    if e.type == "full_time":
                        return

            async with asyncio.timeout(60):
                collector = asyncio.create_task(collect())
                options = ReplayOptions(speed=600, start=MatchClock.at(70), topics=topics)
                replay = asyncio.create_task(run_replay([SEMI], url, options))
                while len(received) < 5:
                    await asyncio.sleep(0.01)
                proxy.drop()
                (report,) = await replay
                await collector
    assert report.reconnects >= 1
    assert proxy.connections >= 2
    assert set(received) == set(range(report.first_seq, LAST_SEQ + 1))


async def test_a_stalled_connection_is_detected_by_keepalive(mosquitto: Mosquitto) -> None:
    """Half-open: the socket stays up but nothing flows; keepalive notices and we reconnect."""
    async with FaultProxy("127.0.0.1", mosquitto.port) as proxy:
        client = MqttClient(BrokerURL("127.0.0.1", proxy.port), keepalive=1, connect_timeout=2)
        async with client:
            proxy.stall()
            with pytest.raises(Exception, match=r"connection lost|closed"):
                async with asyncio.timeout(10):
                    await client.wait_lost()
            proxy.resume()
            proxy.drop()
            async with asyncio.timeout(20):
                await client.reconnect()
            await client.publish("mctest/after-stall", b"{}", qos=1)
    assert client.reconnects == 1


async def test_giving_up_after_max_outage_is_a_clear_broker_error() -> None:
    binary = mosquitto_binary()
    assert binary is not None
    broker = Mosquitto(binary).start()
    client = MqttClient(BrokerURL.parse(broker.url), max_outage=0.5, backoff_max=0.2)
    async with client:
        broker.kill()
        with pytest.raises(Exception, match="giving up"):
            async with asyncio.timeout(20):
                await client.reconnect()
    broker.stop()
