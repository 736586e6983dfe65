"""The fast client on the 3.1.1-only engines: NATS (refuses v5 with return code 1) and
RabbitMQ 3.10 (never answers a v5 CONNECT). ``protocol="auto"`` must find 3.1.1 on both."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator

import pytest

from events import Message, Topics
from matchcast.transport.connection import BrokerURL, WillSpec
from matchcast.transport.fastmqtt import FastClient
from tests._clusters import REQUIRE_CLUSTERS_ENV
from tests._engines import NATS_SERVER, RABBITMQ_SERVER, nats_node, rabbitmq_node
from tests._require import require

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=["nats", "rabbitmq"])
def engine_url(request: pytest.FixtureRequest) -> Iterator[BrokerURL]:
    """One node of each engine, for this module."""
    binary = NATS_SERVER if request.param == "nats" else RABBITMQ_SERVER
    require(
        os.path.exists(binary),
        binary,
        REQUIRE_CLUSTERS_ENV,
        f"apt-get install {request.param}-server",
    )
    node = nats_node() if request.param == "nats" else rabbitmq_node()
    with node as url:
        yield BrokerURL.parse(url)


async def _collect(client: FastClient, n: int) -> list[Message]:
    out: list[Message] = []
    async with asyncio.timeout(20):
        async for m in client.messages():
            out.append(m)
            if len(out) == n:
                break
    return out


@pytest.mark.parametrize("qos", [0, 1])
async def test_auto_finds_3_1_1_and_every_message_arrives_in_order(
    engine_url: BrokerURL, topics: Topics, qos: int
) -> None:
    topic = topics.events("engine")
    async with (
        FastClient(engine_url, probe_timeout=2) as sub,
        FastClient(engine_url, probe_timeout=2) as pub,
    ):
        assert (sub.protocol_version, pub.protocol_version) == ("3.1.1", "3.1.1")
        await sub.subscribe(topic, qos=qos)
        futures = [pub.publish_nowait(topic, b"%d" % i, qos, False) for i in range(2000)]
        await asyncio.gather(*(f for f in futures if f is not None))
        got = await _collect(sub, 2000)
    assert [int(m.payload) for m in got] == list(range(2000))


async def test_the_will_and_a_resumed_session(engine_url: BrokerURL, topics: Topics) -> None:
    will = WillSpec(topics.status("r"), b"offline", qos=1, retain=False)
    session = {"client_id": f"engine-{topics.root}", "clean_start": False}
    async with FastClient(engine_url, protocol="3.1.1") as watcher:
        await watcher.subscribe(topics.status("r"), qos=1)
        doomed = FastClient(engine_url, protocol="3.1.1", will=will)
        await doomed.__aenter__()
        assert doomed._link is not None and doomed._link.transport is not None
        doomed._link.transport.abort()
        [m] = await _collect(watcher, 1)
        assert m.payload == b"offline"

        async with FastClient(engine_url, protocol="3.1.1", **session) as first:  # type: ignore[arg-type]
            await first.subscribe(topics.events("s"), qos=1)
            # The session's subscription is in place once a message through it arrives (NATS
            # sets it up in JetStream after the SUBACK; a busy machine showed the gap).
            await watcher.publish(topics.events("s"), b"ready", qos=1)
            [m] = await _collect(first, 1)
            assert m.payload == b"ready"
        await watcher.publish(topics.events("s"), b"while away", qos=1)
        async with FastClient(engine_url, protocol="3.1.1", **session) as second:  # type: ignore[arg-type]
            assert second.session_present
            [m] = await _collect(second, 1)
    assert m.payload == b"while away"
