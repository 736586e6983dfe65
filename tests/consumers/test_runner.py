"""The runner's delivery rules and isolation, through the in-memory harness."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import AsyncIterator, Callable

import pytest

from consumers import HandlerCall, PluginError, Runner, Subscriber
from consumers._sequencer import HOLD_LIMIT
from events import (
    SCHEMA_VERSION,
    BaseEvent,
    BatchSource,
    BrokerError,
    Event,
    FullTime,
    Goal,
    KickOff,
    MatchState,
    Message,
    Topics,
    apply,
    encode_event,
    replay_state,
)
from matchcast.testing import Harness, match_events

EVENTS = match_events()
MATCH = EVENTS[0].match_id


def states_after(events: list[Event]) -> list[MatchState]:
    state, out = MatchState.new(events[0].match_id), []
    for e in events:
        state = apply(state, e)
        out.append(state)
    return out


STATES = states_after(EVENTS)


def as_match(events: list[Event], match_id: str) -> list[Event]:
    return [e.model_copy(update={"match_id": match_id}) for e in events]


def recorder(name: str = "rec") -> tuple[Subscriber, list[tuple[str, int]]]:
    """A subscriber that notes ("event", seq) and ("state", last_seq) as they come."""
    sub, seen = Subscriber(name), []

    @sub.on()
    def event(e: BaseEvent, state: MatchState) -> None:
        seen.append(("event", e.seq))

    @sub.on_state
    def snapshot(state: MatchState) -> None:
        seen.append(("state", state.last_seq))

    return sub, seen


async def test_sync_and_async_handlers_get_the_typed_event_and_the_state_after_it() -> None:
    sub = Subscriber("goal-alerts")
    lines: list[str] = []

    @sub.on(Goal)
    async def alert(event: Goal, state: MatchState) -> None:
        lines.append(f"{event.clock.label} {event.scorer} - now {state.score}")

    @sub.on(Goal)
    def sync_alert(event: Goal, state: MatchState) -> None:
        assert state.last_seq == event.seq

    async with Harness(sub) as h:
        await h.play()
    assert lines == [
        "55' Anthony Gordon - now ARG 0-1 ENG",
        "86' Enzo Fernández - now ARG 1-1 ENG",
        "90+2' Lautaro Martínez - now ARG 2-1 ENG",
    ]
    assert len(h.calls_to("sync_alert")) == 3
    assert h.errors == []


async def test_handlers_of_one_match_run_in_seq_order_one_at_a_time() -> None:
    sub = Subscriber("s")
    seqs: list[int] = []
    running = 0

    @sub.on()
    async def slow(e: BaseEvent, state: MatchState) -> None:
        nonlocal running
        running += 1
        assert running == 1
        await asyncio.sleep(0)
        seqs.append(e.seq)
        running -= 1

    async with Harness(sub) as h:
        await h.play()
    assert seqs == list(range(1, len(EVENTS) + 1))


async def test_sync_and_async_handlers_keep_their_order_across_subscribers_and_events() -> None:
    """An idle lane's handlers are called at once; the first async one hands the rest of the
    event, and the events after it, to the lane's worker: the order is kept all the same."""
    order: list[tuple[int, str]] = []
    first, second, third = Subscriber("first"), Subscriber("second"), Subscriber("third")

    @first.on()
    def sync_a(e: BaseEvent, state: MatchState) -> None:
        order.append((e.seq, "a"))

    @second.on()
    async def async_b(e: BaseEvent, state: MatchState) -> None:
        await asyncio.sleep(0.001 if e.seq % 2 else 0)
        order.append((e.seq, "b"))

    @third.on()
    def sync_c(e: BaseEvent, state: MatchState) -> None:
        order.append((e.seq, "c"))

    async with Harness(first, second, third) as h:
        await h.play()
    assert order == [(seq, k) for seq in range(1, len(EVENTS) + 1) for k in "abc"]
    assert h.stats.handled == 3 * len(EVENTS)


async def test_a_slow_handler_on_one_match_does_not_delay_another() -> None:
    """Match A's handler waits on a gate that opens only once match B has finished."""
    sub = Subscriber("s")
    gate, b_finished = asyncio.Event(), asyncio.Event()

    @sub.on(KickOff, match="match-a")
    async def stuck(event: KickOff, state: MatchState) -> None:
        await gate.wait()

    @sub.on(FullTime, match="match-b")
    def done(event: FullTime, state: MatchState) -> None:
        b_finished.set()

    a, b = as_match(EVENTS, "match-a"), as_match(EVENTS, "match-b")
    async with Harness(sub) as h:
        interleaved = [e for pair in zip(a, b, strict=True) for e in pair]
        await h.play(interleaved, wait=False)
        await asyncio.wait_for(b_finished.wait(), timeout=10)
        assert [c.event.seq for c in h.calls_to("stuck") if c.event] == []
        gate.set()
        await h.idle()
    assert len(h.calls_to("stuck")) == 2
    assert h.timeouts == []


async def test_a_handler_that_raises_is_logged_counted_and_the_rest_go_on() -> None:
    crashing, (steady, seen) = Subscriber("crashing"), recorder("steady")

    @crashing.on(Goal)
    def boom(event: Goal, state: MatchState) -> None:
        raise ZeroDivisionError("bad maths")

    @crashing.on(Goal)
    def after_boom(event: Goal, state: MatchState) -> None: ...

    async with Harness(crashing, steady) as h:
        await h.play()
    assert [type(c.error) for c in h.errors] == [ZeroDivisionError] * 3
    assert h.errors[0].error is not None
    assert h.errors[0].error.__traceback__ is not None
    assert h.stats.handler_errors == 3
    assert len(h.calls_to("after_boom")) == 3
    assert [s for k, s in seen if k == "event"] == list(range(1, len(EVENTS) + 1))
    failed = h.logged("handler.failed")
    assert len(failed) == 3
    assert isinstance(failed[0]["exc_info"], ZeroDivisionError)  # rendered with its traceback
    assert failed[0]["handler"] == "crashing.boom"
    assert failed[0]["payload"]["scorer"] == "Anthony Gordon"


async def test_a_handler_past_its_timeout_is_abandoned_and_counted() -> None:
    sub = Subscriber("s")

    @sub.on(Goal)
    async def hangs(event: Goal, state: MatchState) -> None:
        await asyncio.sleep(3600)

    @sub.on(Goal, timeout=3600)
    async def patient(event: Goal, state: MatchState) -> None:
        await asyncio.sleep(0)

    @sub.on(Goal)
    def raises_its_own_timeout(event: Goal, state: MatchState) -> None:
        raise TimeoutError("not the runner's")

    async with Harness(sub, handler_timeout=0.05) as h:
        await h.play()
    assert [c.handler for c in h.timeouts] == ["s.hangs"] * 3
    assert len(h.logged("handler.timed_out")) == 3
    assert [c.outcome for c in h.calls_to("patient")] == ["ok"] * 3
    assert [c.outcome for c in h.calls_to("raises_its_own_timeout")] == ["error"] * 3


async def test_stopping_at_once_with_nothing_queued_warns_of_no_loss() -> None:
    """A Ctrl-C (cancellation) with nothing queued or in flight abandons nothing: no
    ``consumer.abandoned`` warning, which would read as lost events."""
    sub, _ = recorder()
    async with Harness(sub) as h:
        await h.play()
        await h.runner.close(abandon=True)
    assert h.logged("consumer.abandoned") == []
    assert len(h.logged("consumer.stopped")) == 1


async def test_stopping_at_once_with_a_handler_in_flight_warns_with_the_count() -> None:
    sub = Subscriber("s")
    started = asyncio.Event()

    @sub.on(KickOff)
    async def hangs(event: KickOff, state: MatchState) -> None:
        started.set()
        await asyncio.sleep(3600)

    async with Harness(sub, handler_timeout=7200) as h:
        await h.send(*EVENTS[:3], wait=False)
        await started.wait()
        await h.runner.close(abandon=True)
    [entry] = h.logged("consumer.abandoned")
    assert entry["log_level"] == "warning"
    assert entry["queued"] == 3  # the kick-off in flight and the two events behind it


async def test_a_sync_handler_that_blocks_the_loop_is_reported() -> None:
    sub = Subscriber("s")

    @sub.on(KickOff)
    def blocking(event: KickOff, state: MatchState) -> None:
        time.sleep(0.25)

    async with Harness(sub) as h:
        await h.send(EVENTS[0])
    [entry] = h.logged("handler.blocked_loop")
    assert entry["handler"] == "s.blocking"
    assert "async" in entry["hint"]


async def test_duplicates_are_dropped_before_handlers_see_them() -> None:
    sub, seen = recorder()
    async with Harness(sub) as h:
        for event, state in zip(EVENTS, STATES, strict=True):
            await h.send(event, state, event, wait=False)
        await h.send(EVENTS[5], EVENTS[0])
    assert seen == [("event", s) for s in range(1, len(EVENTS) + 1)]
    assert h.stats.duplicates == len(EVENTS) + 2


async def test_a_gap_is_reported_and_the_state_resynchronised_from_the_next_snapshot() -> None:
    sub, seen = recorder()
    lost = range(10, 13)
    async with Harness(sub) as h:
        await h.play(lose=lost)
    [gap] = h.logged("sequence.gap_detected")
    assert (gap["missing_from"], gap["missing_to"], gap["missing"]) == (10, 12, 3)
    assert ("state", 13) in seen
    assert seen.index(("state", 13)) == seen.index(("event", 13)) + 1
    assert [s for k, s in seen if k == "event"] == [
        s for s in range(1, len(EVENTS) + 1) if s not in lost
    ]
    assert (h.stats.gaps, h.stats.missing, h.stats.resyncs) == (1, 3, 1)
    assert h.state() == replay_state(MATCH, EVENTS)


async def test_malformed_messages_are_logged_and_skipped() -> None:
    sub, seen = recorder()
    topics = Topics()
    bad = [
        Message(topics.events(MATCH), b"not json"),
        Message(topics.events(MATCH), b'{"type": "goal"}'),
        Message(
            topics.events(MATCH),
            encode_event(EVENTS[0]).replace(f'"{SCHEMA_VERSION}"'.encode(), b'"9.0"'),
        ),
        Message(topics.state(MATCH), b"[]"),
    ]
    async with Harness(sub, topics=topics) as h:
        await h.send(*bad)
        await h.play()
    assert h.stats.rejected == 4
    reasons = [e["reason"] for e in h.logged("message.rejected")]
    assert "not JSON" in reasons[0]
    assert "9.0" in reasons[2]
    assert len([s for k, s in seen if k == "event"]) == len(EVENTS)


async def test_a_late_joiner_starts_from_the_snapshot_without_counting_twice() -> None:
    sub, seen = recorder()
    goals: list[str] = []
    sub.on(Goal)(lambda e, state: goals.append(e.scorer))
    async with Harness(sub) as h:
        await h.play(start=60)
    first_live = next(e for e in EVENTS if e.clock.sort_key >= (2, 60, 0))
    assert seen[0] == ("state", first_live.seq - 1)
    assert seen[1] == ("event", first_live.seq)
    assert goals == ["Enzo Fernández", "Lautaro Martínez"]
    assert h.state().score == {"ARG": 2, "ENG": 1}
    assert len(h.state().goals) == 3
    assert h.logged("state.synchronised")[0]["reason"] == "joined"


async def test_a_resumed_session_delivers_the_held_event_with_the_snapshot_after_it() -> None:
    """What a broker sends a persistent session first: queued events, each then its state."""
    sub, seen = recorder()
    k = 40
    async with Harness(sub) as h:
        for event, state in zip(EVENTS[k - 1 : k + 2], STATES[k - 1 : k + 2], strict=True):
            await h.send(event, state, wait=False)
        await h.idle()
    assert seen == [("event", k), ("event", k + 1), ("event", k + 2)]
    assert h.calls[0].state == STATES[k - 1]
    assert h.logged("state.synchronised")[0]["reason"] == "resumed"
    assert h.stats.gaps == 0


async def test_without_any_snapshot_held_events_go_through_after_a_while() -> None:
    sub, seen = recorder()
    tail = EVENTS[4 : 4 + HOLD_LIMIT + 1]
    async with Harness(sub) as h:
        await h.send(*tail)
    assert [s for _, s in seen] == [e.seq for e in tail]
    assert h.logged("state.snapshot_missing")
    assert h.stats.gaps == 1


async def test_a_new_replay_of_the_same_match_starts_the_lane_again() -> None:
    sub = Subscriber("s")
    kickoffs: list[int] = []
    sub.on(KickOff)(lambda e, state: kickoffs.append(state.last_seq))
    later = [
        e.model_copy(update={"emitted_at": e.emitted_at + dt.timedelta(days=1)}) for e in EVENTS
    ]
    async with Harness(sub) as h:
        await h.play(EVENTS)
        await h.play(EVENTS, snapshots=False)  # a redelivery: the same events, dropped
        await h.play(later)  # a new run: emitted after everything seen
    assert len(kickoffs) == 4
    assert h.stats.restarts == 1
    assert h.stats.duplicates == len(EVENTS)
    assert h.logged("match.restarted")


async def test_a_new_replay_after_joining_from_a_finished_snapshot_is_seen() -> None:
    """The consumer's state came from the retained full-time snapshot of an earlier run."""
    sub, seen = recorder()
    async with Harness(sub) as h:
        await h.send(STATES[-1])
        await h.play(EVENTS[:3])
    assert seen == [("state", len(EVENTS)), ("event", 1), ("event", 2), ("event", 3)]
    assert h.stats.restarts == 1


async def test_a_new_replay_from_mid_match_is_seen_from_its_first_snapshot() -> None:
    """``replay --from``: the new run publishes the state before its first event, live."""
    sub, seen = recorder()
    async with Harness(sub) as h:
        await h.play(EVENTS)
        await h.send(STATES[79], retain=False)
        await h.play(EVENTS[80:83])
        await h.send(STATES[10], retain=True)  # a late retained delivery: not a new run
    assert seen[-4:] == [("state", 80), ("event", 81), ("event", 82), ("event", 83)]
    assert h.stats.restarts == 1


async def test_a_lane_that_falls_behind_skips_to_its_state_and_others_go_on() -> None:
    sub, _ = recorder()
    gate, b_finished = asyncio.Event(), asyncio.Event()

    @sub.on(KickOff, match=MATCH)
    async def stuck(event: KickOff, state: MatchState) -> None:
        await gate.wait()

    sub.on(FullTime, match="match-b")(lambda e, state: b_finished.set())
    async with Harness(sub, queue_size=4) as h:
        await h.play(EVENTS[:30], wait=False)  # all at once: A's lane overflows
        b = as_match(EVENTS, "match-b")
        for event, state in zip(b, states_after(b), strict=True):
            await h.send(event, state, wait=False)
            await asyncio.sleep(0)  # B's at network pace: its lane keeps up
        await asyncio.wait_for(b_finished.wait(), timeout=10)
        assert h.runner.behind == [MATCH]
        gate.set()
        await h.idle()
        assert h.runner.behind == []
        await h.play(EVENTS[30:33])  # fits in the queue
    mine = [c for c in h.calls if c.match_id == MATCH and c.handler != "rec.stuck"]
    got = [("state", c.state.last_seq) if c.event is None else ("event", c.event.seq) for c in mine]
    assert got == [("event", s) for s in (1, 2, 3, 4)] + [("state", 30)] + [
        ("event", s) for s in range(31, 34)
    ]
    assert h.stats.overflowed == 26
    assert h.stats.catch_ups == 1
    [behind] = h.logged("consumer.fell_behind")
    assert behind["match_id"] == MATCH
    [caught_up] = h.logged("consumer.caught_up")
    assert caught_up["skipped"] == 26
    assert h.stats.handler_timeouts == 0


async def test_leaving_the_harness_lets_queued_handlers_finish_before_the_stop_hooks() -> None:
    sub = Subscriber("s")
    handled: list[int] = []
    at_stop: list[int] = []

    @sub.on()
    async def slow(e: BaseEvent, state: MatchState) -> None:
        await asyncio.sleep(0)
        handled.append(e.seq)

    sub.on_stop(lambda: at_stop.append(len(handled)))
    async with Harness(sub) as h:
        await h.play(wait=False)
    assert at_stop == [len(EVENTS)]


async def test_a_failing_start_hook_stops_the_subscribers_already_started() -> None:
    ok, bad = Subscriber("ok"), Subscriber("bad")
    stopped: list[str] = []
    ok.on_stop(lambda: stopped.append("ok"))

    @bad.on_start
    def explode() -> None:
        raise OSError("disk full")

    with pytest.raises(PluginError, match="disk full") as info:
        async with Harness(ok, bad):
            pass
    assert info.value.plugin == "bad"
    assert stopped == ["ok"]


class QueueSource:
    """An in-memory MessageSource."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Message] = asyncio.Queue()
        self.filters: list[str] = []

    async def subscribe(self, topic_filter: str, *, qos: int = 1) -> None:
        self.filters.append(topic_filter)

    async def messages(self) -> AsyncIterator[Message]:
        while True:
            yield await self.queue.get()


async def test_stop_lets_the_handler_in_flight_and_the_queued_ones_finish() -> None:
    sub = Subscriber("s")
    started, gate = asyncio.Event(), asyncio.Event()
    finished: list[int] = []

    @sub.on()
    async def slow(e: BaseEvent, state: MatchState) -> None:
        started.set()
        await gate.wait()
        finished.append(e.seq)

    calls: list[HandlerCall] = []
    runner = Runner([sub], observer=calls.append)
    source = QueueSource()
    harness = Harness()
    for event in EVENTS[:3]:
        source.queue.put_nowait(harness.message(event))
    task = asyncio.create_task(runner.run(source))
    await asyncio.wait_for(started.wait(), timeout=10)
    runner.stop()
    await asyncio.sleep(0)
    assert not task.done()
    gate.set()
    stats = await asyncio.wait_for(task, timeout=10)
    assert finished == [1, 2, 3]
    assert stats.handled == 3
    # The wildcards first; the reader runs beside the subscribing, so the match it learnt
    # meanwhile (from the events already queued) gets its exact state topic too.
    assert source.filters[: len(runner.topic_filters())] == runner.topic_filters()


class BatchQueueSource(QueueSource):
    """An in-memory BatchSource: ``deliver`` hands a batch to the handler, if one is set."""

    def __init__(self) -> None:
        super().__init__()
        self.handler: Callable[[list[Message]], None] | None = None
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def set_batch_handler(self, handler: Callable[[list[Message]], None] | None) -> None:
        self.handler = handler

    async def wait_closed(self) -> None:
        await self.closed

    async def deliver(self, batch: list[Message]) -> None:
        async with asyncio.timeout(5):
            while self.handler is None:
                await asyncio.sleep(0.001)
        self.handler(batch)


async def test_a_batch_source_feeds_the_runner_a_read_at_a_time() -> None:
    """Events and a retained snapshot arrive in batches; the runner treats them exactly as
    it would from messages(), and the source ending normally ends the run."""
    sub, seen = recorder()
    runner = Runner([sub])
    source = BatchQueueSource()
    harness = Harness()
    task = asyncio.create_task(runner.run(source))
    assert isinstance(source, BatchSource)
    snapshot = harness.message(STATES[2], retain=True)
    await source.deliver([snapshot])
    await source.deliver([harness.message(e) for e in EVENTS[3:6]])
    await source.deliver([harness.message(EVENTS[4])])  # a duplicate: dropped
    source.closed.set_result(None)
    stats = await asyncio.wait_for(task, timeout=10)
    assert seen == [("state", 3), ("event", 4), ("event", 5), ("event", 6)]
    assert source.handler is None  # handed back
    assert stats.duplicates == 1
    assert runner.states[MATCH] == STATES[5]


async def test_a_lost_batch_source_ends_the_run_with_its_error() -> None:
    runner = Runner([recorder()[0]])
    source = BatchQueueSource()
    task = asyncio.create_task(runner.run(source))
    await source.deliver([Harness().message(EVENTS[0])])
    source.closed.set_exception(BrokerError("mqtt://x", "connection lost"))
    with pytest.raises(BrokerError, match="connection lost"):
        await asyncio.wait_for(task, timeout=10)


async def test_a_bug_while_taking_a_batch_ends_the_run_and_is_not_swallowed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runner = Runner([recorder()[0]])

    def broken(message: Message) -> None:
        raise RuntimeError("bug in the runner")

    monkeypatch.setattr(runner, "_process", broken)
    source = BatchQueueSource()
    task = asyncio.create_task(runner.run(source))
    await source.deliver([Harness().message(EVENTS[0])])
    with pytest.raises(RuntimeError, match="bug in the runner"):
        await asyncio.wait_for(task, timeout=10)
