"""A consumer's memory is bounded by the matches it tracks, however many ids it is fed."""

from __future__ import annotations

import asyncio

import pytest
from structlog.testing import capture_logs

from consumers import Runner, Subscriber
from events import Message, Topics, encode_event
from matchcast.testing import match_events
from tests._factories import kickoff

TOPICS = Topics()
EVENTS = [e.model_copy(update={"run": 7}) for e in match_events()]


def _as(match_id: str) -> list[Message]:
    return [
        Message(TOPICS.events(match_id), encode_event(e.model_copy(update={"match_id": match_id})))
        for e in EVENTS
    ]


@pytest.mark.slow
async def test_100000_match_ids_never_track_more_than_the_bound() -> None:
    """Past ``max_matches`` the longest-idle matches go (a twentieth of the bound at a
    time), each eviction logged and counted."""
    seen = 0

    def count(e: object, state: object) -> None:
        nonlocal seen
        seen += 1

    sub = Subscriber("s")
    sub.on()(count)
    runner = Runner([sub], topics=TOPICS, max_matches=100)
    payload = encode_event(kickoff(1, "m0"))
    with capture_logs() as logs:
        async with runner:
            most = 0
            for i in range(100_000):
                match_id = f"m{i}"
                body = payload.replace(b'"m0"', f'"{match_id}"'.encode())
                await runner.feed(Message(TOPICS.events(match_id), body))
                most = max(most, runner.tracked)
                if not i % 1000:
                    await asyncio.sleep(0)  # as a real reader does between reads
            await runner.join()
    assert most == 100
    evicted = runner.stats.evicted
    assert 100_000 - 100 <= evicted <= 100_000 - 95
    assert len([e for e in logs if e["event"] == "match.evicted"]) == evicted
    assert seen == 100_000  # every kick-off handled before its match was evicted
    assert set(runner.states) == {f"m{i}" for i in range(100_000 - runner.tracked, 100_000)}


async def test_the_longest_idle_match_is_evicted_first_live_or_not() -> None:
    runner = Runner([Subscriber("s")], topics=TOPICS, max_matches=3)
    with capture_logs() as logs:
        async with runner:
            for match_id in ("a", "b", "c"):
                await runner.feed(_as(match_id)[0])
            await runner.feed(_as("a")[1])  # a is active again: b is now the longest idle
            await runner.feed(_as("d")[0])
    assert sorted(runner.states) == ["a", "c", "d"]
    [evicted] = [e for e in logs if e["event"] == "match.evicted"]
    assert (evicted["match_id"], evicted["reason"]) == ("b", "bound")


async def test_a_finished_match_leaves_memory_after_its_grace_and_stays_finished() -> None:
    now = [0.0]
    runner = Runner([Subscriber("s")], topics=TOPICS, finished_grace_s=60.0, clock=lambda: now[0])
    with capture_logs() as logs:
        async with runner:
            for message in _as("done"):
                await runner.feed(message)
            now[0] = 59.0
            await runner.feed(_as("other")[0])
            assert "done" in runner.states  # within its grace
            now[0] = 61.0
            await runner.feed(_as("third")[0])
            assert "done" not in runner.states
            # A late redelivery of the finished run is refused, not taken for a new match.
            for message in _as("done")[-3:]:
                await runner.feed(message)
            assert "done" not in runner.states
    [evicted] = [e for e in logs if e["event"] == "match.evicted"]
    assert (evicted["match_id"], evicted["reason"]) == ("done", "finished")
    assert runner.stats.evicted == 1
    assert runner.stats.after_end == 3


async def test_a_schema_10_match_can_be_replayed_again_after_it_left_memory() -> None:
    """Run 0 (no run on the wire) cannot tell a new replay from a stale one by run: nothing is
    remembered of it, and the old guess (a kick-off emitted later) starts it again."""
    now = [0.0]
    seen: list[int] = []
    sub = Subscriber("s")
    sub.on()(lambda e, state: seen.append(e.seq) if e.match_id == "old" else None)
    runner = Runner([sub], topics=TOPICS, finished_grace_s=1.0, clock=lambda: now[0])
    legacy = [e.model_copy(update={"run": 0, "match_id": "old"}) for e in EVENTS]
    async with runner:
        for event in legacy:
            await runner.feed(Message(TOPICS.events("old"), encode_event(event)))
        now[0] = 5.0
        await runner.feed(_as("other")[0])  # a new match: the finished one is swept
        assert "old" not in runner.states
        for event in legacy[:3]:
            await runner.feed(Message(TOPICS.events("old"), encode_event(event)))
        await runner.join()
    assert seen == [*range(1, len(EVENTS) + 1), 1, 2, 3]
