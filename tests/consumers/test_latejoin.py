"""Late join where wildcards get no retained messages (RabbitMQ 3.10): the runner subscribes to
the exact state topic of each match it knows, and after a lost session takes a newer snapshot."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from structlog.testing import capture_logs

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
    """An in-memory MessageSource whose connections resume no session."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Message | None] = asyncio.Queue()
        self.filters: list[str] = []

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
    second = Source()
    second.queue.put_nowait(harness.message(STATES[-1], retain=True))
    async with runner, asyncio.timeout(10):
        with pytest.raises(ConnectionLostError):
            await runner.run(first)
        # The wildcards first; the reader runs beside the subscribing, so a match it learnt
        # meanwhile (here, from the events already queued) gets its exact topic too.
        assert first.filters[: len(runner.topic_filters())] == runner.topic_filters()
        task = asyncio.create_task(runner.run(second))
        while MATCH not in runner.states or runner.states[MATCH].last_seq < len(EVENTS):
            await asyncio.sleep(0.01)
        runner.stop()
        await task
    assert Topics().state(MATCH) in second.filters
    assert seen == list(range(1, 41))  # nothing handled twice
    assert runner.states[MATCH].scoreline == STATES[-1].scoreline
    assert runner.stats.resyncs == 1


def _status(replayer_id: str, matches: list[str], **extra: object) -> bytes:
    body: dict[str, object] = {
        "status": "offline",
        "replayer_id": replayer_id,
        "matches": matches,
        "at": "2026-07-15T19:00:00Z",
        **extra,
    }
    return json.dumps(body).encode()


async def test_a_named_replayers_status_leads_to_the_exact_state_topics_of_its_matches() -> None:
    """Joining after full time where wildcards get no retained messages: the retained status of
    a replayer named to the runner lists its matches; the runner subscribes to each one's exact
    state topic, once per connection, and takes the snapshot that arrives there."""
    topics = Topics("r")
    runner = Runner([Subscriber("s")], topics=topics, replayers=["rep-1"])
    assert topics.status("rep-1") in runner.topic_filters()
    source = Source()
    # a newer replayer's field is ignored (the compatibility rule)
    status = _status("rep-1", [MATCH, "other-match"], added_in_2_0=True)
    source.queue.put_nowait(Message(topics.status("rep-1"), status, retain=True))
    source.queue.put_nowait(Message(topics.status("rep-1"), status, retain=False))  # again
    async with runner, asyncio.timeout(10):
        task = asyncio.create_task(runner.run(source))
        while topics.state("other-match") not in source.filters:
            await asyncio.sleep(0.01)
        source.queue.put_nowait(
            Message(topics.state(MATCH), STATES[-1].model_dump_json().encode(), retain=True)
        )
        while MATCH not in runner.states:
            await asyncio.sleep(0.01)
        runner.stop()
        await task
    discovered = [f for f in source.filters if f not in runner.topic_filters()]
    assert discovered == [topics.state(MATCH), topics.state("other-match")]
    assert runner.states[MATCH].scoreline == "ARG 2-1 ENG"
    assert runner.stats.rejected == 0


async def test_a_status_that_is_not_one_costs_only_itself() -> None:
    """A forged status (a wildcard for a match id, or not JSON) is rejected and dead-lettered;
    nothing is subscribed for it, and the runner goes on."""
    topics = Topics("r")
    runner = Runner([Subscriber("s")], topics=topics, replayers=["rep-1"])
    source = Source()
    for payload in (_status("rep-1", ["#"]), b"{not json", _status("rep-1", ["a/b"])):
        source.queue.put_nowait(Message(topics.status("rep-1"), payload, retain=True))
    # another replayer's status is not read at all
    source.queue.put_nowait(Message(topics.status("rep-2"), _status("rep-2", [MATCH])))
    source.queue.put_nowait(None)
    async with runner, asyncio.timeout(10):
        with pytest.raises(ConnectionLostError):
            await runner.run(source)
    assert runner.stats.rejected == 3
    assert source.filters == runner.topic_filters()


def test_a_replayer_id_must_be_one_topic_level() -> None:
    for bad in ("", "a/b", "+", "#"):
        with pytest.raises(ValueError, match="one topic level"):
            Runner([Subscriber("s")], replayers=[bad])


async def test_one_status_costs_a_bounded_number_of_subscriptions() -> None:
    """A forged status listing 100,000 matches makes the runner subscribe to at most
    MAX_DISCOVERED_PER_STATUS exact state topics, and says it stopped there."""
    from consumers._latejoin import MAX_DISCOVERED_PER_STATUS

    topics = Topics("r")
    runner = Runner([Subscriber("s")], topics=topics, replayers=["rep-1"])
    source = Source()
    many = [f"m{i}" for i in range(100_000)]
    source.queue.put_nowait(Message(topics.status("rep-1"), _status("rep-1", many)))
    source.queue.put_nowait(None)
    async with runner, asyncio.timeout(60):
        with pytest.raises(ConnectionLostError):
            await runner.run(source)
    discovered = [f for f in source.filters if f not in runner.topic_filters()]
    assert len(discovered) == MAX_DISCOVERED_PER_STATUS


async def test_a_named_replayer_with_no_status_is_reported_once_and_again_when_it_comes() -> None:
    """``--replayer nobody``: no status within the wait (a small one here, not the 5 s
    default) is a ``replayer.not_found`` warning, once, and a call of ``on_replayer``; the
    runner goes on waiting and says ``replayer.found`` when the status arrives after all. A
    replayer whose status came in time is not reported."""
    topics = Topics("r")
    told: list[tuple[str, bool]] = []
    runner = Runner(
        [Subscriber("s")],
        topics=topics,
        replayers=["rep-1", "nobody"],
        replayer_wait=0.05,
        on_replayer=lambda rid, found: told.append((rid, found)),
    )
    source = Source()
    source.queue.put_nowait(Message(topics.status("rep-1"), _status("rep-1", [MATCH])))
    with capture_logs() as logs:
        async with runner, asyncio.timeout(10):
            task = asyncio.create_task(runner.run(source))
            while not told:
                await asyncio.sleep(0.01)
            assert told == [("nobody", False)]
            source.queue.put_nowait(Message(topics.status("nobody"), _status("nobody", [])))
            while len(told) < 2:
                await asyncio.sleep(0.01)
            source.queue.put_nowait(Message(topics.status("nobody"), _status("nobody", [])))
            source.queue.put_nowait(None)
            with pytest.raises(ConnectionLostError):
                await task
    assert told == [("nobody", False), ("nobody", True)]
    [missing] = [e for e in logs if e["event"] == "replayer.not_found"]
    assert missing["log_level"] == "warning"
    assert missing["replayer_id"] == "nobody"
    assert missing["topic"] == topics.status("nobody")
    [found] = [e for e in logs if e["event"] == "replayer.found"]
    assert found["replayer_id"] == "nobody"
