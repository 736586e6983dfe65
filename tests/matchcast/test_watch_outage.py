"""A consumer whose connection is down while the match ends takes the final score from the
retained state when it is back.

A tester's run: a TCP forwarder in front of mosquitto killed at 20 s and started again after
``replay.finished``; ``consume`` (either client) and ``watch --exit-at-full-time`` reconnected
and stayed on ``1H 32' ARG 0-0 ENG`` for good, though mosquitto held the final state. A newer
snapshot of the same run was taken only after a gap seen between events, and none followed.
A connection that resumed no session now expects a newer snapshot of each match it knows.
"""

from __future__ import annotations

import asyncio

import pytest
from structlog.testing import capture_logs

from consumers import Runner, Subscriber
from events import Topics
from matchcast.app import run_replay, run_watch
from matchcast.testbroker import FaultProxy
from matchcast.transport.connection import BrokerURL
from simulator import ReplayOptions, resolve_matches
from tests._factories import SEMIFINAL_EVENTS

pytestmark = pytest.mark.mosquitto

SEMI = resolve_matches("semifinal")[0]


async def test_an_outage_across_full_time_ends_on_the_final_score(
    mosquitto_url: BrokerURL, client_kind: str
) -> None:
    topics = Topics(f"mctest-outage-{client_kind}")
    seen: list[int] = []
    sub = Subscriber("seen")
    sub.on()(lambda event, _state: seen.append(event.seq))
    runner = Runner([sub], topics=topics)
    async with FaultProxy(mosquitto_url.host, mosquitto_url.port) as proxy:
        through = BrokerURL("127.0.0.1", proxy.port)
        with capture_logs() as logs:
            async with asyncio.timeout(60), asyncio.TaskGroup() as tg:
                watch = tg.create_task(
                    run_watch(
                        through,
                        [],
                        runner=runner,
                        until_finished={SEMI.match_id},
                        client=client_kind,
                    )
                )
                await runner.subscribed.wait()
                options = ReplayOptions(speed=800.0, break_seconds=0.2, topics=topics)
                replay = tg.create_task(run_replay([SEMI], mosquitto_url, options))
                while len(seen) < 20:
                    await asyncio.sleep(0.02)
                proxy.refuse = True  # the consumer's broker is down ...
                proxy.drop()
                await replay  # ... until after full time
                proxy.refuse = False
                states = await watch
    state = states[SEMI.match_id]
    assert (state.scoreline, state.status) == ("ARG 2-1 ENG", "finished")
    assert seen == sorted(set(seen)), "no seq handled twice"
    assert runner.stats.resyncs == 1
    # What was published while away is a gap, reported as one: never handled, and counted.
    assert (runner.stats.gaps, runner.stats.missing) == (1, SEMIFINAL_EVENTS - seen[-1])
    synced = [e for e in logs if e["event"] == "state.synchronised" and e["reason"] == "gap"]
    assert [e["score"] for e in synced] == ["ARG 2-1 ENG"]
