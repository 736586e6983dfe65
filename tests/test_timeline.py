"""The match file expands into the full stream: every minute, the incidents, HT, FT."""

from collections import Counter

from events import EVENT_MODELS, MatchState, Period, apply
from simulator import expand, resolve_matches


def _stream():  # type: ignore[no-untyped-def]
    return expand(resolve_matches("semifinal")[0])


def test_seq_is_contiguous_from_one() -> None:
    assert [s.event.seq for s in _stream()] == list(range(1, len(_stream()) + 1))


def test_a_clock_tick_for_every_minute_played_including_added_time() -> None:
    ticks = [s.event.clock.label for s in _stream() if s.event.type == "clock"]
    first_half = [f"{m}'" for m in range(1, 46)] + ["45+1'", "45+2'", "45+3'"]
    second_half = [f"{m}'" for m in range(46, 91)] + [f"90+{a}'" for a in range(1, 6)]
    assert ticks == first_half + second_half


def test_the_shape_of_the_match() -> None:
    stream = _stream()
    feed = {m.event_type() for m in EVENT_MODELS if m.added_in == "1.4"}
    kinds = [(s.event.type, s.event.clock.label) for s in stream if s.event.type != "clock"]
    shots = [k for k in kinds if k[0] == "shot"]
    assert len(shots) == 30 and shots[0] == ("shot", "9'")  # ARG 22, ENG 8 (the full feed)
    kinds = [k for k in kinds if k[0] not in feed]
    assert kinds == [
        ("kick_off", "1'"),
        ("period_end", "45+3'"),
        ("kick_off", "46'"),
        ("goal", "55'"),
        ("possession", "86'"),
        ("goal", "86'"),
        ("goal", "90+2'"),
        ("full_time", "90+5'"),
    ]
    first_half = 1 + next(i for i, s in enumerate(stream) if s.event.type == "period_end")
    assert first_half == 79  # kick-off, 48 ticks, the full feed's 29 events, half time
    assert Counter(s.breaks for s in stream) == Counter(
        {0: first_half, 1: len(stream) - first_half}
    )


def test_incidents_follow_the_tick_of_their_minute_and_time_never_goes_back() -> None:
    stream = _stream()
    assert [s.play_s for s in stream] == sorted(s.play_s for s in stream)
    goal_55 = next(i for i, s in enumerate(stream) if s.event.type == "goal")
    assert stream[goal_55 - 1].event.type == "shot"  # the goal's shot, then the goal
    assert stream[goal_55 - 2].event.type == "clock"
    assert stream[goal_55 - 2].event.clock.label == "55'"


def test_folding_the_stream_gives_the_final_result() -> None:
    stream = _stream()
    state = MatchState.new(stream[0].event.match_id)
    for s in stream:
        state = apply(state, s.event)
    assert state.score == {"ARG": 2, "ENG": 1}
    assert state.status == "finished"
    assert state.winner == "ARG"
    assert [(g.clock.label, g.scorer) for g in state.goals] == [
        ("55'", "Anthony Gordon"),
        ("86'", "Enzo Fernández"),
        ("90+2'", "Lautaro Martínez"),
    ]
    assert state.possession == {"ENG": 12, "ARG": 88}
    assert state.period is Period.SECOND_HALF


def test_half_time_is_reported_as_ht() -> None:
    stream = _stream()
    state = MatchState.new(stream[0].event.match_id)
    for s in stream:
        state = apply(state, s.event)
        if s.event.type == "period_end":
            break
    assert state.display_clock == "HT"
    assert state.score == {"ARG": 0, "ENG": 0}
