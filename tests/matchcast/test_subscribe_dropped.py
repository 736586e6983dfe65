"""A broker that closes the connection in answer to a SUBSCRIBE, as RabbitMQ 3.10 does under a
client id whose subscription queue lives on a node that is down.

Measured on a 3-node RabbitMQ 3.10 cluster of ``tests/_clusters.py`` (the node holding the
session killed): every other node CONNACKs the client id, persistent or clean, then closes
the connection at its first SUBSCRIBE, within milliseconds; a new client id is served at once.
aiomqtt waited out its 10 s timeout for the SUBACK; the fast client (``consume``'s) saw a lost
connection, and the consumer reconnected under the same id every 5 s for good, stuck on the
score at the loss (a newcomer's run of docs/cluster.md). Both clients now raise
:class:`events.SubscribeDroppedError`, and the consumer gives the session up on that node.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
from collections.abc import Iterator

import pytest
from structlog.testing import capture_logs

from consumers import Runner, Subscriber
from events import BrokerError, ConnectionLostError, SubscribeDroppedError, Topics
from matchcast.app import run_replay, run_watch
from matchcast.testbroker import FaultProxy, Mosquitto, mosquitto_binary
from matchcast.transport import mqtt311
from matchcast.transport.clients import ClientKind, mqtt_client
from matchcast.transport.connection import BrokerURL
from simulator import ReplayOptions, resolve_matches
from tests._factories import SEMIFINAL_EVENTS
from tests._fake_broker import fake_broker, read_packet
from tests._proxies import SubscribeCloser

SEMI = resolve_matches("semifinal")[0]


@contextlib.contextmanager
def _shown_on_failure(logs: list[dict[str, object]]) -> Iterator[None]:
    """On a failure, print the captured log events but the per-event ones to the test's stderr
    (capture_logs keeps them from it)."""
    try:
        yield
    except BaseException:
        for entry in logs:
            if entry.get("event") not in ("event.scheduled", "event.published"):
                print(entry, file=sys.stderr)
        raise


async def _close_at_subscribe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """CONNACK, then close the connection at the first SUBSCRIBE."""
    await read_packet(reader)
    writer.write(mqtt311.ConnAck(False, 0).encode())
    await writer.drain()
    await read_packet(reader)
    writer.close()


async def _close_later(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """CONNACK, then close the connection a moment later, with no SUBSCRIBE asked."""
    await read_packet(reader)
    writer.write(mqtt311.ConnAck(False, 0).encode())
    await writer.drain()
    await asyncio.sleep(0.2)
    writer.close()


async def _never_subacks(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """CONNACK, then read on and answer nothing."""
    await read_packet(reader)
    writer.write(mqtt311.ConnAck(False, 0).encode())
    await writer.drain()
    while await reader.read(4096):
        pass


async def test_a_subscribe_answered_by_closing_the_connection_says_so(client_kind: str) -> None:
    """Both clients: at once, naming the filter, and still a lost connection to the rest."""
    async with fake_broker(_close_at_subscribe) as url:
        client = mqtt_client(client_kind, url, protocol="3.1.1", connect_timeout=30)
        async with client, asyncio.timeout(5):  # far under the 30 s SUBACK wait
            with pytest.raises(SubscribeDroppedError) as caught:
                await client.subscribe("m/matches/+/events", qos=1)
    assert caught.value.topic_filter == "m/matches/+/events"
    assert isinstance(caught.value, ConnectionLostError)
    assert "closed the connection in answer to a subscribe" in str(caught.value)


async def test_a_connection_lost_with_no_subscribe_asked_is_only_lost(client_kind: str) -> None:
    async with fake_broker(_close_later) as url:
        client = mqtt_client(client_kind, url, protocol="3.1.1")
        async with client:
            await asyncio.sleep(0.5)
            with pytest.raises(BrokerError) as caught:
                await client.subscribe("m/matches/+/events", qos=1)
    assert not isinstance(caught.value, SubscribeDroppedError)


async def test_the_fast_client_waits_for_a_suback_no_longer_than_for_a_connack() -> None:
    """It waited for ever: a node that holds a SUBSCRIBE (RabbitMQ, a session's queue on a dead
    node) hung the consumer; aiomqtt gives up after its timeout, and so does it now."""
    async with fake_broker(_never_subacks) as url:
        client = mqtt_client(ClientKind.fast, url, protocol="3.1.1", connect_timeout=0.3)
        async with client, asyncio.timeout(10):  # a hang guard only
            with pytest.raises(
                BrokerError, match=re.escape("no SUBACK to a subscribe to 'a/b' within 0.3s")
            ):
                await client.subscribe("a/b", qos=1)


@pytest.mark.mosquitto
@pytest.mark.parametrize("kind", ["fast", "aiomqtt"])
async def test_a_session_whose_node_died_goes_on_clean_on_the_node_that_closed_it(
    kind: str,
) -> None:
    """Node 1 dies; node 2 (the replayer's broker too) closes the connection at each SUBSCRIBE
    under the session's client id; node 3 never sees the match. The consumer gives the session
    up on node 2, goes on there with a clean session under an id of its own, and ends at full
    time 2-1, no seq handled twice."""
    binary = mosquitto_binary()
    if binary is None:
        pytest.fail("mosquitto is required but not installed")
    replayers_broker, elsewhere = Mosquitto(binary).start(), Mosquitto(binary).start()
    topics = Topics(f"mctest-dropped-{kind}")
    session_id = f"mctest-dropped-session-{kind}"
    seen: list[int] = []
    sub = Subscriber("seen")
    sub.on()(lambda event, _state: seen.append(event.seq))
    runner = Runner([sub], topics=topics)
    upstream = BrokerURL.parse(replayers_broker.url)
    try:
        async with (
            FaultProxy(upstream.host, upstream.port) as node1,
            SubscribeCloser(upstream.port, session_id) as node2,
        ):
            urls = [
                BrokerURL("127.0.0.1", node1.port),
                BrokerURL("127.0.0.1", node2.port),
                BrokerURL.parse(elsewhere.url),
            ]
            with capture_logs() as logs, _shown_on_failure(logs):
                async with asyncio.timeout(45), asyncio.TaskGroup() as tg:
                    watch = tg.create_task(
                        run_watch(
                            urls,
                            [],
                            runner=runner,
                            until_finished={SEMI.match_id},
                            client_id=session_id,
                            clean_start=False,
                            protocol="3.1.1",
                            client=kind,
                        )
                    )
                    await runner.subscribed.wait()
                    options = ReplayOptions(speed=800.0, break_seconds=0.2, topics=topics)
                    replay = tg.create_task(run_replay([SEMI], upstream, options))
                    while len(seen) < 20:
                        await asyncio.sleep(0.05)
                    node1.blackhole = True  # node 1 dies: its connection dropped, no new one
                    node1.drop()
                    await replay
                    states = await watch
    finally:
        replayers_broker.stop()
        elsewhere.stop()
    assert node2.closed >= 1, "the session's subscribe went to node 2, which closed it"
    abandoned = [e for e in logs if e["event"] == "consumer.session_abandoned"]
    assert [e["broker"] for e in abandoned] == [str(urls[1])]
    failed_over = [e["broker"] for e in logs if e["event"] == "broker.failed_over"]
    assert str(urls[2]) not in failed_over, "it left the live node for one without the match"
    state = states[SEMI.match_id]
    assert (state.scoreline, state.status) == ("ARG 2-1 ENG", "finished")
    assert seen == sorted(set(seen)), "no seq handled twice"
    assert runner.stats.gaps + runner.stats.resyncs >= 1 or seen == list(
        range(1, SEMIFINAL_EVENTS + 1)
    )


@pytest.mark.mosquitto
async def test_a_broker_that_closes_every_subscribe_is_an_error_after_a_few_tries(
    mosquitto_url: BrokerURL,
) -> None:
    """A broker that closes the connection at every SUBSCRIBE, whatever the client id (an ACL
    that says no that way): a few tries with a growing wait, then one error that says what
    happened and what to check; never a loop for ever."""

    runner = Runner([], topics=Topics("mctest-dropped-all"))
    async with SubscribeCloser(mosquitto_url.port) as proxy:
        url = BrokerURL("127.0.0.1", proxy.port)
        with pytest.raises(BrokerError) as caught:
            async with asyncio.timeout(30):  # a hang guard only
                await run_watch(url, [], runner=runner, protocol="3.1.1", client="fast")
    assert "closed the connection in answer to a subscribe" in caught.value.reason
    assert "times in a row" in caught.value.reason


@pytest.mark.mosquitto
@pytest.mark.parametrize("kind", ["fast", "aiomqtt"])
async def test_a_node_that_closes_every_subscribe_is_left_for_the_next(
    mosquitto_url: BrokerURL, kind: str
) -> None:
    """A tester's ``consume --session --broker BAD,GOOD``: the session given up on BAD, then
    BAD asked again and again under the new id, and the consumer exited 1 without trying GOOD.
    A clean session's subscribe closed too says the node, not the session, is the trouble."""
    topics = Topics(f"mctest-closeall-{kind}")
    seen: list[int] = []
    sub = Subscriber("seen")
    sub.on()(lambda event, _state: seen.append(event.seq))
    runner = Runner([sub], topics=topics)
    async with SubscribeCloser(mosquitto_url.port) as bad:
        urls = [BrokerURL("127.0.0.1", bad.port), mosquitto_url]
        with capture_logs() as logs, _shown_on_failure(logs):
            async with asyncio.timeout(45), asyncio.TaskGroup() as tg:
                watch = tg.create_task(
                    run_watch(
                        urls,
                        [],
                        runner=runner,
                        until_finished={SEMI.match_id},
                        client_id=f"mctest-closeall-{kind}",
                        clean_start=False,
                        protocol="3.1.1",
                        client=kind,
                    )
                )
                await runner.subscribed.wait()
                options = ReplayOptions(speed=800.0, break_seconds=0.2, topics=topics)
                await run_replay([SEMI], mosquitto_url, options)
                states = await watch
    said = [
        e["event"]
        for e in logs
        if e["event"] in ("consumer.session_abandoned", "consumer.subscribe_dropped")
    ]
    assert said == ["consumer.session_abandoned", "consumer.subscribe_dropped"]
    assert bad.closed == 2
    failed_over = [e["broker"] for e in logs if e["event"] == "broker.failed_over"]
    assert failed_over == [str(mosquitto_url)]
    assert (states[SEMI.match_id].scoreline, states[SEMI.match_id].status) == (
        "ARG 2-1 ENG",
        "finished",
    )
    assert seen == list(range(1, SEMIFINAL_EVENTS + 1))


async def test_a_stop_while_a_subscribe_waits_for_its_suback_ends_the_watch_at_once() -> None:
    """A tester's Ctrl-C of ``consume`` against a broker that never answers a SUBSCRIBE: the
    stop waited out the SUBACK timeout, then exited 1 with it. The runner stops now."""
    runner = Runner([], topics=Topics("mctest-stop-subscribing"))
    async with fake_broker(_never_subacks) as url:
        watch = asyncio.create_task(
            run_watch(url, [], runner=runner, protocol="3.1.1", client="fast")
        )
        await asyncio.sleep(0.5)  # connected, the SUBSCRIBE out and unanswered
        assert not watch.done()
        runner.stop()
        async with asyncio.timeout(5):  # a hang guard: the SUBACK wait is 10 s
            states = await watch
    assert states == {}
    assert not runner.subscribed.is_set()
