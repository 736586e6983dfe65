"""The runner drops duplicates, reports gaps, resynchronises, and survives bad input."""

from __future__ import annotations

import asyncio

from structlog.testing import capture_logs

from consumers import Runner, Subscriber
from events import Goal, MatchState, Message, Topics, apply, encode_event, encode_state
from tests._factories import goal, kickoff, tick

TOPICS = Topics("t")


def _msg(event) -> Message:  # type: ignore[no-untyped-def]
    return Message(TOPICS.events(event.match_id), encode_event(event), qos=1)


def _snap(state: MatchState) -> Message:
    return Message(TOPICS.state(state.match_id), encode_state(state), qos=1, retain=True)


def _recorder() -> tuple[Subscriber, list[tuple[str, int]]]:
    sub = Subscriber("rec")
    seen: list[tuple[str, int]] = []
    sub.on()(lambda e, s: seen.append((e.type, e.seq)))
    sub.on_state(lambda s: seen.append(("state", s.last_seq)))
    return sub, seen


async def _feed(runner: Runner, *messages: Message) -> None:
    for m in messages:
        await runner.feed(m)
    await runner.drain()


async def test_duplicates_are_dropped_before_handlers_see_them() -> None:
    sub, seen = _recorder()
    runner = Runner([sub], topics=TOPICS)
    await _feed(
        runner,
        _msg(kickoff()),
        _msg(tick(2, 1)),
        _msg(tick(2, 1)),
        _msg(kickoff()),
        _msg(tick(3, 2)),
    )
    assert seen == [("kick_off", 1), ("clock", 2), ("clock", 3)]
    assert runner.stats.duplicates == 2


async def test_a_gap_is_reported_and_the_next_covering_snapshot_resynchronises() -> None:
    sub, seen = _recorder()
    runner = Runner([sub], topics=TOPICS)
    truth = MatchState.new("m1")
    events = [
        kickoff(),
        tick(2, 1),
        goal(3, 2, "ENG", {"ARG": 0, "ENG": 1}),
        tick(4, 3),
        tick(5, 4),
    ]
    for e in events:
        truth = apply(truth, e)
    with capture_logs() as logs:
        await _feed(runner, _msg(events[0]), _msg(events[3]), _snap(truth))
    gap = next(entry for entry in logs if entry["event"] == "sequence.gap_detected")
    assert (gap["missing_from"], gap["missing_to"], gap["match_id"]) == (2, 3, "m1")
    assert runner.stats.gaps == 1
    assert runner.stats.missing == 2
    assert runner.stats.resyncs == 1
    assert runner.states["m1"] == truth  # the goal lost in the gap is back
    assert seen == [("kick_off", 1), ("clock", 4), ("state", 5)]


async def test_malformed_messages_are_logged_with_topic_and_reason_and_skipped() -> None:
    sub, seen = _recorder()
    runner = Runner([sub], topics=TOPICS)
    bad = [
        Message(TOPICS.events("m1"), b"{oops"),
        Message(TOPICS.events("m1"), b'{"type": "goal", "match_id": "m1"}'),
        Message(TOPICS.state("m1"), b"[]"),
    ]
    with capture_logs() as logs:
        await _feed(runner, _msg(kickoff()), *bad, _msg(tick(2, 1)))
    rejected = [entry for entry in logs if entry["event"] == "message.rejected"]
    assert [r["topic"] for r in rejected] == [m.topic for m in bad]
    assert "not JSON" in rejected[0]["reason"]
    assert "seq" in rejected[1]["reason"]
    assert runner.stats.rejected == 3
    assert seen == [("kick_off", 1), ("clock", 2)]


async def test_a_late_joiner_starts_from_the_snapshot_even_if_events_arrive_first() -> None:
    sub, seen = _recorder()
    runner = Runner([sub], topics=TOPICS)
    state = MatchState.new("m1")
    for e in [kickoff(), tick(2, 1), goal(3, 2, "ENG", {"ARG": 0, "ENG": 1})]:
        state = apply(state, e)
    # event 4 arrives before the retained snapshot (seq 3), then a duplicate of 3
    await _feed(
        runner,
        _msg(tick(4, 3)),
        _snap(state),
        _msg(goal(3, 2, "ENG", {"ARG": 0, "ENG": 1})),
        _msg(tick(5, 4)),
    )
    assert seen == [("state", 3), ("clock", 4), ("clock", 5)]
    assert runner.states["m1"].score == {"ARG": 0, "ENG": 1}
    assert runner.stats.gaps == 0


async def test_without_a_snapshot_held_events_go_on_after_the_join_timeout() -> None:
    sub, seen = _recorder()
    runner = Runner([sub], topics=TOPICS, join_timeout=0.05)
    with capture_logs() as logs:
        await runner.feed(_msg(tick(4, 3)))
        await asyncio.sleep(0.1)
        await _feed(runner, _msg(tick(5, 4)))
    assert seen == [("clock", 4), ("clock", 5)]
    assert any(entry["event"] == "state.snapshot_missing" for entry in logs)
    assert runner.stats.gaps == 1


async def test_a_failing_handler_is_logged_and_others_go_on() -> None:
    sub = Subscriber("flaky")
    ok: list[int] = []

    @sub.on(Goal)
    def boom(event: Goal, state: MatchState) -> None:
        raise RuntimeError("handler bug")

    @sub.on()
    async def fine(event, state) -> None:  # type: ignore[no-untyped-def]
        ok.append(event.seq)

    runner = Runner([sub], topics=TOPICS)
    with capture_logs() as logs:
        await _feed(
            runner, _msg(kickoff()), _msg(goal(2, 5, "ARG", {"ARG": 1, "ENG": 0})), _msg(tick(3, 6))
        )
    failed = next(entry for entry in logs if entry["event"] == "handler.failed")
    assert (
        failed["handler"] == "flaky.test_a_failing_handler_is_logged_and_others_go_on.<locals>.boom"
    )
    assert failed["seq"] == 2
    assert failed["exc_info"] is True
    assert ok == [1, 2, 3]
    assert runner.stats.handler_errors == 1


async def test_matches_run_concurrently_and_in_order_within_each() -> None:
    sub = Subscriber("order")
    seen: dict[str, list[int]] = {}

    @sub.on()
    async def record(event, state) -> None:  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.001 if event.match_id == "a" else 0)
        seen.setdefault(event.match_id, []).append(event.seq)

    runner = Runner([sub], topics=TOPICS)
    msgs = []
    for seq in range(1, 21):
        for mid in ("a", "b"):
            msgs.append(_msg(kickoff(match_id=mid) if seq == 1 else tick(seq, seq, match_id=mid)))
    await _feed(runner, *msgs)
    assert seen == {"a": list(range(1, 21)), "b": list(range(1, 21))}


async def test_topics_outside_the_tree_and_other_matches_are_ignored() -> None:
    sub, seen = _recorder()
    runner = Runner([sub], topics=TOPICS, match_filter="m1")
    await _feed(
        runner,
        Message("elsewhere/x", b"junk"),
        _msg(kickoff(match_id="m2")),
        Message(TOPICS.status("r"), b'{"status": "online"}'),
        _msg(kickoff()),
    )
    assert seen == [("kick_off", 1)]
    assert runner.stats.rejected == 0
