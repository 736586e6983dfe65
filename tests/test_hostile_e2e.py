"""Hostile payloads through a real broker, into the consumer ``consume``, ``watch`` and ``web``
all run (``run_watch``): a retained one on the state topic and others on the events topic are
rejected, and the terminal view and the web hub still follow the match to its final score."""

from __future__ import annotations

import asyncio
import io

import aiomqtt
import pytest
from rich.console import Console

from consumers import Runner
from consumers.terminal import TerminalView
from events import Topics
from matchcast.app import run_replay, run_watch
from matchcast.testbroker import Mosquitto
from matchcast.transport.connection import BrokerURL
from matchcast.web import Hub
from matchcast.web._bridge import bridge
from simulator import ReplayOptions, resolve_matches

SEMI = resolve_matches("semifinal")[0]
DEEP_LIST = b"[" * 1000 + b"]" * 1000
DEEP_DICT = b'{"a":' * 1000 + b"1" + b"}" * 1000

pytestmark = pytest.mark.mosquitto


async def test_a_consumer_rejects_deep_json_retained_and_live_and_follows_the_match(
    mosquitto: Mosquitto, topics: Topics
) -> None:
    url = BrokerURL.parse(mosquitto.url)
    match_id = SEMI.match_id
    view = TerminalView(Console(file=io.StringIO(), force_terminal=False))
    hub = Hub(clock=lambda: 0.0)
    runner = Runner([view.subscriber, bridge(hub)], topics=topics)
    async with aiomqtt.Client(url.host, url.port) as attacker:
        await attacker.publish(topics.state(match_id), DEEP_LIST, qos=1, retain=True)
        async with asyncio.timeout(60):
            watch = asyncio.create_task(
                run_watch(url, [], runner=runner, until_finished={match_id})
            )
            await runner.subscribed.wait()
            for payload in (DEEP_LIST, DEEP_DICT, b"\xff" * 10):
                await attacker.publish(topics.events(match_id), payload, qos=1)
            while runner.stats.rejected < 4:
                await asyncio.sleep(0.01)
            options = ReplayOptions(speed=None, topics=topics)
            await run_replay([SEMI], url, options, replayer_id="hostile")
            states = await watch
        await attacker.publish(topics.state(match_id), b"", qos=1, retain=True)  # clear it
    assert runner.stats.rejected == 4
    assert states[match_id].scoreline == "ARG 2-1 ENG"
    assert view.board.states[match_id].status == "finished"
    hub_state = hub.state(match_id)
    assert hub_state is not None
    assert hub_state.scoreline == "ARG 2-1 ENG"
