"""Late join where wildcards get no retained messages (RabbitMQ 3.10): the runner subscribes to
the exact state topic of each match it knows, and after a lost session takes a newer snapshot."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from consumers import Runner, Subscriber
from consumers._latejoin import exact_state_topics
from events import ConnectionLostError, MatchState, Message, Topics, apply
from matchcast.testing import Harness, match_events

EVENTS = match_events()
MATCH = EVENTS[0].match_id


def _states() -> list[MatchState]:
    state, out = MatchState.new(MATCH), []
    for event in EVENTS:
        state = apply(state, event)
        out.append(state)
    return out


STATES = _states()


class Source:
    """An in-memory MessageSource that can say its session was given up."""

    def __init__(self, *, session_lost: bool = False) -> None:
        self.queue: asyncio.Queue[Message | None] = asyncio.Queue()
        self.filters: list[str] = []
        self.session_lost = session_lost

    async def subscribe(self, topic_filter: str, *, qos: int = 1) -> None:
        self.filters.append(topic_filter)

    async def messages(self) -> AsyncIterator[Message]:
        while (message := await self.queue.get()) is not None:
            yield message
        raise ConnectionLostError("mqtt://node1:1883", "connection lost")


def test_exact_topics_only_for_a_wildcard_filter() -> None:
    topics = Topics("r")
    assert exact_state_topics(topics, "+", ["b", "a"]) == [topics.state("a"), topics.state("b")]
    assert exact_state_topics(topics, "a", ["a"]) == []


async def test_a_rejoin_after_a_lost_session_takes_the_newer_snapshot_from_the_exact_topic() -> (
    None
):
    seen: list[int] = []
    sub = Subscriber("s")
    sub.on()(lambda event, _state: seen.append(event.seq))
    runner = Runner([sub])
    harness = Harness()
    first = Source()
    for event in EVENTS[:40]:
        first.queue.put_nowait(harness.message(event))
    first.queue.put_nowait(None)  # the node dies
    # Rejoined on another node with a clean session: the match ended while away, and only
    # the exact state topic gets the retained snapshot (RabbitMQ 3.10).
    second = Source(session_lost=True)
    second.queue.put_nowait(harness.message(STATES[-1], retain=True))
    async with runner, asyncio.timeout(10):
        with pytest.raises(ConnectionLostError):
            await runner.run(first)
        assert first.filters == runner.topic_filters()  # nothing known yet: no exact topic
        task = asyncio.create_task(runner.run(second))
        while MATCH not in runner.states or runner.states[MATCH].last_seq < len(EVENTS):
            await asyncio.sleep(0.01)
        runner.stop()
        await task
    assert Topics().state(MATCH) in second.filters
    assert seen == list(range(1, 41))  # nothing handled twice
    assert runner.states[MATCH].scoreline == STATES[-1].scoreline
    assert runner.stats.resyncs == 1
