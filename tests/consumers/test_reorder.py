"""The reorder window: an event that overtook another waits for it, within bounds.

Each handler sees each seq of a run once and in order when the stream is reordered, delayed or
repeated within the window; past the window (a count of events held, or the runner's timer,
released here by hand or at once) the missing seqs are a gap, as before the window.
"""

from __future__ import annotations

import asyncio
import json
import random
from typing import Any

import pytest

from consumers import Runner, Subscriber
from consumers._sequencer import REORDER_WINDOW, Delivery, RunnerStats, Sequencer
from events import (
    BaseEvent,
    Event,
    MatchState,
    Message,
    Topics,
    apply,
    encode_event,
)
from matchcast.testing import Harness, match_events
from tests._cli import run_cli

RUN1, RUN2 = 1_784_141_998_412, 1_784_142_500_000
EVENTS = [e.model_copy(update={"run": RUN1}) for e in match_events()]
MATCH = EVENTS[0].match_id
LAST = len(EVENTS)
GOALS = [e.seq for e in EVENTS if e.type == "goal"]


def states_after(events: list[Event]) -> list[MatchState]:
    state, out = MatchState.new(events[0].match_id, run=events[0].run), []
    for e in events:
        state = apply(state, e)
        out.append(state)
    return out


STATES = states_after(EVENTS)


def ev(seq: int) -> Event:
    return EVENTS[seq - 1]


def sequencer(window: int = REORDER_WINDOW) -> tuple[Sequencer, list[bool]]:
    """A sequencer of the match, and the waits it starts (True) and ends (False)."""
    waits: list[bool] = []
    seq = Sequencer(MATCH, RunnerStats(), window=window)
    seq.on_wait = waits.append
    return seq, waits


def feed(seq: Sequencer, *items: int | MatchState) -> list[Delivery]:
    out: list[Delivery] = []
    for item in items:
        if isinstance(item, MatchState):
            out += seq.on_snapshot(item, retained=False)
        else:
            out += seq.on_event(ev(item))
    return out


def seqs(deliveries: list[Delivery]) -> list[int | str]:
    return [e.seq if e is not None else f"state {s.last_seq}" for e, s in deliveries]


# ------------------------------------------------------------ the sequencer, pure


def test_an_overtaken_event_is_held_then_both_delivered_in_order() -> None:
    seq, waits = sequencer()
    assert seqs(feed(seq, 1, 2, 4, 5)) == [1, 2]
    assert seqs(feed(seq, 3)) == [3, 4, 5]
    assert seqs(feed(seq, 6)) == [6]
    assert (seq.stats.gaps, seq.stats.reordered, seq.stats.duplicates) == (0, 2, 0)
    assert waits == [True, False]
    assert seq.state == STATES[5]


def test_interleaved_swaps_delays_and_repeats_within_the_window_are_each_handled_once() -> None:
    """1 2 | 5 4 | 3 (the missing one, late) | 4 again | 7 | 6 | 5 again | 8: in order, once."""
    seq, waits = sequencer()
    out = feed(seq, 1, 2, 5, 4, 5, 3, 4, 7, 6, 5, 8)
    assert seqs(out) == [1, 2, 3, 4, 5, 6, 7, 8]
    assert [s.last_seq for _, s in out] == list(range(1, 9))  # each with the state after it
    assert seq.stats.gaps == 0
    assert seq.stats.duplicates == 3  # 5 while held, 4 and 5 once applied
    assert waits == [True, False, True, False]


def test_the_events_held_are_bounded_by_count_then_the_gap_rule_applies() -> None:
    seq, waits = sequencer(window=3)
    assert seqs(feed(seq, 1, 3, 4, 5)) == [1]  # three held: the window's size
    assert seqs(feed(seq, 6)) == [3, 4, 5, 6]  # a fourth: 2 is taken for lost
    assert (seq.stats.gaps, seq.stats.missing, seq.resync_from) == (1, 1, 3)
    assert seqs(feed(seq, 2)) == []  # too late now: an old seq
    assert seq.stats.duplicates == 1
    assert seqs(feed(seq, STATES[5])) == ["state 6"]  # and the snapshot repairs the state
    assert seq.state == STATES[5]
    assert waits == [True, False]


def test_release_ends_the_wait_as_the_runners_timer_does() -> None:
    seq, waits = sequencer()
    feed(seq, 1, 2, 4, 6)
    assert seqs(seq.release()) == [4, 6]
    assert (seq.stats.gaps, seq.stats.missing) == (2, 2)
    assert waits == [True, False]
    assert seq.release() == []  # nothing left to wait for


def test_a_snapshot_at_or_past_every_held_seq_ends_the_wait() -> None:
    """States stay in order on the wire: one at seq 4 while 5 is held could come before a late
    3; one at 5 covers all that is held, so 3 is lost: the gap is reported, the state adopted."""
    seq, waits = sequencer()
    assert seqs(feed(seq, 1, 2, STATES[1], 4, STATES[2], 5, STATES[3])) == [1, 2]
    assert seqs(feed(seq, STATES[4])) == [4, 5, "state 5"]
    assert (seq.stats.gaps, seq.stats.resyncs) == (1, 1)
    assert seq.state == STATES[4]
    assert waits == [True, False]


def test_the_snapshot_after_an_earlier_gap_lets_the_events_waiting_behind_it_go() -> None:
    """2 is lost (past a window of 2); then 7 and 8 wait for 6. The snapshot at 6 repairs the
    state after the gap, and so ends the wait for 6 as well."""
    seq, waits = sequencer(window=2)
    assert seqs(feed(seq, 1, 3, 4, 5)) == [1, 3, 4, 5]
    assert seqs(feed(seq, 7, 8)) == []
    assert seqs(feed(seq, STATES[5])) == ["state 6", 7, 8]
    assert seq.state == STATES[7]
    assert (seq.stats.gaps, seq.stats.resyncs, seq.stats.reordered) == (1, 1, 2)
    assert waits == [True, False, True, False]


def test_a_newer_run_ends_the_wait_and_the_older_runs_late_event_is_stale() -> None:
    seq, waits = sequencer()
    feed(seq, 1, 2, 4)
    restart = seq.on_event(ev(1).model_copy(update={"run": RUN2}))
    assert seqs(restart) == [1]
    assert seq.early == {}
    assert waits == [True, False]
    assert seq.on_event(ev(3)) == []  # the old run's missing event, at last: stale
    assert (seq.stats.stale, seq.stats.restarts, seq.stats.gaps) == (1, 1, 0)


def test_a_held_full_time_ends_the_run_and_a_later_seq_held_with_it_is_refused() -> None:
    seq, waits = sequencer()
    assert len(feed(seq, *range(1, LAST - 1))) == LAST - 2
    forged = ev(5).model_copy(update={"seq": LAST + 1})
    assert seq.on_event(ev(LAST)) == []
    assert seq.on_event(forged) == []
    assert seqs(feed(seq, LAST - 1)) == [LAST - 1, LAST]
    assert seq.ended
    assert (seq.stats.after_end, seq.stats.gaps) == (1, 0)
    assert seq.early == {}
    assert waits == [True, False]


def test_events_that_overtook_the_kickoff_follow_it() -> None:
    """Before any state, seqs past 1 wait for a snapshot; the kick-off itself ends that wait."""
    seq, _ = sequencer()
    assert seqs(feed(seq, 3, 2, 3)) == []
    assert seqs(feed(seq, 1)) == [1, 2, 3]
    assert (seq.stats.gaps, seq.stats.duplicates) == (0, 1)


def test_a_window_of_zero_takes_a_missing_seq_for_lost_at_once() -> None:
    seq, waits = sequencer(window=0)
    assert seqs(feed(seq, 1, 3, 2)) == [1, 3]
    assert (seq.stats.gaps, seq.stats.duplicates) == (1, 1)
    assert waits == []


def test_an_unknown_types_early_seq_is_passed_over_in_its_turn() -> None:
    """A newer minor's event (of a type this build does not know) came early, at seq 3."""
    seq, waits = sequencer()
    feed(seq, 1)
    assert seq.on_unknown(3, RUN1) == []
    assert seqs(feed(seq, 4, 2)) == [2, 4]
    assert seq.stats.gaps == 0
    assert seq.state is not None and seq.state.last_seq == 4
    assert waits == [True, False]


def test_a_missing_unknown_type_fills_the_gap_when_it_comes() -> None:
    seq, waits = sequencer()
    feed(seq, 1, 3, 4)
    assert seqs(seq.on_unknown(2, RUN1)) == [3, 4]
    assert seq.stats.gaps == 0
    assert waits == [True, False]


# ------------------------------------------------------------ through the runner


def recorder() -> tuple[Subscriber, list[int]]:
    sub, seen = Subscriber("rec"), []

    @sub.on()
    def event(e: BaseEvent, state: MatchState) -> None:
        assert state.last_seq == e.seq
        seen.append(e.seq)

    return sub, seen


def shuffled(rng: random.Random) -> list[int]:
    """Seqs 1..LAST with swaps (up to 3 apart), delays (up to 6 later) and repeats, each
    event moved once at most: well within the default window."""
    order = list(range(1, LAST + 1))
    moved: set[int] = set()
    for i in range(len(order) - 1):
        kind = rng.random()
        if order[i] in moved:
            continue
        if kind < 0.1:  # a swap, as a reordering broker or `--chaos reorder` makes
            j = min(i + rng.randint(1, 3), len(order) - 1)
            order[i], order[j] = order[j], order[i]
            moved |= {order[i], order[j]}
        elif kind < 0.15:  # a delay: later ones overtake it
            moved.add(order[i])
            order.insert(min(i + rng.randint(1, 6), len(order)), order.pop(i))
    for i in rng.sample(range(len(order)), 10):  # repeats, a few messages later
        order.insert(min(i + rng.randint(0, 3), len(order)), order[i])
    return order


def most_held(order: list[int]) -> int:
    """The most events a consumer holds at once for ``order`` (the window it needs)."""
    applied, early, most = 0, set(), 0
    for s in order:
        if s > applied + 1:
            early.add(s)
            most = max(most, len(early))
        while applied + 1 in early | {s}:
            applied += 1
            early.discard(applied)
    return most


@pytest.mark.parametrize("seed", range(5))
async def test_a_reordered_delayed_and_repeated_stream_is_handled_once_in_order(
    seed: int,
) -> None:
    """Every goal reaches the handler, whatever overtook it: the events it folds add up."""
    sub, seen = recorder()
    order = shuffled(random.Random(seed))
    assert order != sorted(order)
    assert most_held(order) <= REORDER_WINDOW
    async with Harness(sub) as h:
        await h.send(*(ev(s) for s in order))
    assert seen == list(range(1, LAST + 1))
    assert (h.stats.gaps, h.stats.missing) == (0, 0)
    assert h.stats.reordered > 0
    assert (h.state().last_seq, h.state().score) == (LAST, STATES[-1].score)


async def test_a_swap_with_the_states_published_in_between_loses_no_goal() -> None:
    """The wire under ``--chaos reorder``: the goal swaps with the event after it, and the
    state after each slot follows in order (so one arrives before the goal does)."""
    goal = GOALS[0]
    sub, seen = recorder()
    async with Harness(sub) as h:
        for slot in range(1, LAST + 1):
            swapped = {goal: goal + 1, goal + 1: goal}.get(slot, slot)
            await h.send(ev(swapped), STATES[slot - 1], wait=False, retain=False)
        await h.idle()
    assert seen == list(range(1, LAST + 1))
    assert (h.stats.gaps, h.stats.reordered) == (0, 1)


async def test_the_runners_timer_ends_the_wait_for_a_seq_that_never_comes() -> None:
    sub, seen = recorder()
    fourth = asyncio.Event()

    @sub.on()
    def at_four(e: BaseEvent, state: MatchState) -> None:
        if e.seq == 4:
            fourth.set()

    async with Harness(sub) as h:
        h.runner.reorder_wait = 0.0  # due at once: the loop's next turn
        await h.send(ev(1), ev(2), ev(4))
        async with asyncio.timeout(10):
            await fourth.wait()
    assert seen == [1, 2, 4]
    assert (h.stats.gaps, h.stats.missing) == (1, 1)
    [gap] = h.logged("sequence.gap_detected")
    assert (gap["missing_from"], gap["missing_to"]) == (3, 3)


async def test_the_wait_lasts_until_released_and_the_timer_goes_with_it() -> None:
    """An hour's wait: nothing past the missing seq is handled until the release (what the
    timer calls), and a wait that ends with the missing seq stops its timer."""
    sub, seen = recorder()
    async with Harness(sub) as h:
        h.runner.reorder_wait = 3600
        await h.send(ev(1), ev(3))
        lane = h.runner._lanes[MATCH]
        assert seen == [1] and lane.wait is not None
        await h.send(ev(2))
        assert seen == [1, 2, 3] and lane.wait is None
        await h.send(ev(5), ev(6))
        timer = lane.wait
        assert seen == [1, 2, 3] and timer is not None
        h.runner.release(MATCH)
        await h.idle()
        assert seen == [1, 2, 3, 5, 6]
        assert lane.wait is None and timer.cancelled()
        assert h.stats.gaps == 1
        h.runner.release("no-such-match")  # a timer that outlived its match: nothing


async def test_what_is_held_at_the_end_is_handled_on_the_way_out() -> None:
    sub, seen = recorder()
    async with Harness(sub) as h:
        h.runner.reorder_wait = 3600
        await h.send(ev(1), ev(3))
    assert seen == [1, 3]
    assert h.stats.gaps == 1


async def test_the_window_is_set_on_the_runner_and_checked() -> None:
    sub, seen = recorder()
    runner = Runner([sub], reorder_window=0)
    topic = Topics().events(MATCH)
    for s in (1, 3, 2):
        await runner.feed(Message(topic, encode_event(ev(s)), qos=1))
    assert seen == [1, 3]
    with pytest.raises(ValueError, match="must not be negative"):
        Runner([sub], reorder_window=-1)
    with pytest.raises(ValueError, match="must not be negative"):
        Runner([sub], reorder_wait=-0.5)


async def test_an_unknown_type_that_fills_the_gap_releases_the_events_behind_it() -> None:
    sub, seen = recorder()
    data = json.loads(encode_event(ev(2)))
    data.update(schema_version="1.9", type="cooling_break")
    review = Message(Topics().events(MATCH), json.dumps(data).encode(), qos=1)
    async with Harness(sub) as h:
        await h.send(ev(1), ev(3), review)
    assert seen == [1, 3]
    assert (h.stats.gaps, h.stats.unknown_skipped) == (0, 1)


def test_consume_sets_the_window_from_its_options(monkeypatch: pytest.MonkeyPatch) -> None:
    """``matchcast consume --reorder-window N --reorder-wait S`` reach the runner; without them
    the runner's defaults apply; a negative one is refused."""
    import matchcast.cli.consume as cmd_consume

    made: list[Runner] = []

    class Recorded(Runner):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(cmd_consume, "Runner", Recorded)
    monkeypatch.setattr(cmd_consume, "run", lambda go: None)  # no broker: the runner is made
    assert (
        run_cli("consume", "scoreboard", "--reorder-window", "4", "--reorder-wait", "0.25").code
        == 0
    )
    assert run_cli("consume", "scoreboard").code == 0
    assert [(r.reorder_window, r.reorder_wait) for r in made] == [(4, 0.25), (REORDER_WINDOW, 0.5)]
    refused = run_cli("consume", "scoreboard", "--reorder-window", "-1")
    assert refused.code == 2 and "--reorder-window" in refused.stderr


def test_a_runner_fed_outside_an_event_loop_still_holds_and_delivers() -> None:
    """No loop, no timer: the wait still ends with the missing seq (or the count, or drain)."""
    sub, seen = recorder()
    runner = Runner([sub])
    topic = Topics().events(MATCH)
    for s in (1, 3, 2):
        runner._process(Message(topic, encode_event(ev(s)), qos=1))
    assert seen == [1, 2, 3]
    assert (runner.stats.rejected, runner.stats.reordered) == (0, 1)
