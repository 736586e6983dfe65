"""``--exit-at-full-time`` (``run_watch(until_finished=...)``) waits for the full time of a run
it saw live: a finished state retained by an earlier run ends nothing."""

from __future__ import annotations

import asyncio

from consumers import Runner, Subscriber
from events import MatchState, Topics
from matchcast.app import run_replay, run_watch
from matchcast.transport.connection import BrokerURL
from simulator import ReplayOptions, resolve_matches

SEMI = resolve_matches(None)[0]


async def test_a_finished_state_of_an_earlier_run_does_not_end_the_watch(
    broker_url: BrokerURL, topics: Topics
) -> None:
    options = ReplayOptions(speed=None, topics=topics)
    [earlier] = await run_replay([SEMI], broker_url, options)  # retained: finished
    joined: list[MatchState] = []
    got_retained = asyncio.Event()
    sub = Subscriber("joined")

    @sub.on_state
    def _joined(state: MatchState) -> None:
        joined.append(state)
        got_retained.set()

    runner = Runner([sub], topics=topics)
    async with asyncio.timeout(60):
        watch = asyncio.create_task(
            run_watch(broker_url, [], runner=runner, until_finished={SEMI.match_id})
        )
        await got_retained.wait()
        assert (joined[0].status, joined[0].run) == ("finished", earlier.run)
        # A watch that stopped at that state returns the earlier run's (the assert below).
        [later] = await run_replay([SEMI], broker_url, options)
        states = await watch
    assert later.run > earlier.run
    assert (states[SEMI.match_id].status, states[SEMI.match_id].run) == ("finished", later.run)
