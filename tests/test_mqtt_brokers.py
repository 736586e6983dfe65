"""Several brokers and protocol negotiation in both MQTT clients (the failover tests run
against each: :class:`matchcast.transport.mqtt.MqttClient` and :class:`matchcast.transport.fastmqtt.FastClient`).

Real mosquitto processes of our own stand in for cluster nodes; a small proxy plays a broker
that never answers an MQTT 5 CONNECT (RabbitMQ 3.10 does that).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Iterator

import pytest
from structlog.testing import capture_logs

from events import BrokerError, Topics
from matchcast.app import mqtt_client, run_replay
from matchcast.cli.web import _control_sender
from matchcast.load._nodes import NodeAssigner
from matchcast.testbroker import Mosquitto, free_port, mosquitto_binary
from matchcast.transport import mqtt
from matchcast.transport.connection import BrokerURL, WillSpec, broker_url_from
from matchcast.transport.fastmqtt import FastClient
from matchcast.transport.mqtt import MqttClient
from simulator import ReplayOptions, resolve_matches
from tests._proxies import QoS1Refuser

pytestmark = pytest.mark.mosquitto


@pytest.fixture
def two_mosquittos() -> Iterator[tuple[Mosquitto, Mosquitto]]:
    binary = mosquitto_binary()
    if binary is None:
        pytest.fail("mosquitto is required but not installed")
    a, b = Mosquitto(binary).start(), Mosquitto(binary).start()
    yield a, b
    a.stop()
    b.stop()


class V311OnlyProxy:
    """Forwards to a broker, but swallows an MQTT 5 CONNECT without a word (RabbitMQ 3.10)."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self.v5_connects = 0
        self.v311_connects = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> V311OnlyProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            head = await reader.readexactly(2)  # CONNECT: type byte, length (short here)
            body = await reader.readexactly(head[1])
            level = body[6]  # after the protocol name "MQTT" and its 2-byte length
            if level == 5:
                self.v5_connects += 1
                await reader.read()  # say nothing until the client gives up
                return
            self.v311_connects += 1
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)
            up_w.write(head + body)
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self._pipe(reader, up_w))
                tg.create_task(self._pipe(up_r, writer))
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            self._tasks.discard(task)

    @staticmethod
    async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        dst.close()


@pytest.fixture
async def v311_only(mosquitto: Mosquitto) -> AsyncIterator[V311OnlyProxy]:
    async with V311OnlyProxy(mosquitto.port) as proxy:
        yield proxy


async def test_a_list_connects_to_the_first_node_that_answers(
    mosquitto: Mosquitto, client_kind: str
) -> None:
    dead = BrokerURL("127.0.0.1", free_port())
    live = BrokerURL.parse(mosquitto.url)
    async with mqtt_client(client_kind, [dead, live]) as client:
        assert client.url == live
        await client.publish("mctest/list", b"x", qos=1)


async def test_no_node_answering_names_each_node_and_its_reason(client_kind: str) -> None:
    dead = [BrokerURL("127.0.0.1", free_port()) for _ in range(2)]
    with pytest.raises(BrokerError, match="no node answered") as info:
        async with mqtt_client(client_kind, dead):
            pass
    assert all(str(u) in str(info.value) for u in dead)
    assert str(info.value).count(str(dead[0])) == 1


async def test_a_lost_node_fails_over_to_the_next_and_says_so(
    two_mosquittos: tuple[Mosquitto, Mosquitto], client_kind: str
) -> None:
    """Both clients follow the one failover schedule (matchcast.transport.failover) and log it alike."""
    a, b = two_mosquittos
    urls = [BrokerURL.parse(a.url), BrokerURL.parse(b.url)]
    reconnected: list[BrokerURL] = []

    async def on_reconnect(client: MqttClient | FastClient) -> None:
        reconnected.append(client.url)

    async with mqtt_client(client_kind, urls, on_reconnect=on_reconnect) as client:
        assert client.url == urls[0]
        a.kill()
        with pytest.raises(BrokerError):
            async with asyncio.timeout(10):
                await client.wait_lost()
        with capture_logs() as logs:
            async with asyncio.timeout(5):  # the failover bound
                await client.reconnect()
        assert client.url == urls[1]
        assert reconnected == [urls[1]]
        await client.publish("mctest/failover", b"x", qos=1)
    failed_over = [e for e in logs if e["event"] == "broker.failed_over"]
    assert failed_over
    assert failed_over[0]["lost"] == str(urls[0])
    assert failed_over[0]["broker"] == str(urls[1])


async def test_an_unanswered_v5_connect_falls_back_to_311_and_is_remembered(
    v311_only: V311OnlyProxy,
) -> None:
    url = BrokerURL("127.0.0.1", v311_only.port)
    mqtt._V5_SUPPORT.pop((url.host, url.port), None)
    async with MqttClient(url, connack_timeout=0.5) as client:
        assert client.protocol_version == "3.1.1"
    assert (v311_only.v5_connects, v311_only.v311_connects) == (1, 1)
    async with MqttClient(url, connack_timeout=0.5) as client:
        assert client.protocol_version == "3.1.1"
    assert (v311_only.v5_connects, v311_only.v311_connects) == (1, 2)


async def test_a_client_with_a_will_also_falls_back_on_an_unanswered_v5(
    v311_only: V311OnlyProxy,
) -> None:
    url = BrokerURL("127.0.0.1", v311_only.port)
    mqtt._V5_SUPPORT.pop((url.host, url.port), None)
    will = WillSpec("mctest/will", b"offline")
    async with MqttClient(url, will=will, connack_timeout=0.5) as client:
        assert client.protocol_version == "3.1.1"


async def test_forcing_v5_on_a_311_only_broker_names_the_cause_and_the_fix(
    v311_only: V311OnlyProxy,
) -> None:
    url = BrokerURL("127.0.0.1", v311_only.port)
    with pytest.raises(BrokerError) as info:
        async with MqttClient(url, protocol="5", connect_timeout=0.5):
            pass
    message = str(info.value)
    assert "3.1.1 only" in message
    assert "--protocol 3.1.1" in message
    assert message.count(str(url)) == 1


def test_a_broker_list_gets_the_environment_credentials_on_every_node() -> None:
    env = {
        "MATCHCAST_BROKER": "mqtt://10.0.0.1:1883, mqtt://10.0.0.2:1884",
        "MATCHCAST_USERNAME": "alice",
        "MATCHCAST_PASSWORD": "secret",
    }
    urls = broker_url_from(None, env)
    assert urls is not None
    assert [(u.host, u.port, u.username, u.password) for u in urls] == [
        ("10.0.0.1", 1883, "alice", "secret"),
        ("10.0.0.2", 1884, "alice", "secret"),
    ]
    single = broker_url_from("mqtt://h:1", {})
    assert single == (BrokerURL("h", 1),)


def test_load_assigns_each_role_round_robin() -> None:
    urls = (BrokerURL("a", 1), BrokerURL("b", 2), BrokerURL("c", 3, username="u", password="p"))
    nodes = NodeAssigner(urls)
    firsts = [nodes.assign("publisher")[0] for _ in range(4)]
    assert firsts == [urls[0], urls[1], urls[2], urls[0]]
    assert nodes.assign("probe") == urls  # each role has its own turn; the rest to fail over to
    assert nodes.assign("probe") == (urls[1], urls[2], urls[0])
    # reports name the user, and the password masked; a worker's --broker has no password
    assert nodes.keys == ("mqtt://a:1", "mqtt://b:2", "mqtt://u:***@c:3")
    assert nodes.listed == "mqtt://a:1,mqtt://b:2,mqtt://u@c:3"
    shard = NodeAssigner(urls, offset=1)
    assert shard.assign("publisher")[0] == urls[1]


async def test_a_failover_with_a_will_asks_no_node_of_a_311_list_for_mqtt_5(
    mosquitto: Mosquitto,
) -> None:
    """One cluster runs one engine: once a node of the list proved 3.1.1-only, a failover goes
    straight to 3.1.1 on the next node. It used to probe the next node with an MQTT 5 CONNECT
    first, under the full 10 s connect timeout, not the short failover one; against NATS while
    JetStream elected leaders, that probe was the replayer's 10 s wait."""
    async with V311OnlyProxy(mosquitto.port) as b:
        a = V311OnlyProxy(mosquitto.port)
        await a.__aenter__()
        urls = [BrokerURL("127.0.0.1", a.port), BrokerURL("127.0.0.1", b.port)]
        for url in urls:
            mqtt._V5_SUPPORT.pop((url.host, url.port), None)
        will = WillSpec("mctest/will", b"offline")
        async with MqttClient(urls, will=will, connack_timeout=0.5) as client:
            assert client.url == urls[0]
            assert a.v5_connects == 1
            await a.__aexit__()
            with pytest.raises(BrokerError):
                async with asyncio.timeout(10):
                    await client.wait_lost()
            async with asyncio.timeout(10):
                await client.reconnect()
            assert client.url == urls[1]
            assert client.protocol_version == "3.1.1"
        assert (b.v5_connects, b.v311_connects) == (0, 1)


async def test_a_stalled_node_costs_a_failover_only_the_short_wait(
    two_mosquittos: tuple[Mosquitto, Mosquitto], client_kind: str
) -> None:
    """A surviving node that takes the CONNECT and says nothing (NATS while JetStream elects
    leaders) is given the failover wait, then the next node is asked. The fast client used to
    give it the whole connect timeout (10 s by default; 30 s here)."""
    a, b = two_mosquittos
    held: list[asyncio.StreamWriter] = []

    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)
        await reader.read()

    stalled = await asyncio.start_server(mute, "127.0.0.1", 0)
    s_port = stalled.sockets[0].getsockname()[1]
    urls = [BrokerURL.parse(a.url), BrokerURL("127.0.0.1", s_port), BrokerURL.parse(b.url)]
    try:
        async with mqtt_client(
            client_kind, urls, connect_timeout=30.0, failover_timeout=0.3
        ) as client:
            a.kill()
            with pytest.raises(BrokerError):
                async with asyncio.timeout(10):
                    await client.wait_lost()
            with capture_logs() as logs:
                async with asyncio.timeout(20):
                    await client.reconnect()
            assert client.url == urls[2]
    finally:
        stalled.close()
        for writer in held:
            writer.close()
    failed = [e for e in logs if e["event"] == "broker.reconnect_failed"]
    assert failed, "the stalled node was asked first"
    assert failed[0]["broker"] == str(urls[1])
    assert "within 0.3s" in failed[0]["reason"]
    assert "within 30s" not in failed[0]["reason"]


@pytest.mark.parametrize("persistent", [False, True], ids=["clean", "persistent"])
async def test_a_clean_session_fails_over_under_a_client_id_of_its_own(
    two_mosquittos: tuple[Mosquitto, Mosquitto], client_kind: str, persistent: bool
) -> None:
    """NATS 2.9 leaves a CONNECT unanswered for 20 s and more when its client id was a client
    of the node that died (3 failovers of 4 by hand), and answers a new id at once. A clean
    session has nothing to resume under its old id; a persistent one keeps it."""
    a, b = two_mosquittos
    urls = [BrokerURL.parse(a.url), BrokerURL.parse(b.url)]
    options = {"clean_start": False, "session_expiry": 60} if persistent else {}
    async with mqtt_client(client_kind, urls, client_id="mctest-fixed", **options) as client:
        a.kill()
        with pytest.raises(BrokerError):
            async with asyncio.timeout(10):
                await client.wait_lost()
        async with asyncio.timeout(10):
            await client.reconnect()
        assert client.url == urls[1]
        if persistent:
            assert client.client_id == "mctest-fixed"
        else:
            assert client.client_id.startswith("mctest-fixed-")
        await client.publish("mctest/renamed", b"x", qos=1)


async def test_a_qos1_subscription_refused_after_a_failover_goes_on_at_qos0_until_granted(
    two_mosquittos: tuple[Mosquitto, Mosquitto],
) -> None:
    """The fast client (`consume`'s) takes a refused QoS 1 re-subscription at QoS 0 at once and
    asks for QoS 1 again beside the traffic. It used to raise out of reconnect(): the consumer
    then failed over again, and on NATS waited for the next node's own 4 s refusal."""
    a, b = two_mosquittos
    async with QoS1Refuser(b.port) as refuser:
        urls = [BrokerURL.parse(a.url), BrokerURL("127.0.0.1", refuser.port)]
        async with FastClient(urls, protocol="3.1.1") as client:
            await client.subscribe("mctest/up/#", qos=1)
            a.kill()
            with pytest.raises(BrokerError):
                async with asyncio.timeout(10):
                    await client.wait_lost()
            with capture_logs() as logs:
                async with asyncio.timeout(10):
                    await client.reconnect()
                assert client.url == urls[1]
                assert refuser.subscribes == [("mctest/up/#", 1, True), ("mctest/up/#", 0, False)]
                await client.subscribe("mctest/up/#", qos=1)  # the runner's: already under way
                async with FastClient(BrokerURL.parse(b.url)) as publisher:
                    await publisher.publish("mctest/up/a", b"at-0", qos=1)
                    messages = aiter(client.messages())
                    async with asyncio.timeout(10):
                        first = await anext(messages)
                    assert (first.payload, first.qos) == (b"at-0", 0)
                    refuser.refusing = False
                    async with asyncio.timeout(20):
                        while not any(e["event"] == "broker.subscription_restored" for e in logs):
                            await asyncio.sleep(0.05)
                    await publisher.publish("mctest/up/a", b"at-1", qos=1)
                    async with asyncio.timeout(10):
                        second = await anext(messages)
                    assert (second.payload, second.qos) == (b"at-1", 1)
    assert [e["event"] for e in logs if e["event"].startswith("broker.subscription_")] == [
        "broker.subscription_degraded",
        "broker.subscription_restored",
    ]
    assert refuser.subscribes[-1] == ("mctest/up/#", 1, False)


async def test_watch_told_311_asks_a_311_only_broker_nothing_in_mqtt_5(
    mosquitto: Mosquitto, v311_only: V311OnlyProxy
) -> None:
    """``--protocol 3.1.1`` reaches every connection a command makes: its first reachability
    check and its replayer-status reader tried MQTT 5 first, 3-4 s of ``broker.v5_unanswered``
    on a 3.1.1-only engine (found by a newcomer following docs/cluster.md on RabbitMQ)."""
    topics = Topics("mctest-told311")
    semi = resolve_matches("semifinal")[0]
    url = BrokerURL("127.0.0.1", v311_only.port)
    # A process of its own: the command's event loop and Ctrl-C handling want a main thread.
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "matchcast", "watch",
        "--broker", str(url),
        "--protocol", "3.1.1",
        "--root", topics.root,
        "--match", semi.match_id,
        "--exit-at-full-time",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        async with asyncio.timeout(60):
            # The check, the status reader and the watch itself: then a live run to its end.
            while v311_only.v311_connects < 3 and proc.returncode is None:
                await asyncio.sleep(0.05)
            options = ReplayOptions(speed=2000.0, break_seconds=0.2, topics=topics)
            await run_replay([semi], BrokerURL.parse(mosquitto.url), options)
            stdout, stderr = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, stderr.decode()
    assert "ARG 2-1 ENG" in stdout.decode()
    assert v311_only.v5_connects == 0, "a connection asked in MQTT 5 though told 3.1.1"


async def test_the_pages_control_told_311_asks_nothing_in_mqtt_5(v311_only: V311OnlyProxy) -> None:
    """``web --control --protocol 3.1.1``: the page's commands go out in 3.1.1 too (they
    tried MQTT 5 first, 3 s on a 3.1.1-only engine before the first command went out)."""
    url = BrokerURL("127.0.0.1", v311_only.port)
    mqtt._V5_SUPPORT.pop((url.host, url.port), None)
    send = _control_sender(url, Topics("mctest-told311-control"), "3.1.1")
    code, body = await send("pause", None, None)
    assert code != 200, body  # no replayer there: refused, said why
    assert v311_only.v311_connects >= 1
    assert v311_only.v5_connects == 0, "the command asked in MQTT 5 though told 3.1.1"
