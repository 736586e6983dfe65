"""A replay's states take memory linear in its events, not quadratic."""

from __future__ import annotations

import gc
import os
import tracemalloc
from typing import Any

import pytest

from events import KEEP_CARDS, MatchClock, MatchState, apply, encode_state, replay_state
from simulator import Replayer, ReplayOptions, bundled_path, load_match, parse_match
from simulator._replay import _plan, _start_index
from simulator._states import ReplayStates
from tests._fakes import FakeClock, RecordingPublisher

#: Cards in the smaller of the two matches measured; the other has twice as many.
CARDS = int(os.environ.get("MATCHCAST_MEMORY_TEST_CARDS", "3000"))


def _match_with_cards(n: int) -> Any:
    semi = load_match(bundled_path("semifinal")).model_dump(mode="json")
    code = semi["home"]["code"]
    cards = [
        {"type": "card", "minute": 1 + i % 89, "second": i % 60, "team": code,
         "player": f"Player {i}", "card": "yellow", "source": "simulated"}
        for i in range(n)
    ]  # fmt: skip
    semi["timeline"] = [*semi["timeline"], *cards]
    return parse_match(semi)


def _replay_peak(n: int) -> tuple[int, MatchState]:
    """Peak bytes allocated while planning a replay and reading every state in order."""
    match = _match_with_cards(n)
    gc.collect()
    tracemalloc.start()
    try:
        _initial, _events, states, _offsets = _plan(match, ReplayOptions(speed=None))
        for i in range(len(states)):
            last = states[i]
        return tracemalloc.get_traced_memory()[1], last
    finally:
        tracemalloc.stop()


def test_memory_of_a_replays_states_grows_linearly_with_its_incidents() -> None:
    small, last_small = _replay_peak(CARDS)
    large, last_large = _replay_peak(2 * CARDS)
    assert len(last_small.cards) == len(last_large.cards) == KEEP_CARDS  # the last ones only
    assert large / small < 3, f"{CARDS} cards: {small:,} B; {2 * CARDS}: {large:,} B"


@pytest.mark.parametrize("start", [0, 5, 60])
def test_states_computed_on_demand_equal_the_fold_in_any_order_of_reading(start: int) -> None:
    """The replayer reads states in order, then after a reconnect goes back: both are right."""
    _initial, events, states, _offsets = _plan(_match_with_cards(30), ReplayOptions())
    folded, state = [], _initial
    for e in events:
        state = apply(state, e)
        folded.append(state)
    assert states[-1] == replay_state(events[0].match_id, events) == folded[-1]
    assert [states[i] for i in range(start, len(events))] == folded[start:]
    assert states[start] == folded[start], "going back folds again from the start"
    assert list(states) == folded


async def test_the_state_payloads_a_replay_publishes_are_byte_for_byte_the_eager_fold() -> None:
    """Computing states on demand changes no byte on the wire, a mid-match start included."""
    match = _match_with_cards(40)
    for start in (None, MatchClock.at(60)):
        pub = RecordingPublisher()
        opts = ReplayOptions(speed=None, start=start)
        report = await Replayer(pub, opts, clock=FakeClock()).run(match)
        initial, events, _states, _offsets = _plan(match, opts)
        expected, state = [], initial.model_copy(update={"run": report.run})
        begin = _start_index(events, start)
        for i, e in enumerate(events):
            state = apply(state, e)
            # A start mid-match shows the minute it lands on (the next event's clock).
            landing = i == begin - 1 and state.status == "live"
            shown = state.model_copy(update={"clock": events[begin].clock}) if landing else state
            expected.append(encode_state(shown))
        sent = [p.payload for p in pub.sent if p.topic.endswith("/state")]
        assert sent == expected[max(begin - 1, 0) :], start


def test_a_run_is_stamped_on_every_state_without_computing_them_all() -> None:
    """The replayer gives each run its id; the states stay computed on demand."""
    _, _, states, _ = _plan(load_match(bundled_path("semifinal")), ReplayOptions())
    stamped = states.with_run(42)
    assert isinstance(stamped, ReplayStates)
    assert {s.run for s in stamped} == {42}
    assert [s.model_copy(update={"run": 0}) for s in stamped] == list(states)
