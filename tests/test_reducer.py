"""The reducer derives the state purely; a duplicate seq changes nothing; gaps are detected."""

import pytest

from events import (
    GoalDisallowed,
    MatchClock,
    MatchState,
    Possession,
    apply,
    check_sequence,
)
from tests._factories import T0, goal, kickoff, tick


def test_kickoff_sets_teams_and_a_zero_score() -> None:
    state = apply(MatchState.new("m1"), kickoff())
    assert state.score == {"ARG": 0, "ENG": 0}
    assert state.status == "live"
    assert state.display_clock == "1H 1'"
    assert state.last_seq == 1


def test_apply_is_pure() -> None:
    before = MatchState.new("m1")
    after = apply(before, kickoff())
    assert before.last_seq == 0
    assert before.score == {}
    assert after is not before


def test_a_duplicate_seq_changes_nothing() -> None:
    state = apply(apply(MatchState.new("m1"), kickoff()), goal(2, 55, "ENG", {"ARG": 0, "ENG": 1}))
    again = apply(state, goal(2, 55, "ENG", {"ARG": 0, "ENG": 1}))
    assert again is state
    older = apply(state, kickoff())
    assert older is state
    assert len(state.goals) == 1


def test_check_sequence_classifies_next_duplicate_and_gap() -> None:
    state = apply(MatchState.new("m1"), kickoff())
    assert check_sequence(state, 2).kind == "next"
    assert check_sequence(state, 1).kind == "duplicate"
    gap = check_sequence(state, 5)
    assert gap.kind == "gap"
    assert list(gap.missing) == [2, 3, 4]


def test_after_a_gap_the_score_is_still_right_because_goals_carry_it() -> None:
    state = apply(MatchState.new("m1"), kickoff())
    # seq 2 (Gordon's goal) is lost; the equaliser carries the score after it
    state = apply(state, goal(3, 86, "ARG", {"ARG": 1, "ENG": 1}))
    assert state.score == {"ARG": 1, "ENG": 1}
    assert state.last_seq == 3


def test_a_disallowed_goal_is_undone() -> None:
    state = apply(MatchState.new("m1"), kickoff())
    state = apply(state, goal(2, 30, "ARG", {"ARG": 1, "ENG": 0}, goal_id="var"))
    state = apply(
        state,
        GoalDisallowed(
            match_id="m1",
            seq=3,
            clock=MatchClock.at(31),
            emitted_at=T0,
            goal_id="var",
            team="ARG",
            reason="offside",
            score={"ARG": 0, "ENG": 0},
        ),
    )
    assert state.score == {"ARG": 0, "ENG": 0}
    assert state.goals == ()


def test_an_event_of_another_match_is_refused() -> None:
    with pytest.raises(ValueError, match="other"):
        apply(MatchState.new("m1"), tick(1, 1, match_id="other"))


def test_scoreline_and_display_clock() -> None:
    state = apply(MatchState.new("m1"), kickoff())
    state = apply(state, goal(2, 90, "ARG", {"ARG": 2, "ENG": 1}, added=2))
    assert state.scoreline == "ARG 2-1 ENG"
    assert state.display_clock == "2H 90+2'"


def test_evolve_is_model_copy_without_the_cost() -> None:
    """The reducer's hot-path copy gives what pydantic's ``model_copy(update=...)`` gives: the
    same fields, the same fields-set, and a state pydantic can copy and dump as usual."""
    from events._state import evolve

    state = apply(MatchState.new("m1"), kickoff())
    for changes in (
        {"last_seq": 2, "clock": MatchClock.at(2)},
        {"last_seq": 3, "status": "half_time", "winner": "ARG"},
        {"possession": {"ARG": 55.0, "ENG": 45.0}},
    ):
        fast, slow = evolve(state, changes), state.model_copy(update=changes)
        assert fast == slow
        assert fast.model_fields_set == slow.model_fields_set
        assert fast.model_dump_json() == slow.model_dump_json()
        assert state.last_seq == 1  # the source is untouched
    shared = evolve(state, {"last_seq": 2})
    assert shared.model_fields_set is state.model_fields_set  # nothing new set: shared
    copied = shared.model_copy(update={"winner": "ARG"})  # pydantic copies before adding
    assert "winner" in copied.model_fields_set
    assert "winner" not in state.model_fields_set
    assert MatchState.model_validate_json(shared.model_dump_json()) == shared


def test_possession_keeps_the_stretch_it_covers() -> None:
    """The state says which stretch the shares cover (1.2), so a late joiner can say it."""
    state = apply(MatchState.new("m1"), kickoff())
    share = {"ARG": 88.0, "ENG": 12.0}
    state = apply(
        state,
        Possession(
            match_id="m1",
            seq=2,
            clock=MatchClock.at(86),
            emitted_at=T0,
            share=share,
            since=MatchClock.at(55),
        ),
    )
    assert state.possession == share
    assert state.possession_since == MatchClock.at(55)
    assert state.possession_until == MatchClock.at(86)
    later = apply(state, tick(3, 88))
    assert (later.possession_since, later.possession_until) == (
        MatchClock.at(55),
        MatchClock.at(86),
    )
    assert MatchState.model_validate_json(later.model_dump_json()) == later

    unsourced = apply(
        later,
        Possession(match_id="m1", seq=4, clock=MatchClock.at(89), emitted_at=T0, share=share),
    )
    assert unsourced.possession_since is None  # a new stretch of unknown start
    assert unsourced.possession_until == MatchClock.at(89)


def test_states_kept_per_match_share_their_fields_sets() -> None:
    """Each state held its own ``__pydantic_fields_set__`` (1.2 KB for twenty names) and so
    did its teams and match info: an eighth of what a consumer kept per tracked match. States
    with the same fields set now share one set, and sharing never lets a change leak."""
    from consumers._sequencer import RunnerStats, Sequencer
    from events import decode_event, decode_state, encode_event, encode_state

    a, b = (apply(MatchState.new(m), decode_event(encode_event(kickoff(match_id=m)))) for m in "ab")
    assert a.model_fields_set is b.model_fields_set
    assert a.home is not None and b.home is not None
    assert a.home is not b.home  # as decoded from the wire: objects of their own
    assert a.home.model_fields_set is b.home.model_fields_set
    adopted = []
    for state in (a, b):  # a consumer joining each match from its retained snapshot
        seq = Sequencer(state.match_id, RunnerStats())
        seq.on_snapshot(decode_state(encode_state(state)), retained=True)
        assert seq.state is not None
        adopted.append(seq.state)
    snap_a, snap_b = adopted
    assert snap_a.model_fields_set is snap_b.model_fields_set
    assert snap_a.home is not None and snap_b.home is not None
    assert snap_a.home.model_fields_set is snap_b.home.model_fields_set
    before = set(snap_b.model_fields_set)
    changed = snap_a.model_copy(update={"winner": "ARG"})
    assert "winner" in changed.model_fields_set
    assert set(snap_b.model_fields_set) == before  # the shared set is untouched
    assert decode_state(encode_state(changed)) == changed


def test_a_state_keeps_the_last_goals_and_cards_and_the_score_of_every_goal() -> None:
    """5,000 goals cost 95 s of CPU in ``web``: the goals were copied per goal, without end."""
    from events import KEEP_CARDS, KEEP_GOALS, Card

    state = apply(MatchState.new("m1"), kickoff())
    n = 5_000
    for i in range(n):
        state = apply(state, goal(2 + i, 30, "ARG", {"ARG": i + 1, "ENG": 0}))
    for i in range(n):
        card = Card(
            match_id="m1",
            seq=2 + n + i,
            clock=MatchClock.at(31),
            emitted_at=T0,
            team="ENG",
            player="Someone",
            card="yellow",
        )
        state = apply(state, card)
    assert len(state.goals) == KEEP_GOALS and len(state.cards) == KEEP_CARDS
    assert state.goals[-1].seq == 1 + n and state.cards[-1].seq == 1 + 2 * n
    assert state.score == {"ARG": n, "ENG": 0}
    ruled_out = GoalDisallowed(  # the first goal, no longer kept: the event carries the score
        match_id="m1",
        seq=2 + 2 * n,
        clock=MatchClock.at(32),
        emitted_at=T0,
        goal_id="g2",
        team="ARG",
        score={"ARG": n - 1, "ENG": 0},
    )
    after = apply(state, ruled_out)
    assert after.score == {"ARG": n - 1, "ENG": 0}
    assert after.goals == state.goals and after.last_seq == 2 + 2 * n


def test_counted_events_of_a_third_team_add_no_stats() -> None:
    """5,000 shots and corners from distinct team codes grew ``stats`` by an entry each: a
    state keeps the two teams' stats only (MAX_TEAMS), the first two before the kick-off."""
    from events import MAX_TEAMS, Corner, Shot

    def shot(seq: int, team: str) -> Shot:
        return Shot(
            match_id="m1",
            seq=seq,
            clock=MatchClock.at(20),
            emitted_at=T0,
            shot_id=f"s{seq}",
            team=team,
            player="Someone",
            outcome="goal",
            xg=0.5,
        )

    def corner(seq: int, team: str) -> Corner:
        return Corner(match_id="m1", seq=seq, clock=MatchClock.at(20), emitted_at=T0, team=team)

    before = MatchState.new("m1")
    for i in range(1, 6):
        before = apply(before, corner(i, f"T{i:04d}"))
    assert list(before.stats) == ["T0001", "T0002"]

    state = apply(MatchState.new("m1"), kickoff())
    state = apply(state, shot(2, "ARG"))
    n = 5_000
    for i in range(n):
        state = apply(state, shot(3 + 2 * i, f"T{i:04d}"))
        state = apply(state, corner(4 + 2 * i, f"X{i:04d}"))
    assert len(state.stats) == MAX_TEAMS and set(state.stats) == {"ARG", "ENG"}
    assert (state.stats["ARG"].shots, state.stats["ENG"].shots, state.stats["ENG"].corners) == (
        1,
        0,
        0,
    )
    assert list(state.scoring_shots) == ["s2"] and state.last_seq == 2 + 2 * n
    assert apply(state, corner(3 + 2 * n, "ENG")).stats["ENG"].corners == 1
