"""The semifinal replays over a real broker (embedded amqtt and mosquitto) end to end."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import shutil
import subprocess

import aiomqtt
import pytest

from consumers import Runner, Scoreboard
from events import Event, MatchClock, MatchState, Topics, decode_event, decode_state
from matchcast.app import run_replay, run_watch
from matchcast.testbroker import REQUIRE_ENV
from matchcast.transport.connection import BrokerURL
from matchcast.transport.mqtt import MqttClient
from simulator import ReplayOptions, expand, resolve_matches
from tests._require import require

SEMI = resolve_matches("semifinal")[0]
EXPECTED = [s.event for s in expand(SEMI)]


async def _collect_events(
    url: BrokerURL, topics: Topics, ready: asyncio.Event, out: list[tuple[float, Event]]
) -> None:
    """An independent subscriber (plain aiomqtt, not our runner) until full time."""
    async with aiomqtt.Client(url.host, url.port, protocol=aiomqtt.ProtocolVersion.V311) as client:
        await client.subscribe(topics.events("+"), qos=1)
        ready.set()
        async for message in client.messages:
            assert isinstance(message.payload, bytes)
            event = decode_event(message.payload, topic=message.topic.value)
            out.append((dt.datetime.now(dt.UTC).timestamp(), event))
            if event.type == "full_time":
                return


async def _retained_state(url: BrokerURL, topic: str, *, live_ok: bool = False) -> MatchState:
    """The first state message on ``topic``: the retained one (or a live one if allowed)."""
    async with aiomqtt.Client(
        url.host, url.port, identifier="e2e-retained", protocol=aiomqtt.ProtocolVersion.V311
    ) as client:
        await client.subscribe(topic, qos=1)
        async with asyncio.timeout(10):
            async for message in client.messages:
                assert message.retain or live_ok
                assert isinstance(message.payload, bytes)
                return decode_state(message.payload, topic=topic)
    raise AssertionError("no retained state")


async def _replay_and_collect(url: BrokerURL, options: ReplayOptions) -> list[tuple[float, Event]]:
    got: list[tuple[float, Event]] = []
    ready = asyncio.Event()
    async with asyncio.timeout(60):
        collector = asyncio.create_task(_collect_events(url, options.topics, ready, got))
        await ready.wait()
        await run_replay([SEMI], url, options, replayer_id="t")
        await collector
    return got


async def test_every_event_arrives_once_in_order_with_clock_and_score(
    broker_url: BrokerURL, topics: Topics
) -> None:
    got = await _replay_and_collect(broker_url, ReplayOptions(speed=None, topics=topics))
    events = [e for _, e in got]
    assert [e.seq for e in events] == list(range(1, len(EXPECTED) + 1))
    assert [(e.type, e.clock) for e in events] == [(e.type, e.clock) for e in EXPECTED]
    goals = [(e.clock.label, e.scorer, e.team, e.score) for e in events if e.type == "goal"]
    assert goals == [
        ("55'", "Anthony Gordon", "ENG", {"ARG": 0, "ENG": 1}),
        ("86'", "Enzo Fernández", "ARG", {"ARG": 1, "ENG": 1}),
        ("90+2'", "Lautaro Martínez", "ARG", {"ARG": 2, "ENG": 1}),
    ]
    final = await _retained_state(broker_url, topics.state(SEMI.match_id))
    assert final.score == {"ARG": 2, "ENG": 1}
    assert final.status == "finished"
    assert final.last_seq == len(EXPECTED)


async def test_the_replayer_status_is_retained_while_it_runs_and_removed_after(
    broker_url: BrokerURL, topics: Topics
) -> None:
    statuses: list[bytes] = []

    async def read_status() -> None:
        async with aiomqtt.Client(
            broker_url.host, broker_url.port, protocol=aiomqtt.ProtocolVersion.V311
        ) as c:
            await c.subscribe(topics.status("r1"), qos=1)
            async for message in c.messages:
                assert isinstance(message.payload, bytes)
                statuses.append(message.payload)
                if not message.payload:
                    return  # removed

    async with asyncio.timeout(30), asyncio.TaskGroup() as tg:
        reader = tg.create_task(read_status())
        await asyncio.sleep(0.2)  # subscribed (a retained status is read either way)
        options = ReplayOptions(speed=600, start=MatchClock.at(88), topics=topics)
        await run_replay([SEMI], broker_url, options, replayer_id="r1")
        await reader
    assert json.loads(statuses[0])["status"] == "online"
    assert json.loads(statuses[0])["matches"] == [SEMI.match_id]
    assert statuses[-1] == b""


async def test_at_a_high_speed_factor_each_event_lands_on_its_schedule(
    broker_url: BrokerURL, topics: Topics
) -> None:
    # From 80' at 600x: about 2 s of replay, one event every 100 ms or so.
    options = ReplayOptions(speed=600, start=MatchClock.at(80), topics=topics)
    got = await _replay_and_collect(broker_url, options)
    assert len(got) == len(EXPECTED) - (next(e.seq for e in EXPECTED if e.clock.label == "80'") - 1)
    offsets = []
    for received_at, event in got:
        assert event.scheduled_at is not None
        offsets.append(received_at - event.scheduled_at.timestamp())
    # A bound only a bug breaks, whatever the machine's load (benchmarks/replay_bench.py
    # measures lateness): nothing arrives before it was due, so the events follow their
    # schedule (sent all at once at the start, the later ones would come early).
    assert min(offsets) > -0.005, "an event arrived before it was due"


async def test_a_late_subscriber_starts_from_the_snapshot_without_double_counting(
    broker_url: BrokerURL, topics: Topics
) -> None:
    # Half time lasts a second here: the joiner subscribes while nothing is published. Joining
    # mid-burst (a goal and the possession after it come within a millisecond) is a different
    # case with its own tests: the event before the snapshot is held and resumed with it, or
    # missed and repaired from the next snapshot (tests/consumers/test_runner.py).
    options = ReplayOptions(speed=1500, topics=topics, break_seconds=1.0)
    board = Scoreboard()
    seen: list[int] = []
    board.subscriber.on()(lambda e, s: seen.append(e.seq))
    joined: list[MatchState] = []
    board.subscriber.on_state(joined.append)

    async def late_join() -> dict[str, MatchState]:
        # join at half time: wait for the retained state to say so
        while True:
            try:
                async with asyncio.timeout(0.5):
                    state = await _retained_state(
                        broker_url, topics.state(SEMI.match_id), live_ok=True
                    )
                if state.status == "half_time":
                    break
            except TimeoutError:
                pass
            await asyncio.sleep(0.02)
        return await run_watch(
            broker_url, [board.subscriber], topics=topics, until_finished={SEMI.match_id}
        )

    async with asyncio.timeout(60):
        joiner = asyncio.create_task(late_join())
        await run_replay([SEMI], broker_url, options)
        states = await joiner
    assert len(joined) == 1
    start = joined[0].last_seq
    assert joined[0].status == "half_time"
    assert joined[0].score == {"ARG": 0, "ENG": 0}
    assert seen == list(range(start + 1, len(EXPECTED) + 1)), "every later event once, in order"
    assert states[SEMI.match_id].score == {"ARG": 2, "ENG": 1}
    assert len(states[SEMI.match_id].goals) == 3  # no goal counted twice


async def test_our_runner_and_scoreboard_agree_with_the_final_state(
    broker_url: BrokerURL, topics: Topics
) -> None:
    board = Scoreboard()
    runner = Runner([board.subscriber], topics=topics)
    async with asyncio.timeout(60):
        watch = asyncio.create_task(
            run_watch(broker_url, [], runner=runner, until_finished={SEMI.match_id})
        )
        await asyncio.wait_for(runner.subscribed.wait(), 10)
        await run_replay([SEMI], broker_url, ReplayOptions(speed=None, topics=topics))
        states = await watch
    assert states[SEMI.match_id].scoreline == "ARG 2-1 ENG"
    assert board.states[SEMI.match_id].scoreline == "ARG 2-1 ENG"
    assert "wc2026-sf-arg-eng  2H 90+2'  ARG 2-1 ENG" in board.lines
    assert runner.stats.duplicates == 0
    assert runner.stats.gaps == 0
    assert runner.stats.rejected == 0


async def test_the_embedded_broker_is_reached_over_3_1_1(amqtt_url: BrokerURL) -> None:
    async with MqttClient(amqtt_url) as client:
        assert client.protocol_version == "3.1.1"


@pytest.mark.mosquitto
async def test_mosquitto_gets_mqtt5_properties(mosquitto_url: BrokerURL, topics: Topics) -> None:
    async with MqttClient(mosquitto_url) as probe:
        assert probe.protocol_version == "5"
    async with aiomqtt.Client(
        mosquitto_url.host, mosquitto_url.port, protocol=aiomqtt.ProtocolVersion.V5
    ) as c:
        await c.subscribe(topics.events("+"), qos=1)
        await run_replay([SEMI], mosquitto_url, ReplayOptions(speed=None, topics=topics))
        async with asyncio.timeout(10):
            message = await anext(aiter(c.messages))
    props = message.properties
    assert props is not None
    assert props.ContentType == "application/json"
    assert ("seq", "1") in props.UserProperty
    assert 0 < props.MessageExpiryInterval <= 3600


@pytest.mark.mosquitto
async def test_mosquitto_sub_sees_the_event_stream_and_state(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    require(
        shutil.which("mosquitto_sub"),
        "mosquitto_sub",
        REQUIRE_ENV,
        "apt-get install mosquitto-clients",
    )
    proc = await asyncio.create_subprocess_exec(
        "mosquitto_sub",
        "-h",
        mosquitto_url.host,
        "-p",
        str(mosquitto_url.port),
        "-t",
        f"{topics.root}/#",
        "-v",
        "-C",
        str(2 * len(EXPECTED) + 2),
        "-W",
        "30",
        stdout=subprocess.PIPE,
    )
    await asyncio.sleep(0.3)  # mosquitto_sub has no ready signal; give it time to subscribe
    await run_replay(
        [SEMI], mosquitto_url, ReplayOptions(speed=None, topics=topics), replayer_id="cli"
    )
    out, _ = await proc.communicate()
    lines = out.decode().splitlines()
    by_topic: dict[str, list[str]] = {}
    for line in lines:
        topic, _, payload = line.partition(" ")
        by_topic.setdefault(topic, []).append(payload)
    events = [decode_event(p.encode()) for p in by_topic[topics.events(SEMI.match_id)]]
    states = [decode_state(p.encode()) for p in by_topic[topics.state(SEMI.match_id)]]
    assert [e.seq for e in events] == list(range(1, len(EXPECTED) + 1))
    assert [s.last_seq for s in states] == list(range(1, len(EXPECTED) + 1))
    assert states[-1].scoreline == "ARG 2-1 ENG"
    assert json.loads(by_topic[topics.status("cli")][0])["status"] == "online"


@pytest.mark.mosquitto
@pytest.mark.parametrize("qos", [0, 1, 2])
async def test_every_qos_delivers_the_whole_match_at_max_speed(
    mosquitto_url: BrokerURL, topics: Topics, qos: int
) -> None:
    got = await _replay_and_collect(
        mosquitto_url, ReplayOptions(speed=None, topics=topics, qos=qos)
    )
    assert [e.seq for _, e in got] == list(range(1, len(EXPECTED) + 1))


@pytest.mark.mosquitto
async def test_many_matches_at_max_speed_share_one_window_and_all_finish(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    """A hundred matches on one connection: the in-flight window is per connection, so
    nothing queues behind the client long enough to time out."""
    matches = resolve_matches("sim:1-100")
    reports = await run_replay(matches, mosquitto_url, ReplayOptions(speed=None, topics=topics))
    assert len(reports) == 100
    for match, report in zip(matches, reports, strict=True):
        assert report.final_state is not None
        assert report.final_state.status == "finished"
        assert report.final_state.score == match.final_score()
    final = await _retained_state(mosquitto_url, topics.state(matches[-1].match_id))
    assert final.score == matches[-1].final_score()
