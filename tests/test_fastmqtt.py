"""The fast MQTT client against a real mosquitto: every QoS both ways, shared groups, errors."""

from __future__ import annotations

import asyncio
import sys

import mqtt5
import pytest
from structlog.testing import capture_logs

from events import BrokerError, Message, MessageProps, Topics
from matchcast.transport.connection import BrokerURL
from matchcast.transport.fast import codec5
from matchcast.transport.fast.inbox import Inbox
from matchcast.transport.fast.link import Link, WriteCounts
from matchcast.transport.fastmqtt import FastClient
from matchcast.transport.mqtt import MqttClient

pytestmark = pytest.mark.mosquitto


async def _collect(client: FastClient | MqttClient, n: int) -> list[Message]:
    out: list[Message] = []
    async with asyncio.timeout(10):
        async for m in client.messages():
            out.append(m)
            if len(out) == n:
                break
    return out


@pytest.mark.parametrize("qos", [0, 1, 2])
async def test_publishes_arrive_in_order_at_every_qos(
    mosquitto_url: BrokerURL, topics: Topics, qos: int
) -> None:
    topic = topics.events("m1")
    async with FastClient(mosquitto_url) as sub, FastClient(mosquitto_url) as pub:
        await sub.subscribe(topic, qos=qos)
        futures = [pub.publish_nowait(topic, b"%d" % i, qos, False) for i in range(3000)]
        await asyncio.gather(*(f for f in futures if f is not None))
        got = await _collect(sub, 3000)
    assert [int(m.payload) for m in got] == list(range(3000))
    assert {m.qos for m in got} == {qos}


async def test_awaiting_publish_with_properties_and_retain(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    """A retained message with MQTT 5 properties reaches a later subscriber (here: aiomqtt)."""
    topic = topics.state("m2")
    props = MessageProps(content_type="application/json", user=(("seq", "7"),))
    async with FastClient(mosquitto_url) as pub:
        await pub.publish(topic, b'{"a":1}', qos=1, retain=True, props=props)
    async with MqttClient(mosquitto_url) as sub:
        await sub.subscribe(topic, qos=1)
        [m] = await _collect(sub, 1)
    assert (m.payload, m.retain) == (b'{"a":1}', True)


async def test_a_shared_group_splits_the_messages(mosquitto_url: BrokerURL, topics: Topics) -> None:
    topic = topics.events("m3")
    async with (
        FastClient(mosquitto_url) as a,
        FastClient(mosquitto_url) as b,
        FastClient(mosquitto_url) as pub,
    ):
        for c in (a, b):
            await c.subscribe(f"$share/grp/{topic}", qos=1)
        for i in range(200):
            await pub.publish(topic, b"%d" % i, qos=1)
        got: list[Message] = []

        async def drain(c: FastClient) -> None:
            async for m in c.messages():
                got.append(m)
                if len(got) >= 200:
                    return

        async with asyncio.timeout(10):
            done, pending = await asyncio.wait(
                [asyncio.ensure_future(drain(a)), asyncio.ensure_future(drain(b))],
                return_when=asyncio.FIRST_COMPLETED,
            )
            for t in pending:
                t.cancel()
    assert sorted(int(m.payload) for m in got) == list(range(200))


async def test_an_unreachable_broker_is_a_broker_error() -> None:
    from matchcast.transport.broker import free_port

    with pytest.raises(BrokerError, match="cannot connect"):
        async with FastClient(BrokerURL("127.0.0.1", free_port()), connect_timeout=2):
            pass


async def test_messages_end_with_broker_error_when_the_broker_goes(
    topics: Topics,
) -> None:
    from matchcast.testing import Mosquitto, mosquitto_binary

    binary = mosquitto_binary()
    assert binary is not None
    broker = Mosquitto(binary).start()
    try:
        async with FastClient(BrokerURL.parse(broker.url)) as c:
            await c.subscribe(topics.events("+"), qos=1)
            broker.kill()

            async def read_all() -> None:
                async with asyncio.timeout(5):
                    async for _ in c.messages():
                        pass

            with pytest.raises(BrokerError, match="connection lost"):
                await read_all()
            with pytest.raises(BrokerError):
                await c.publish(topics.events("x"), b"1", qos=1)
    finally:
        broker.stop()


async def test_a_process_that_publishes_and_exits_loses_nothing_at_qos0(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    """Leaving the client waits until the kernel has every byte, so the tail is not lost."""
    topic = topics.events("tail")
    n = 20_000
    script = (
        "import asyncio\n"
        "from matchcast.transport.fastmqtt import FastClient\n"
        "from matchcast.transport.mqtt import BrokerURL\n"
        "async def main():\n"
        f"    async with FastClient(BrokerURL.parse({str(mosquitto_url)!r})) as pub:\n"
        f"        for i in range({n}):\n"
        f"            fut = pub.publish_nowait({topic!r}, b'%d' % i + b' ' * 200, 0, False)\n"
        "            if fut is not None:\n"
        "                await fut\n"
        "asyncio.run(main())\n"
    )
    async with FastClient(mosquitto_url) as sub:
        await sub.subscribe(topic, qos=0)
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script)
        assert await proc.wait() == 0
        got = await _collect(sub, n)
    assert int(got[-1].payload) == n - 1


@pytest.mark.parametrize("qos", [0, 1, 2])
async def test_a_batch_handler_gets_every_message_in_order(
    mosquitto_url: BrokerURL, topics: Topics, qos: int
) -> None:
    """Messages queued before the handler was set go first; then each read is one batch."""
    topic = topics.events("batch")
    batches: list[list[Message]] = []
    got = asyncio.Event()

    def handler(batch: list[Message]) -> None:
        batches.append(list(batch))
        if sum(map(len, batches)) >= 3000:
            got.set()

    async with FastClient(mosquitto_url) as sub, FastClient(mosquitto_url) as pub:
        await sub.subscribe(topic, qos=qos)
        await pub.publish(topic, b"0", qos=1)
        async with asyncio.timeout(5):
            while not sub._inbox.queue:  # the first message waits for messages()
                await asyncio.sleep(0.01)
        sub.set_batch_handler(handler)
        futures = [pub.publish_nowait(topic, b"%d" % i, qos, False) for i in range(1, 3000)]
        await asyncio.gather(*(f for f in futures if f is not None))
        async with asyncio.timeout(10):
            await got.wait()
    flat = [m for batch in batches for m in batch]
    assert [int(m.payload) for m in flat] == list(range(3000))
    assert [(m.topic, m.payload) for m in batches[0]] == [(topic, b"0")]
    assert {(m.topic, m.qos, m.retain) for m in flat[1:]} == {(topic, qos, False)}
    # How many reads the broker's stream takes depends on CPU load, so the batching itself is
    # shown deterministically below, on one read of known bytes.


async def test_one_read_of_many_packets_is_one_batch() -> None:
    """A read that brings N whole packets is handed over in one call, a split packet waits."""
    inbox = Inbox()
    link = Link(
        BrokerURL.parse("mqtt://127.0.0.1:1"),
        codec5.CODEC,
        inbox,
        set(),
        WriteCounts(),
        max_inflight=10,
        keepalive=0,
        timeout=1,
    )
    link.data_received(mqtt5.ConnAckPacket().write())
    link.accept(await link.connack)
    batches: list[list[Message]] = []
    inbox.set_handler(batches.append, "test")
    packets = [mqtt5.PublishPacket("t/x", b"%d" % i).write() for i in range(500)]
    data = b"".join(packets)
    cut = len(data) - 3  # the last packet arrives in two reads
    link.data_received(data[:cut])
    link.data_received(data[cut:])
    assert [len(b) for b in batches] == [499, 1]
    assert [m.payload for b in batches for m in b] == [b"%d" % i for i in range(500)]


async def test_a_failing_batch_handler_is_logged_and_the_connection_carries_on(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    topic = topics.events("bad-handler")
    seen: list[bytes] = []

    def handler(batch: list[Message]) -> None:
        seen.extend(m.payload for m in batch)
        if b"boom" in seen:
            seen.remove(b"boom")
            raise RuntimeError("handler bug")

    async with FastClient(mosquitto_url) as sub, FastClient(mosquitto_url) as pub:
        await sub.subscribe(topic, qos=1)
        sub.set_batch_handler(handler)
        with capture_logs() as logs:
            await pub.publish(topic, b"boom", qos=1)
            async with asyncio.timeout(5):
                while not logs:
                    await asyncio.sleep(0.01)
        await pub.publish(topic, b"after", qos=1)
        async with asyncio.timeout(5):
            while b"after" not in seen:
                await asyncio.sleep(0.01)
    [entry] = [e for e in logs if e["event"] == "broker.batch_handler_failed"]
    assert entry["log_level"] == "error"
    assert entry["error"] == "handler bug"


async def test_wait_closed_returns_on_our_close_and_raises_when_the_broker_goes(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    from matchcast.testing import Mosquitto, mosquitto_binary

    async with FastClient(mosquitto_url) as ours:
        waiter = asyncio.ensure_future(ours.wait_closed())
        await asyncio.sleep(0.05)
        assert not waiter.done()
    async with asyncio.timeout(5):
        await waiter  # closed by us: returns

    binary = mosquitto_binary()
    assert binary is not None
    broker = Mosquitto(binary).start()
    try:
        async with FastClient(BrokerURL.parse(broker.url)) as c:
            broker.kill()
            with pytest.raises(BrokerError, match="connection lost"):
                async with asyncio.timeout(5):
                    await c.wait_closed()
    finally:
        broker.stop()
