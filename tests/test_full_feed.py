"""The full feed (wire 1.4): shots, saves, corners, fouls, offsides, penalties awarded; the
match file's rules for them; the state's per-team stats; and the lean feed without them."""

from __future__ import annotations

import copy
from collections import Counter
from typing import Any

import pytest

from events import (
    EVENT_MODELS,
    Card,
    Event,
    Goal,
    GoalDisallowed,
    MatchFileError,
    MatchState,
    Shot,
    TeamStats,
    apply,
    replay_state,
)
from simulator import expand, lean_match, parse_match

_A = {"source": "assumption"}


def _match(*incidents: dict[str, Any], score: dict[str, int] | None = None) -> dict[str, Any]:
    return {
        "match_id": "feed-test",
        "competition": {"name": "Cup", **_A},
        "kickoff": {"date": "2026-07-01", **_A},
        "home": {"code": "AAA", "name": "Alpha", **_A},
        "away": {"code": "BBB", "name": "Beta", **_A},
        "timeline": [{**i, **_A} for i in incidents],
        "result": {"score": score or {"AAA": 1, "BBB": 0}, **_A},
    }


_GOAL = {
    "type": "goal",
    "id": "g1",
    "minute": 30,
    "team": "AAA",
    "scorer": "Ann",
    "method": "header",
    "shot": {"xg": 0.31, "body_part": "head", "inside_box": True},
}
_FULL = (
    {"type": "corner", "minute": 10, "team": "AAA"},
    {"type": "shot", "minute": 12, "team": "AAA", "player": "Ann", "outcome": "saved"}
    | {"xg": 0.12, "keeper": "Bo", "id": "s-a"},
    {"type": "shot", "minute": 14, "team": "BBB", "player": "Cy", "outcome": "off_target"}
    | {"xg": 0.05, "body_part": "left_foot", "inside_box": False},
    {"type": "foul", "id": "f1", "minute": 20, "team": "BBB", "player": "Cy"},
    {"type": "card", "minute": 20, "second": 40, "team": "BBB", "player": "Cy"}
    | {"card": "yellow", "foul": "f1"},
    {"type": "offside", "minute": 25, "team": "AAA", "player": "Ann"},
    _GOAL,
    {"type": "foul", "id": "f2", "minute": 60, "team": "AAA"},
    {"type": "penalty_awarded", "minute": 60, "second": 50, "team": "BBB", "foul": "f2"},
    {"type": "shot", "minute": 61, "team": "BBB", "player": "Cy", "outcome": "woodwork"}
    | {"xg": 0.76, "body_part": "right_foot", "inside_box": True},
)


def _events(data: dict[str, Any]) -> list[Event]:
    return [s.event for s in expand(parse_match(data))]


def test_a_full_match_file_becomes_the_full_feed() -> None:
    events = _events(_match(*_FULL))
    kinds = Counter(e.type for e in events)
    assert kinds["shot"] == 4 and kinds["save"] == 1 and kinds["corner"] == 1
    assert kinds["foul"] == 2 and kinds["offside"] == 1 and kinds["penalty_awarded"] == 1
    goal = next(e for e in events if isinstance(e, Goal))
    shot = events[events.index(goal) - 1]
    assert isinstance(shot, Shot) and shot.outcome == "goal" and shot.shot_id == goal.shot_id
    assert (shot.player, shot.team, shot.xg, shot.body_part) == ("Ann", "AAA", 0.31, "head")
    save = next(e for e in events if e.type == "save")
    assert save.model_dump(include={"team", "keeper", "shot_id"}) == {
        "team": "BBB",
        "keeper": "Bo",
        "shot_id": "s-a",
    }
    card = next(e for e in events if isinstance(e, Card))
    assert card.foul_id == "f1"
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


def test_the_state_counts_the_stats_per_team() -> None:
    state = replay_state("feed-test", _events(_match(*_FULL)))
    assert state.stats == {
        "AAA": TeamStats(shots=2, on_target=2, xg=0.43, corners=1, fouls=1, offsides=1),
        "BBB": TeamStats(shots=2, on_target=0, xg=0.81, fouls=1, saves=1),
    }


def _counted_from_events(events: list[Event]) -> dict[str, tuple[int, int, int]]:
    """What a subscriber counts by hand: shots, on target, fouls, per team."""
    out: Counter[tuple[str, str]] = Counter()
    for e in events:
        if isinstance(e, Shot):
            out[e.team, "shots"] += 1
            out[e.team, "on"] += e.outcome in ("goal", "saved")
        elif e.type == "foul":
            out[e.model_dump()["team"], "fouls"] += 1
    return {t: (out[t, "shots"], out[t, "on"], out[t, "fouls"]) for t in ("AAA", "BBB")}


def test_duplicates_change_no_stat() -> None:
    events = _events(_match(*_FULL))
    state = MatchState.new("feed-test")
    for e in events:
        state = apply(apply(state, e), e)  # every event twice
    for e in events[::3]:
        state = apply(state, e)  # and some again, late
    assert state == replay_state("feed-test", events)
    counted = _counted_from_events(events)
    assert {t: (s.shots, s.on_target, s.fouls) for t, s in state.stats.items()} == counted


def test_a_goal_ruled_out_takes_its_shot_back_off() -> None:
    ruled_out = {"type": "goal_disallowed", "goal": "g1", "minute": 32}
    with_it = replay_state(
        "feed-test", _events(_match(*_FULL, ruled_out, score={"AAA": 0, "BBB": 0}))
    )
    without = [i for i in _FULL if i is not _GOAL]
    never = replay_state("feed-test", _events(_match(*without, score={"AAA": 0, "BBB": 0})))
    assert with_it.stats == never.stats
    assert with_it.scoring_shots == {} and with_it.score == {"AAA": 0, "BBB": 0}


def test_xg_summed_and_taken_off_gives_back_the_same_number() -> None:
    shots = [0.1, 0.2, 0.7, 0.05, 0.33, 0.0712]
    goals = [
        {"type": "goal", "id": f"g{i}", "minute": 10 + i, "team": "AAA", "scorer": "Ann"}
        | {"shot": {"xg": x}}
        for i, x in enumerate(shots)
    ]
    out = [
        {"type": "goal_disallowed", "goal": f"g{i}", "minute": 40 + i} for i in range(len(shots))
    ]
    state = replay_state("feed-test", _events(_match(*goals, *out, score={"AAA": 0, "BBB": 0})))
    assert state.stats["AAA"] == TeamStats() and state.stats["BBB"] == TeamStats()


def test_a_new_run_counts_from_nothing() -> None:
    """Each run is folded from its own start: a second run does not add to the first."""
    events = _events(_match(*_FULL))
    first = replay_state("feed-test", events)
    rerun = [e.model_copy(update={"run": 2}) for e in events]
    assert replay_state("feed-test", rerun).stats == first.stats


def test_an_own_goal_is_no_shot() -> None:
    own = {"type": "goal", "minute": 5, "team": "AAA", "scorer": "Cy", "method": "own_goal"}
    data = _match(own | {"shot": {"xg": 0.02}})
    with pytest.raises(MatchFileError, match="an own goal is no shot"):
        parse_match(data)
    events = _events(_match(own, _FULL[2]))  # no shot, in a match with shots: fine
    assert [e.type for e in events if e.type in ("shot", "goal")] == ["goal", "shot"]
    assert replay_state("feed-test", events).stats["AAA"].shots == 0


@pytest.mark.parametrize(
    ("incidents", "problem"),
    [
        ((_GOAL | {"shot": None}, _FULL[2]), "every goal but an own goal comes from one"),
        (({**_FULL[2], "keeper": "Bo"}, _GOAL), "only a saved shot has a keeper"),
        (({**_FULL[4], "foul": "nope"}, _GOAL), "no foul has id 'nope'"),
        (({**_FULL[1], "id": "x"}, {**_FULL[1], "id": "x"}, _GOAL), "shot id 'x' is used twice"),
        (({**_FULL[1], "xg": 1.5}, _GOAL), "less than or equal to 1"),
    ],
)
def test_the_full_feed_rules_are_checked(
    incidents: tuple[dict[str, Any], ...], problem: str
) -> None:
    with pytest.raises(MatchFileError) as info:
        parse_match(_match(*copy.deepcopy(incidents)))
    assert any(problem in p for p in info.value.problems), info.value.problems


def test_the_lean_feed_is_the_events_of_wire_1_3() -> None:
    match = parse_match(_match(*_FULL))
    lean = [s.event for s in expand(lean_match(match))]
    added = {m.event_type() for m in EVENT_MODELS if m.added_in == "1.4"}
    assert not {e.type for e in lean} & added
    assert all(
        getattr(e, "shot_id", None) is None and getattr(e, "foul_id", None) is None for e in lean
    )
    assert [e.seq for e in lean] == list(range(1, len(lean) + 1))
    full_state = replay_state("feed-test", [s.event for s in expand(match)])
    lean_state = replay_state("feed-test", lean)
    assert lean_state.stats == {} and lean_state.score == full_state.score
    assert [c.player for c in lean_state.cards] == [c.player for c in full_state.cards]


def test_a_goal_ruled_out_event_without_stats_changes_only_the_score() -> None:
    """A lean feed's correction: no stats to take anything off."""
    goal = next(e for e in _events(_match(_GOAL | {"shot": None})) if isinstance(e, Goal))
    state = apply(MatchState.new("feed-test"), goal)
    out = GoalDisallowed(
        match_id="feed-test",
        seq=goal.seq + 1,
        clock=goal.clock,
        emitted_at=goal.emitted_at,
        goal_id="g1",
        team="AAA",
        score={"AAA": 0, "BBB": 0},
    )
    assert apply(state, out).stats == {}


def test_the_semifinal_stats_agree_with_the_article() -> None:
    """Its goals (two headers, each after its shot), and Argentina battering away from 55'
    to 86' with 88% of the ball: nearly all the shots of that stretch are theirs."""
    from simulator import resolve_matches

    match = resolve_matches("semifinal")[0]
    events = [s.event for s in expand(match)]
    state = replay_state(match.match_id, events)
    arg, eng = state.stats["ARG"], state.stats["ENG"]
    assert (arg.shots, arg.on_target, eng.shots, eng.on_target) == (22, 8, 8, 3)
    assert arg.xg > 2 * eng.xg and arg.corners > 3 * eng.corners
    shots = [e for e in events if isinstance(e, Shot)]
    goals = [e for e in events if isinstance(e, Goal)]
    assert [e.shot_id for e in goals] == [s.shot_id for s in shots if s.outcome == "goal"]
    headers = [s for s in shots if s.outcome == "goal" and s.body_part == "head"]
    assert [s.player for s in headers] == ["Enzo Fernández", "Lautaro Martínez"]
    siege = [s for s in shots if 55 < s.clock.minute < 86 and s.clock.period == 2]
    assert sum(s.team == "ARG" for s in siege) >= 10 * sum(s.team == "ENG" for s in siege) > 0
    told = {"goal", "possession"}
    assumed = [i for i in match.timeline if i.type not in told]
    assert all(i.source == "assumption" and i.note for i in assumed)


def test_the_tickers_show_shots_on_target_and_saves() -> None:
    events = _events(_match(*_FULL))
    state = MatchState.new("feed-test")
    lines = []
    for e in events:
        state = apply(state, e)
        said = e.commentary(state)
        if said is not None and e.type in ("shot", "save", "corner", "foul", "offside"):
            lines.append(said.terminal)
    assert lines == [
        "12'    SHOT  Ann (AAA), on target, saved, xG 0.12",
        "12'    SAVE  Bo (BBB)",
        "61'    SHOT  Cy (BBB), hits the woodwork, xG 0.76",
    ]


@pytest.mark.mosquitto
def test_replay_feed_lean_sends_the_events_of_wire_1_3(mosquitto_url: Any, topics: Any) -> None:
    from tests._cli import run_cli

    where = ("--broker", f"mqtt://{mosquitto_url.host}:{mosquitto_url.port}", "--root", topics.root)
    full = run_cli("replay", "--speed", "max", *where, "--log-format", "json")
    assert full.code == 0, full.stderr
    assert "wc2026-sf-arg-eng: ARG 2-1 ENG (191 events, seq 1-191)" in full.stdout
    lean = run_cli("replay", "--feed", "lean", "--speed", "max", *where, "--log-format", "json")
    assert lean.code == 0, lean.stderr
    assert "wc2026-sf-arg-eng: ARG 2-1 ENG (106 events, seq 1-106)" in lean.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("replay", "--feed", "rich"), "must be full or lean, not 'rich'"),
        (("demo", "--feed", "LEANER"), "must be full or lean"),
        (("web", "--demo", "--feed", "thin"), "must be full or lean, not 'thin'"),
    ],
)
def test_a_feed_that_is_neither_is_refused(args: tuple[str, ...], message: str) -> None:
    from tests._cli import run_cli

    result = run_cli(*args)
    assert result.code == 2 and message in result.stderr, result.stderr


def test_a_recording_is_not_made_lean(tmp_path: Any) -> None:
    """A recording replays the events it recorded: the lean feed refuses it, exit 2."""
    from events import encode_event
    from simulator import resolve_matches
    from tests._cli import run_cli

    path = tmp_path / "r.jsonl"
    events = [s.event for s in expand(resolve_matches("semifinal")[0])]
    path.write_bytes(b"".join(encode_event(e) + b"\n" for e in events))
    result = run_cli("replay", str(path), "--feed", "lean", "--speed", "max")
    assert result.code == 2, result.stderr
    assert "a recording replays the events it recorded" in result.stderr


def test_the_reducers_copy_of_a_stats_line_is_model_copys() -> None:
    from events._state import _changed

    line = TeamStats(shots=3, xg=0.4)
    fast, slow = _changed(line, {"shots": 4}), line.model_copy(update={"shots": 4})
    assert fast == slow and fast.model_fields_set == slow.model_fields_set
    assert fast.model_dump_json() == slow.model_dump_json() and line.shots == 3
