"""Bad input against a real broker: each bad message gets a structured log line, a counter and
a copy on the dead-letter topic, and the consumer keeps going to the right final score."""

from __future__ import annotations

import asyncio
import base64
import json

import aiomqtt
import pytest
from structlog.testing import capture_logs

from consumers import Runner, Scoreboard
from events import MAX_PAYLOAD_BYTES, Topics, encode_event
from matchcast.app import run_replay, run_watch
from matchcast.testing import match_events
from matchcast.transport.connection import BrokerURL
from simulator import ReplayOptions, resolve_matches

SEMI = resolve_matches("semifinal")[0]
GOAL = next(e for e in match_events("semifinal") if e.type == "goal")


def _bad_messages(topics: Topics) -> list[tuple[str, bytes, str]]:
    """(topic, payload, what the log's reason must say)."""
    events = topics.events(SEMI.match_id)
    good = json.loads(encode_event(GOAL))
    return [
        (events, b"{not json", "not JSON"),
        (events, b'{"type": "goal", "match_id": "x"}', "Field required"),
        (events, json.dumps({**good, "type": "teleport"}).encode(), "teleport"),
        (events, json.dumps({**good, "schema_version": "9.0"}).encode(), "not supported"),
        (events, b" " * (MAX_PAYLOAD_BYTES + 1), "exceeds"),
        (events, json.dumps({**good, "seq": 10**9}).encode(), "implausibly far"),
        (events, json.dumps({**good, "seq": -4}).encode(), "seq"),
        (events, json.dumps({**good, "shot_id": "s" * 65}).encode(), "at most 64 characters"),
        (
            events,
            json.dumps({**good, "match_id": "other-match"}).encode(),
            "does not match the topic",
        ),
        (topics.state(SEMI.match_id), b'{"match_id": 5}', "match_id"),
    ]


@pytest.mark.mosquitto
async def test_bad_messages_are_logged_counted_dead_lettered_and_the_match_goes_on(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    url = mosquitto_url
    board = Scoreboard()
    runner = Runner([board.subscriber], topics=topics, name="scoreboard")
    bad = _bad_messages(topics)
    dead: list[dict[str, str]] = []
    with capture_logs() as logs:
        async with asyncio.timeout(60), aiomqtt.Client(url.host, url.port) as rogue:
            await rogue.subscribe(topics.deadletter("+"), qos=1)
            watch = asyncio.create_task(
                run_watch(url, [], runner=runner, until_finished={SEMI.match_id})
            )
            await runner.subscribed.wait()
            for topic, payload, _ in bad:
                await rogue.publish(topic, payload, qos=1)
            async for message in rogue.messages:
                assert isinstance(message.payload, bytes)
                dead.append(json.loads(message.payload))
                if len(dead) == len(bad):
                    break
            await run_replay([SEMI], url, ReplayOptions(speed=None, topics=topics))
            states = await watch
    assert states[SEMI.match_id].scoreline == "ARG 2-1 ENG"
    assert runner.stats.rejected == len(bad)
    assert runner.stats.dead_lettered == len(bad)
    rejected = [entry for entry in logs if entry["event"] == "message.rejected"]
    assert len(rejected) == len(bad)
    for (topic, payload, needle), log, letter in zip(bad, rejected, dead, strict=True):
        assert log["topic"] == topic
        assert needle in log["reason"], (needle, log["reason"])
        assert letter["topic"] == topic
        assert letter["reason"] == log["reason"]
        assert letter["consumer"] == "scoreboard"
        assert base64.b64decode(letter["payload_base64"]) == payload[:MAX_PAYLOAD_BYTES]
