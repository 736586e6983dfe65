"""Dead letters under the repository's own ACL (deploy/mosquitto/acl, with mosquitto): each
consumer writes its own dead-letter topic, named after its broker user; a dead letter the
broker refuses is counted and warned about as refused, never as dead-lettered."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator

import pytest
from structlog.testing import capture_logs

from consumers import Runner, Subscriber
from events import PublishRefusedError, Topics
from matchcast.app import run_watch
from matchcast.testbroker import Mosquitto, mosquitto_binary
from matchcast.transport.connection import BrokerURL
from matchcast.transport.mqtt import MqttClient
from tests._secure import PASSWORDS, compose_mosquitto

pytestmark = pytest.mark.mosquitto

TOPICS = Topics("matchcast")
GARBAGE = b'{"type": "goal", "not": "an event"'


@pytest.fixture(scope="module")
def secured() -> Iterator[Mosquitto]:
    binary = mosquitto_binary()
    assert binary is not None
    broker = compose_mosquitto(binary)
    yield broker
    broker.stop()


def _url(broker: Mosquitto, user: str) -> BrokerURL:
    return BrokerURL("127.0.0.1", broker.port, username=user, password=PASSWORDS[user])


async def _reject_one(broker: Mosquitto, runner: Runner) -> None:
    """Run ``runner`` as the scoreboard user, have the replayer publish one bad message to it,
    and wait until the runner knows what became of its dead letter."""
    match_id = f"acl-{uuid.uuid4().hex[:8]}"
    watch = asyncio.ensure_future(run_watch(_url(broker, "scoreboard"), [], runner=runner))
    try:
        async with asyncio.timeout(20):
            await runner.subscribed.wait()
            async with MqttClient(_url(broker, "replayer")) as replayer:
                await replayer.publish(TOPICS.events(match_id), GARBAGE, qos=1)
            while runner.stats.dead_lettered + runner.stats.dead_letters_refused == 0:
                await asyncio.sleep(0.02)
    finally:
        runner.stop()
        await watch


async def test_a_consumer_dead_letters_to_its_own_topic_under_the_acl(
    secured: Mosquitto,
) -> None:
    """A runner with no name, logged in as scoreboard, writes matchcast/deadletter/scoreboard,
    which the ACL grants it; the letter reaches a reader."""
    runner = Runner([Subscriber("board")], topics=TOPICS)
    letters: list[dict[str, str]] = []
    async with MqttClient(_url(secured, "replayer")) as reader:
        await reader.subscribe(TOPICS.deadletter("+"), qos=1)

        async def read() -> None:
            async for message in reader.messages():
                letters.append({**json.loads(message.payload), "published_on": message.topic})
                return

        reading = asyncio.ensure_future(read())
        await _reject_one(secured, runner)
        async with asyncio.timeout(10):
            await reading
    assert runner.name == "scoreboard"
    assert (runner.stats.dead_lettered, runner.stats.dead_letters_refused) == (1, 0)
    (letter,) = letters
    assert letter["published_on"] == "matchcast/deadletter/scoreboard"
    assert letter["consumer"] == "scoreboard"
    assert letter["topic"].startswith("matchcast/matches/acl-")
    assert "not JSON" in letter["reason"]


async def test_a_refused_dead_letter_is_counted_and_warned_as_refused(
    secured: Mosquitto,
) -> None:
    """A runner named other than its user may not write that topic: the broker says 0x87,
    and the runner counts it as refused, not as dead-lettered."""
    runner = Runner([Subscriber("board")], topics=TOPICS, name="someone-else")
    with capture_logs() as logs:
        await _reject_one(secured, runner)
    assert (runner.stats.dead_lettered, runner.stats.dead_letters_refused) == (0, 1)
    (warning,) = [e for e in logs if e["event"] == "deadletter.refused"]
    assert warning["topic"] == "matchcast/deadletter/someone-else"
    assert warning["code"] == 0x87
    assert "pattern write matchcast/deadletter/%u" in warning["hint"]


async def test_a_refused_publish_raises_over_mqtt5(secured: Mosquitto) -> None:
    async with MqttClient(_url(secured, "scoreboard"), protocol="5") as client:
        with pytest.raises(PublishRefusedError) as info:
            await client.publish(TOPICS.events("x"), b"{}", qos=1)
        await client.publish("matchcast/deadletter/scoreboard", b"{}", qos=1)  # granted
    assert info.value.code == 0x87
    assert info.value.topic == TOPICS.events("x")
    assert "Not authorized" in str(info.value)


async def test_over_mqtt311_a_refused_publish_cannot_be_seen(secured: Mosquitto) -> None:
    """The documented limit: a 3.1.1 broker acknowledges a refused publish and drops it, so
    the client cannot tell (the ACL still stops it from reaching anyone: a reader of both
    topics gets the granted message published after it, and never the refused one)."""
    match_id = f"acl-{uuid.uuid4().hex[:8]}"
    granted = TOPICS.consumer_state("scoreboard", match_id)
    async with MqttClient(_url(secured, "operator")) as reader:
        await reader.subscribe(TOPICS.events(match_id), qos=1)
        await reader.subscribe(granted, qos=1)
        async with MqttClient(_url(secured, "scoreboard"), protocol="3.1.1") as client:
            await client.publish(TOPICS.events(match_id), b"refused", qos=1)  # no error
            await client.publish(granted, b"granted", qos=1)
        async with asyncio.timeout(10):
            first = await anext(aiter(reader.messages()))
    assert (first.topic, first.payload) == (granted, b"granted")


def test_default_names_differ_per_consumer() -> None:
    """watch, web and consume used to share one dead-letter topic (all 'consumer')."""
    names = {
        Runner([Subscriber("terminal")]).name,
        Runner([Subscriber("web")]).name,
        Runner([Subscriber("scoreboard"), Subscriber("ticker")]).name,
    }
    assert names == {"terminal", "web", "scoreboard,ticker"}
    named = Runner([Subscriber("web")], name="mine")
    named.use_broker_user("alice")
    assert named.name == "mine"
    # One level of a topic that is published to: no wildcard, no separator.
    assert Runner([Subscriber("a+b#c")]).name == "a-b-c"
    odd = Runner([Subscriber("web")])
    odd.use_broker_user("x/+")
    assert odd.name == "x-"
