"""A late joiner subscribes to events first, then to the retained state: an event published
between the two subscriptions arrives before the snapshot and must be neither lost nor counted
twice (subscribing state-first lost it: seen as a gap in the end-to-end late-join test)."""

from __future__ import annotations

from consumers import Runner, Subscriber
from events import MatchState, Message, Topics, apply, encode_event, encode_state
from matchcast.testing import match_events

TOPICS = Topics("t")
EVENTS = match_events("semifinal")


def test_the_runner_subscribes_to_events_before_state() -> None:
    runner = Runner([Subscriber("x")], topics=TOPICS)
    assert runner.topic_filters() == [TOPICS.events("+"), TOPICS.state("+")]


async def test_an_event_before_the_first_snapshot_is_held_and_applied_on_top_of_it() -> None:
    seen: list[tuple[str, int]] = []
    sub = Subscriber("rec")
    sub.on()(lambda e, s: seen.append(("event", e.seq)))
    sub.on_state(lambda s: seen.append(("state", s.last_seq)))
    runner = Runner([sub], topics=TOPICS)
    state = MatchState.new(EVENTS[0].match_id)
    for event in EVENTS[:60]:
        state = apply(state, event)
    match_id = EVENTS[0].match_id
    retained = Message(TOPICS.state(match_id), encode_state(state), qos=1, retain=True)
    ev = lambda e: Message(TOPICS.events(match_id), encode_event(e), qos=1)  # noqa: E731
    async with runner:
        await runner.feed(ev(EVENTS[60]))  # seq 61 arrives before the retained state (60)
        await runner.feed(retained)
        await runner.feed(ev(EVENTS[59]))  # a redelivery of 60: already in the snapshot
        await runner.feed(ev(EVENTS[61]))
    assert seen == [("state", 60), ("event", 61), ("event", 62)]
    assert runner.stats.gaps == 0
    assert runner.stats.duplicates == 1
