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


async def test_without_a_match_it_follows_the_live_matches_to_their_end(
    broker_url: BrokerURL, topics: Topics
) -> None:
    """``watch --exit-at-full-time`` with no ``--match``: an earlier run's finished state is
    not followed; the matches that play live are, and the watch returns when both ended."""
    options = ReplayOptions(speed=None, topics=topics)
    [earlier] = await run_replay([SEMI], broker_url, options)  # retained: finished
    final = resolve_matches("worldcup:2022/final")[0]
    runner = Runner([], topics=topics)
    async with asyncio.timeout(60):
        watch = asyncio.create_task(run_watch(broker_url, [], runner=runner, until_finished="live"))
        await runner.subscribed.wait()
        reports = await run_replay([SEMI, final], broker_url, options)
        states = await watch
    assert {m: s.status for m, s in states.items()} == {
        SEMI.match_id: "finished",
        final.match_id: "finished",
    }
    assert states[SEMI.match_id].run == reports[0].run > earlier.run


def test_the_cli_waits_for_live_matches_without_match() -> None:
    from matchcast.cli.options import until_finished

    assert until_finished(True, "+") == "live"
    assert until_finished(True, "m1") == {"m1"}
    assert until_finished(False, "+") is None
