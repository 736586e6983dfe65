"""20 SIGKILLs of a persistent mosquitto during replays: each seq is handled exactly once.

A broker killed loses what it acknowledged since its last save; its session queues and its
retained state go back to that save, and it redelivers messages the consumer already handled.
The replayer re-sends its recent window after each reconnect, and the consumer (a persistent
session, as ``consume --session``) drops by run and seq what it already handled. The handlers
must see every seq of every run once: zero duplicate and zero missing calls.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter

import pytest

from consumers import Runner, Subscriber
from events import BrokerError, Event, MatchState, Topics
from matchcast.app import run_replay, run_watch
from matchcast.testbroker import Mosquitto, mosquitto_binary
from matchcast.transport.connection import BrokerURL
from simulator import ReplayOptions, expand, resolve_matches

SEMI = resolve_matches("semifinal")[0]
LAST_SEQ = len(expand(SEMI))
KILLS = 20

pytestmark = [pytest.mark.mosquitto, pytest.mark.slow]


async def _kill_and_replay(
    broker: Mosquitto,
    topics: Topics,
    *,
    kills: int,
    every_s: float,
    speed: float,
    save_by_restart: bool = False,
) -> tuple[Counter[tuple[int, int]], list[int], Runner]:
    url = BrokerURL.parse(broker.url)
    handled: Counter[tuple[int, int]] = Counter()
    ended: set[int] = set()
    sub = Subscriber("exactly-once")

    @sub.on()
    def note(event: Event, state: MatchState) -> None:
        handled[event.run, event.seq] += 1
        if event.type == "full_time":
            ended.add(event.run)

    # What a kill takes from the broker the replayer sends again once both are back: on a busy
    # machine that took longer than the runner's usual half-second wait for a missing seq,
    # and the gap was repaired from the snapshot first (right state, events unhandled). This
    # test is of the broker and the replayer, so the runner waits for them.
    runner = Runner([sub], topics=topics, reorder_wait=5.0)
    runs: list[int] = []
    killed = 0

    replaying = asyncio.Event()  # a replayer is live: what a kill loses, it sends again

    async def killer() -> None:
        nonlocal killed
        while killed < kills:
            await asyncio.sleep(every_s)
            await replaying.wait()
            broker.kill()
            killed += 1
            await asyncio.sleep(0.1)
            await asyncio.to_thread(broker.start)

    async def replays() -> None:
        options = ReplayOptions(speed=speed, topics=topics, break_seconds=0.5)
        # At least two runs, so exactly-once is held across a new run too (a replayer whose
        # connection keeps dying waits longer each time: the kills may all fall in one run).
        while killed < kills or len(runs) < 2:
            replaying.set()
            try:
                (report,) = await run_replay([SEMI], url, options, replayer_id="sigkill")
            except BrokerError:
                # Killed before the replayer's first connection: a replay refuses a broker that
                # is down when it starts (an operator starts it again), so start again.
                replaying.clear()
                await asyncio.sleep(0.2)
                continue
            replaying.clear()
            runs.append(report.run)
            # No kill until the consumer has this run's end: once its replayer is gone, no
            # one would send again what a kill took from the broker's queue.
            while report.run not in ended:
                await asyncio.sleep(0.05)

    async with asyncio.timeout(150):
        watch = asyncio.create_task(
            run_watch(
                url,
                [],
                runner=runner,
                client_id=f"sigkill-{topics.root}",
                clean_start=False,
                session_expiry=600,
            )
        )
        await runner.subscribed.wait()
        if save_by_restart:
            # mosquitto saves on a clean shutdown: the session is older than the last save, as
            # a long-lived consumer's is. The consumer reconnects and resumes it.
            runner.subscribed.clear()
            await asyncio.to_thread(broker.stop)
            await asyncio.to_thread(broker.start)
            await runner.subscribed.wait()
        else:
            await asyncio.sleep(2.5)  # the broker saved the session (autosave_interval 1)
        async with asyncio.TaskGroup() as tg:
            tg.create_task(killer())
            tg.create_task(replays())
        while not set(runs) <= ended:  # the last run's tail, still on its way
            await asyncio.sleep(0.05)
        runner.stop()
        await watch
    return handled, runs, runner


def _assert_exactly_once(handled: Counter[tuple[int, int]], runs: list[int]) -> None:
    expected = {(run, seq) for run in runs for seq in range(1, LAST_SEQ + 1)}
    duplicates = {k: n for k, n in handled.items() if n > 1}
    missing = sorted(expected - set(handled))
    assert not duplicates, f"handled more than once: {sorted(duplicates)[:20]}"
    assert not missing, f"never handled: {missing[:20]}"
    assert set(handled) == expected


async def test_20_sigkills_with_a_short_autosave_lose_and_repeat_nothing(topics: Topics) -> None:
    binary = mosquitto_binary()
    assert binary is not None
    broker = Mosquitto(binary, persistence=True).start()  # autosave_interval 1
    try:
        handled, runs, runner = await _kill_and_replay(
            broker, topics, kills=KILLS, every_s=1.0, speed=480
        )
    finally:
        broker.stop()
    _assert_exactly_once(handled, runs)
    assert runner.stats.duplicates > 0  # the broker did redeliver; the runner dropped them


async def test_sigkills_with_mosquittos_usual_autosave_interval(topics: Topics) -> None:
    """autosave_interval 1800: every kill takes the broker back to its last save (here the
    clean restart after the consumer subscribed): its session comes back with its
    subscription, everything acknowledged since is lost, and the re-send window covers it."""
    binary = mosquitto_binary()
    assert binary is not None
    broker = Mosquitto(binary, persistence=True)
    conf = broker.config().replace("autosave_interval 1\n", "autosave_interval 1800\n")
    assert "autosave_interval 1800" in conf
    broker.config = lambda: conf  # type: ignore[method-assign]
    broker.start()
    try:
        handled, runs, _ = await _kill_and_replay(
            broker, topics, kills=5, every_s=1.5, speed=960, save_by_restart=True
        )
    finally:
        with contextlib.suppress(Exception):
            broker.stop()
    _assert_exactly_once(handled, runs)


async def test_a_session_younger_than_the_last_save_loses_only_what_it_reports(
    topics: Topics,
) -> None:
    """The limit: a session the broker never saved dies with it. What was published before
    the consumer subscribed again may never reach it; that is reported as a gap and the state
    repaired from the next snapshot. Nothing is handled twice, and every match ends right."""
    binary = mosquitto_binary()
    assert binary is not None
    broker = Mosquitto(binary, persistence=True)
    conf = broker.config().replace("autosave_interval 1\n", "autosave_interval 1800\n")
    broker.config = lambda: conf  # type: ignore[method-assign]
    broker.start()
    try:
        handled, runs, runner = await _kill_and_replay(
            broker, topics, kills=5, every_s=1.5, speed=960
        )
    finally:
        with contextlib.suppress(Exception):
            broker.stop()
    expected = {(run, seq) for run in runs for seq in range(1, LAST_SEQ + 1)}
    assert not {k: n for k, n in handled.items() if n > 1}, "a seq was handled twice"
    missing = expected - set(handled)
    assert runner.stats.missing >= len(missing), "a lost seq went unreported"
    final = runner.states[SEMI.match_id]
    assert (final.run, final.status, final.scoreline) == (runs[-1], "finished", "ARG 2-1 ENG")
