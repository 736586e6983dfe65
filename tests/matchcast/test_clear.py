"""``matchcast clear`` removes matchcast's retained topics; it lists them and asks first."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable

import pytest
from structlog.testing import capture_logs

from consumers import MAX_DISCOVERED_PER_STATUS
from events import BrokerError, Message, PublishRefusedError, SubscribeRefusedError, Topics
from matchcast.app import retained, run_replay
from matchcast.app.replay import _StatusTopic
from matchcast.app.retained import RetainedTopic, find_retained, scan_retained
from matchcast.cli.common import live_matches
from matchcast.testbroker import Mosquitto
from matchcast.transport.broker import free_port
from matchcast.transport.connection import BrokerURL
from matchcast.transport.mqtt import MqttClient
from simulator import ReplayOptions, resolve_matches
from tests._cli import run_cli

pytestmark = pytest.mark.mosquitto

SEMI = resolve_matches(None)[0]
OTHER = resolve_matches("worldcup:2022/final")[0]


def _leave_retained(url: BrokerURL, topics: Topics) -> None:
    """Two finished matches (states), an offline replayer status (the last will of a
    replayer that died: one that ends removes its own), and a consumer report."""

    async def go() -> None:
        await run_replay([SEMI, OTHER], url, ReplayOptions(speed=None, topics=topics))
        will = _StatusTopic(topics, "r-died", [SEMI.match_id, OTHER.match_id]).will()
        async with MqttClient(url) as client:
            await client.publish(will.topic, will.payload, qos=1, retain=True)
            report = (await _one_state(url, topics, SEMI.match_id)).encode()
            await client.publish(
                topics.consumer_state("c1", SEMI.match_id), report, qos=1, retain=True
            )

    asyncio.run(go())


async def _one_state(url: BrokerURL, topics: Topics, match_id: str) -> str:
    async with MqttClient(url) as client:
        await client.subscribe(topics.state(match_id))
        async with asyncio.timeout(10):
            async for message in client.messages():
                return message.payload.decode()
    raise AssertionError("no retained state")  # pragma: no cover


def _found(url: BrokerURL, topics: Topics, match_id: str | None = None) -> list[RetainedTopic]:
    return asyncio.run(find_retained(url, topics, match_id=match_id))


@pytest.fixture
def root() -> str:
    return f"mctest-{uuid.uuid4().hex[:10]}"


def test_clear_lists_then_removes_every_retained_topic(mosquitto: Mosquitto, root: str) -> None:
    url, topics = BrokerURL.parse(mosquitto.url), Topics(root)
    _leave_retained(url, topics)
    before = _found(url, topics)
    assert sorted(t.kind for t in before) == ["consumer_state", "state", "state", "status"]
    result = run_cli("clear", "--broker", mosquitto.url, "--root", root, "--yes")
    assert result.code == 0, result.stderr
    state_line = f"would clear  {topics.state(SEMI.match_id)}  (state: finished, ARG 2-1 ENG"
    assert state_line in result.stdout
    assert f"cleared 4 retained topic(s) on {url} under {root}/" in result.stdout
    assert _found(url, topics) == []
    assert asyncio.run(live_matches(url, topics)) == []


def test_clear_match_removes_only_that_matchs_topics(mosquitto: Mosquitto, root: str) -> None:
    url, topics = BrokerURL.parse(mosquitto.url), Topics(root)
    _leave_retained(url, topics)
    result = run_cli(
        "clear", "--broker", mosquitto.url, "--root", root, "--match", SEMI.match_id, "--yes"
    )
    assert result.code == 0, result.stderr
    assert "cleared 2 retained topic(s)" in result.stdout  # its state and the consumer report
    left = _found(url, topics)
    # The replayer replayed both matches: its status stays with the other match's state.
    assert sorted((t.kind, t.match_id) for t in left) == [
        ("state", OTHER.match_id),
        ("status", None),
    ]


def test_clear_without_a_terminal_or_yes_lists_and_clears_nothing(
    mosquitto: Mosquitto, root: str
) -> None:
    url, topics = BrokerURL.parse(mosquitto.url), Topics(root)
    _leave_retained(url, topics)
    result = run_cli("clear", "--broker", mosquitto.url, "--root", root)
    assert result.code == 2
    assert "pass --yes" in result.stderr
    assert topics.state(OTHER.match_id) in result.stdout
    assert len(_found(url, topics)) == 4


def test_clear_asks_and_a_no_clears_nothing(
    mosquitto: Mosquitto, root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, topics = BrokerURL.parse(mosquitto.url), Topics(root)
    _leave_retained(url, topics)
    monkeypatch.setattr("matchcast.cli.clear._interactive", lambda: True)
    result = run_cli("clear", "--broker", mosquitto.url, "--root", root, input="n\n")
    assert result.code == 1
    assert f"would clear  {topics.state(OTHER.match_id)}  (state: finished" in result.stdout
    assert f"Clear 4 retained topic(s) on {url} under {root}/?" in result.stdout  # which broker
    assert "nothing cleared" in result.stdout
    assert len(_found(url, topics)) == 4
    result = run_cli("clear", "--broker", mosquitto.url, "--root", root, input="y\n")
    assert result.code == 0
    assert _found(url, topics) == []


def test_clear_without_broker_names_the_default_broker_it_is_about_to_clear(
    mosquitto: Mosquitto, root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No --broker and no $MATCHCAST_BROKER: the embedded broker's address is used, and the
    first line says so (the test's own broker stands in for 127.0.0.1:1883)."""
    monkeypatch.delenv("MATCHCAST_BROKER", raising=False)
    monkeypatch.setattr("matchcast.cli.clear.DEFAULT_EMBEDDED_PORT", mosquitto.port)
    url, topics = BrokerURL.parse(mosquitto.url), Topics(root)
    _leave_retained(url, topics)
    monkeypatch.setattr("matchcast.cli.clear._interactive", lambda: True)
    result = run_cli("clear", "--root", root, input="n\n")
    assert result.code == 1
    first = result.stdout.splitlines()[0]
    assert first == (
        f"searching {url} under {root}/ for retained topics "
        "(the default broker: no --broker or $MATCHCAST_BROKER)"
    )
    assert f"Clear 4 retained topic(s) on {url} under {root}/?" in result.stdout
    assert len(_found(url, topics)) == 4


def test_clear_names_its_broker_with_the_password_masked(mosquitto: Mosquitto, root: str) -> None:
    secret = f"pw-{uuid.uuid4().hex[:8]}"
    broker = f"mqtt://someone:{secret}@127.0.0.1:{mosquitto.port}"
    result = run_cli("clear", "--broker", broker, "--root", root, "--yes")
    assert result.code == 0, result.stderr
    assert result.stdout.splitlines()[0] == (
        f"searching mqtt://someone:***@127.0.0.1:{mosquitto.port} under {root}/ for retained topics"
    )
    assert secret not in result.stdout + result.stderr


def test_clear_keeps_a_running_replayers_status(mosquitto: Mosquitto, root: str) -> None:
    url, topics = BrokerURL.parse(mosquitto.url), Topics(root)
    online = b'{"status":"online","replayer_id":"r1","matches":["x"],"at":"2026-07-15T19:00:00Z"}'

    async def publish() -> None:
        async with MqttClient(url) as client:
            await client.publish(topics.status("r1"), online, qos=1, retain=True)

    asyncio.run(publish())
    result = run_cli("clear", "--broker", mosquitto.url, "--root", root, "--yes")
    assert result.code == 0
    assert f"keep         {topics.status('r1')}" in result.stdout
    assert "nothing to clear" in result.stdout
    assert [t.topic for t in _found(url, topics)] == [topics.status("r1")]


class _NoRetainedOnWildcards(MqttClient):
    """A client of a broker like RabbitMQ 3.10: wildcard subscriptions get no retained
    messages; only a subscription that names the topic does."""

    named: set[str]

    async def subscribe(self, topic_filter: str, *, qos: int = 1) -> None:
        self.named = getattr(self, "named", set())
        if "+" not in topic_filter and "#" not in topic_filter:
            self.named.add(topic_filter)
        await super().subscribe(topic_filter, qos=qos)

    async def messages(self):  # type: ignore[no-untyped-def,override]
        async for message in super().messages():
            if message.retain and message.topic not in getattr(self, "named", set()):
                continue
            yield message


def test_clear_on_a_broker_without_retained_wildcards_clears_what_the_statuses_name(
    mosquitto: Mosquitto, root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, topics = BrokerURL.parse(mosquitto.url), Topics(root)

    async def replay() -> None:
        """A replayer that died: its states, and the offline status its will left."""
        options = ReplayOptions(speed=None, topics=topics)
        await run_replay([SEMI, OTHER], url, options, replayer_id="r-named")
        will = _StatusTopic(topics, "r-named", [SEMI.match_id, OTHER.match_id]).will()
        async with MqttClient(url) as client:
            await client.publish(will.topic, will.payload, qos=1, retain=True)

    asyncio.run(replay())
    monkeypatch.setattr("matchcast.app.retained.MqttClient", _NoRetainedOnWildcards)
    assert _found(url, topics) == []  # nothing can be named
    result = run_cli(
        "clear", "--broker", mosquitto.url, "--root", root, "--replayer", "r-named", "--yes"
    )
    assert result.code == 0, result.stderr
    assert "cleared 3 retained topic(s)" in result.stdout  # the status and both states
    monkeypatch.undo()
    assert _found(url, topics) == []


def test_clear_on_a_list_clears_the_nodes_that_answer_and_names_the_one_that_did_not(
    mosquitto: Mosquitto, root: str
) -> None:
    """A node of the list is down: what the others hold is listed (with its node) and
    cleared, the silent one is named, and the exit is 1 (run it again when it is back)."""
    url, topics = BrokerURL.parse(mosquitto.url), Topics(root)
    _leave_retained(url, topics)
    down = f"mqtt://127.0.0.1:{free_port()}"
    result = run_cli("clear", "--broker", f"{mosquitto.url},{down}", "--root", root, "--yes")
    assert result.code == 1
    state_line = f"would clear  {topics.state(SEMI.match_id)}  (state: finished, ARG 2-1 ENG"
    assert state_line in result.stdout
    assert result.stdout.startswith(f"searching {url},{down} under {root}/ for retained")
    assert f"  on {url}\n" in result.stdout
    assert f"not searched: {down} (" in result.stdout
    assert "cleared 4 retained topic(s)" in result.stdout
    assert f"{down} did not answer" in result.stderr
    assert _found(url, topics) == []


def test_a_newer_replayers_status_is_read_not_called_unreadable(
    mosquitto: Mosquitto, root: str
) -> None:
    """A status with a field this build does not know (a newer replayer's) is still read: its
    matches are cleared with it (the compatibility rule: unknown fields are ignored)."""
    url, topics = BrokerURL.parse(mosquitto.url), Topics(root)
    status = (
        b'{"status": "offline", "replayer_id": "r-new", "matches": ["m-new"],'
        b' "at": "2026-07-15T19:00:00Z", "region": "eu-west"}'
    )

    async def leave() -> None:
        async with MqttClient(url) as client:
            await client.publish(topics.status("r-new"), status, qos=1, retain=True)

    asyncio.run(leave())
    (found,) = _found(url, topics)
    assert found.summary == "replayer r-new offline: m-new"
    assert found.matches == ("m-new",)


class _CountingSubscribes(MqttClient):
    """A client that counts the exact state topics it subscribes to, over every instance."""

    state_topics: list[str] = []  # noqa: RUF012 - shared on purpose: one list per test

    async def subscribe(self, topic_filter: str, *, qos: int = 1) -> None:
        if "+" not in topic_filter and topic_filter.endswith("/state"):
            self.state_topics.append(topic_filter)
        await super().subscribe(topic_filter, qos=qos)


def test_a_status_listing_many_matches_is_looked_up_only_as_far_as_the_limit(
    mosquitto: Mosquitto, root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forged offline status listing more match ids than the per-status limit: clear asks
    for no more of their states than the limit, and says so in one line and a log event."""
    url, topics = BrokerURL.parse(mosquitto.url), Topics(root)
    listed = MAX_DISCOVERED_PER_STATUS + 500
    status = {
        "status": "offline",
        "replayer_id": "r-many",
        "matches": [f"m{i}" for i in range(listed)],
        "at": "2026-07-15T19:00:00Z",
    }

    async def leave() -> None:
        async with MqttClient(url) as client:
            await client.publish(
                topics.status("r-many"), json.dumps(status).encode(), qos=1, retain=True
            )

    asyncio.run(leave())
    monkeypatch.setattr(_CountingSubscribes, "state_topics", [])
    monkeypatch.setattr("matchcast.app.retained.MqttClient", _CountingSubscribes)
    with capture_logs() as logs:
        (found,) = asyncio.run(scan_retained(url, topics)).found
    assert len(_CountingSubscribes.state_topics) == MAX_DISCOVERED_PER_STATUS
    assert (found.listed, len(found.matches)) == (listed, MAX_DISCOVERED_PER_STATUS)
    [said] = [e for e in logs if e["event"] == "retained.status_limited"]
    assert (said["listed"], said["limit"]) == (listed, MAX_DISCOVERED_PER_STATUS)
    result = run_cli("clear", "--broker", mosquitto.url, "--root", root, "--yes")
    assert result.code == 0, result.stderr
    assert result.stdout.count(f"lists {listed} matches") == 1
    assert (
        f"{topics.status('r-many')} lists {listed} matches: only the first "
        f"{MAX_DISCOVERED_PER_STATUS} were looked for" in result.stdout
    )
    assert "cleared 1 retained topic(s)" in result.stdout


def _failing_publishes(
    monkeypatch: pytest.MonkeyPatch, failures: int, error: Callable[[str], BrokerError]
) -> list[str]:
    """The next ``failures`` publishes of clear's clients raise ``error(topic)``; the topics
    of every publish, in order."""
    real, published = retained.MqttClient, []

    class Failing(real):  # type: ignore[misc, valid-type]
        async def publish(self, topic: str, payload: bytes, **kw: object) -> None:
            nonlocal failures
            published.append(topic)
            if failures:
                failures -= 1
                raise error(topic)
            await super().publish(topic, payload, **kw)

    monkeypatch.setattr(retained, "MqttClient", Failing)
    monkeypatch.setattr(retained, "CLEAR_RETRY_S", 0.01)
    return published


def _timed_out(topic: str) -> BrokerError:
    return BrokerError("mqtt://n1:1883", f"publish to {topic!r} failed: Operation timed out")


def test_a_clearing_publish_whose_ack_timed_out_is_tried_again_up_to_the_limit(
    mosquitto: Mosquitto, root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from matchcast.app.retained import CLEAR_TRIES

    url, topics = BrokerURL.parse(mosquitto.url), Topics(root)
    _leave_retained(url, topics)
    found = _found(url, topics)
    published = _failing_publishes(monkeypatch, CLEAR_TRIES - 1, _timed_out)
    assert asyncio.run(retained.clear_retained(url, found)) == 4
    first = found[0].topic
    assert published == [first] * CLEAR_TRIES + [t.topic for t in found[1:]]
    monkeypatch.undo()
    assert _found(url, topics) == []

    _leave_retained(url, topics)
    found = _found(url, topics)
    published = _failing_publishes(monkeypatch, CLEAR_TRIES, _timed_out)
    with pytest.raises(BrokerError, match="timed out"):
        asyncio.run(retained.clear_retained(url, found))
    assert published == [first] * CLEAR_TRIES


def test_a_clearing_publish_the_broker_refused_is_not_tried_again(
    mosquitto: Mosquitto, root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, topics = BrokerURL.parse(mosquitto.url), Topics(root)
    _leave_retained(url, topics)
    found = _found(url, topics)

    def refused(topic: str) -> BrokerError:
        return PublishRefusedError("mqtt://n1:1883", topic, 0x87, "Not authorized")

    published = _failing_publishes(monkeypatch, 1, refused)
    with pytest.raises(PublishRefusedError, match="Not authorized"):
        asyncio.run(retained.clear_retained(url, found))
    assert published == [found[0].topic]


async def test_a_scan_tries_again_a_subscription_the_broker_refused_at_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """NATS refuses a QoS 1 SUBSCRIBE (0x80) while JetStream cannot create its consumer; seen
    in CI on a young cluster, where `clear` then exited 1. The scan asks again."""
    topics = Topics(root="t-refused")
    state = topics.state("m1")

    class Refusing:
        url = "mqtt://node:1"
        asked: list[str] = []  # noqa: RUF012

        async def subscribe(self, topic_filter: str, *, qos: int = 1) -> None:
            self.asked.append(topic_filter)
            if self.asked.count(topic_filter) == 1:
                raise SubscribeRefusedError(self.url, topic_filter, [128])

        async def messages(self) -> AsyncIterator[Message]:
            yield Message(state, b"", 1, True)
            await asyncio.sleep(3600)

    monkeypatch.setattr(retained, "SUBSCRIBE_RETRY_S", 0.0)
    client = Refusing()
    found: dict[str, retained.RetainedTopic] = {}
    with capture_logs() as logs:
        await retained._collect(client, [topics.state()], topics, found)  # type: ignore[arg-type]
    assert client.asked == [topics.state(), topics.state()]
    assert [e["event"] for e in logs if e["event"] == "retained.subscribe_retried"] == [
        "retained.subscribe_retried"
    ]


def test_a_node_that_leaves_a_connect_unanswered_is_asked_again(
    mosquitto: Mosquitto, root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NATS now and then sends no CONNACK to a new client id's CONNECT (a CI run's clear
    exited 1 on it); the next CONNECT, under another client id, is answered at once. Here the
    first connection of the scan and the first of the clearing get no CONNACK."""
    url, topics = BrokerURL.parse(mosquitto.url), Topics(root)
    _leave_retained(url, topics)
    real = retained.MqttClient
    made: list[str] = []

    class SilentFirst(real):  # type: ignore[misc, valid-type]
        async def __aenter__(self) -> MqttClient:
            made.append(self.client_id)
            if len(made) in (1, 3):
                raise BrokerError(str(url), "cannot connect: no CONNACK to MQTT 3.1.1 within 2s")
            return await super().__aenter__()  # type: ignore[no-any-return]

    monkeypatch.setattr(retained, "MqttClient", SilentFirst)
    with capture_logs() as logs:
        found = asyncio.run(find_retained(url, topics))
        assert len(found) == 4
        assert asyncio.run(retained.clear_retained(url, found)) == 4
    assert len(made) == 4 and len(set(made)) == 4, "each try under a client id of its own"
    retried = [e for e in logs if e["event"] == "retained.connect_retried"]
    assert len(retried) == 2
    monkeypatch.setattr(retained, "MqttClient", real)
    assert _found(url, topics) == []


def test_a_connection_lost_after_a_timed_out_clear_is_opened_again_and_the_rest_cleared(
    mosquitto: Mosquitto, root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CI run on NATS: a clearing publish timed out, and the connection was gone with it
    (``The client is not currently connected`` on the next try); clear exited 1 with three
    topics left. Clearing is idempotent: a new connection to that node clears the rest."""
    url, topics = BrokerURL.parse(mosquitto.url), Topics(root)
    _leave_retained(url, topics)
    real = retained.MqttClient
    made: list[str] = []

    class DropsAfterFirstTimeout(real):  # type: ignore[misc, valid-type]
        async def __aenter__(self) -> MqttClient:
            made.append(self.client_id)
            self.dead = False
            return await super().__aenter__()  # type: ignore[no-any-return]

        async def publish(self, topic: str, payload: bytes, **kw: object) -> None:
            if self.dead:
                raise BrokerError(
                    str(url), "publish failed: The client is not currently connected."
                )
            if len(made) == 2:  # the first clearing connection: its first ack never comes
                self.dead = True
                raise BrokerError(str(url), f"publish to {topic!r} failed: Operation timed out")
            await super().publish(topic, payload, **kw)

    monkeypatch.setattr(retained, "MqttClient", DropsAfterFirstTimeout)
    with capture_logs() as logs:
        found = asyncio.run(find_retained(url, topics))
        assert len(found) == 4
        assert asyncio.run(retained.clear_retained(url, found)) == 4
    assert len(made) == 3 and len(set(made)) == 3, "the clearing opened again, as someone new"
    assert [e["attempt"] for e in logs if e["event"] == "retained.clear_retried"] == [1]
    monkeypatch.setattr(retained, "MqttClient", real)
    assert _found(url, topics) == []


@pytest.mark.parametrize(
    ("payload", "said"),
    [
        (b'{"score": {"NED": 3, "JPN": 2}, "status": "finished"}', "finished, NED 3 JPN 2"),
        (b'{"score": {}, "status": "scheduled"}', "scheduled, no score"),
        (b'{"status": "live"}', "unreadable"),
        (b"\xff not json", "unreadable"),
    ],
)
def test_a_consumer_report_of_score_and_status_alone_is_described_not_unreadable(
    payload: bytes, said: str
) -> None:
    """``matchcast verify`` takes a report of ``score`` and ``status`` alone; ``clear`` lists
    what such a report says, and calls unreadable only what no reader could take."""
    topics = Topics("matchcast-verify")
    message = Message(topics.consumer_state("js-app", "verify-gap"), payload, 1, True)
    found = retained._describe(topics, message)
    assert found is not None
    assert found.summary == f"consumer report: {said}"
