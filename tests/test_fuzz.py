"""Property-based tests: no input crashes the codec or the reducer, and the reducer's state is
always a recomputation from the events it accepted."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import DecodeError, Event, MatchState, apply, decode_event, decode_state, encode_event
from simulator import expand, resolve_matches

STREAM = [s.event for s in expand(resolve_matches("semifinal")[0])]
MATCH = STREAM[0].match_id
WIRE = [json.loads(encode_event(e)) for e in STREAM]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)


@given(st.binary(max_size=512))
def test_any_bytes_decode_or_raise_decode_error(payload: bytes) -> None:
    for decode in (decode_event, decode_state):
        try:
            decode(payload, topic="fuzz")
        except DecodeError as err:  # the one error allowed, and it says where and why
            assert err.topic == "fuzz"  # noqa: PT017
            assert err.reason  # noqa: PT017


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(WIRE), st.text(min_size=1, max_size=12), json_values)
def test_mutated_real_events_decode_or_raise_decode_error(
    base: dict, key: str, value: object
) -> None:  # type: ignore[type-arg]
    data = {**base}
    if key in data and isinstance(value, type(None)):
        del data[key]
    else:
        data[key] = value
    try:
        event = decode_event(json.dumps(data).encode(), topic="fuzz")
    except DecodeError:
        return
    assert decode_event(encode_event(event)) == event


def _recompute(events: list[Event]) -> MatchState:
    """The reference: keep only the events that extend the sequence, then fold them."""
    accepted: list[Event] = []
    last = 0
    for e in events:
        if e.seq > last:
            accepted.append(e)
            last = e.seq
    state = MatchState.new(MATCH)
    for e in accepted:
        state = apply(state, e)
    return state


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM) - 1), max_size=60))
def test_the_reducer_survives_any_order_duplicates_and_gaps(indices: list[int]) -> None:
    events = [STREAM[i] for i in indices]
    state = MatchState.new(MATCH)
    last_seq = 0
    for e in events:
        before = state
        state = apply(state, e)
        if e.seq <= last_seq:
            assert state is before  # a duplicate or older seq changes nothing
        last_seq = max(last_seq, e.seq)
    assert state == _recompute(events)
    assert state.last_seq == last_seq


@given(st.lists(st.booleans(), min_size=len(STREAM), max_size=len(STREAM)))
def test_losing_events_never_breaks_the_score_of_the_goals_that_arrive(keep: list[bool]) -> None:
    arrived = [e for e, k in zip(STREAM, keep, strict=True) if k]
    state = MatchState.new(MATCH)
    for e in arrived:
        state = apply(state, e)
    goals = [e for e in arrived if e.type in ("goal", "full_time")]
    if goals:
        assert state.score == goals[-1].score  # type: ignore[union-attr]
