"""Match file rules real matches need: extra time in knockouts, shoot-out rules, round trips."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from events import MatchFileError, replay_state
from simulator import dump_match, expand, load_match, parse_match, resolve_matches, write_match
from simulator._shootout import decided_at, is_decided, synthesise
from tests._cli import run_cli


def _base() -> dict[str, Any]:
    return {
        "match_id": "ko-test",
        "competition": {"name": "Cup", "knockout": True, "source": "assumption"},
        "kickoff": {"date": "2026-07-01", "source": "assumption"},
        "home": {"code": "AAA", "name": "Alpha", "source": "assumption"},
        "away": {"code": "BBB", "name": "Beta", "source": "assumption"},
        "timeline": [
            {"type": "goal", "minute": 10, "team": "AAA", "scorer": "A", "source": "assumption"},
            {"type": "goal", "minute": 80, "team": "BBB", "scorer": "B", "source": "assumption"},
        ],
        "result": {"score": {"AAA": 1, "BBB": 1}, "source": "assumption"},
    }


def _periods(*numbers: int) -> list[dict[str, Any]]:
    return [{"period": n, "added_minutes": 1, "source": "assumption"} for n in numbers]


def _kicks(pattern: str) -> list[dict[str, Any]]:
    """``"AoBx"``: A scores, B misses."""
    return [
        {"team": pattern[i] * 3, "taker": f"k{i}", "scored": pattern[i + 1] == "o"}
        | {"source": "assumption"}
        for i in range(0, len(pattern), 2)
    ]


def _problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(MatchFileError) as info:
        parse_match(data)
    return info.value.problems


def test_knockout_level_after_90_needs_extra_time() -> None:
    assert any("goes to extra time" in p for p in _problems(_base()))


def test_group_match_level_after_90_is_fine() -> None:
    data = _base()
    data["competition"]["knockout"] = False
    assert parse_match(data).winner is None


def test_knockout_level_after_120_needs_penalties() -> None:
    data = _base() | {"periods": _periods(1, 2, 3, 4)}
    assert any("goes to penalties" in p for p in _problems(data))


def test_extra_time_only_when_level_after_90() -> None:
    data = copy.deepcopy(_base()) | {"periods": _periods(1, 2, 3, 4)}
    data["timeline"][1]["minute"] = 100
    data["result"]["score"] = {"AAA": 1, "BBB": 1}
    data["timeline"].append(
        {"type": "goal", "minute": 30, "team": "AAA", "scorer": "A", "source": "assumption"}
    )
    data["result"]["score"] = {"AAA": 2, "BBB": 1}
    assert any("extra time is only played when level" in p for p in _problems(data))


def test_a_full_knockout_match_with_a_shootout_replays_to_its_winner() -> None:
    data = _base() | {"periods": _periods(1, 2, 3, 4, 5), "shootout": _kicks("AoBoAoBxAoBxAo")}
    data["result"]["shootout"] = {"AAA": 4, "BBB": 1}
    match = parse_match(data)
    state = replay_state(match.match_id, [s.event for s in expand(match)])
    assert (state.score, state.shootout, state.winner) == (
        {"AAA": 1, "BBB": 1},
        {"AAA": 4, "BBB": 1},
        "AAA",
    )


def test_kicks_after_the_shootout_was_decided_are_refused() -> None:
    data = _base() | {"periods": _periods(1, 2, 3, 4, 5), "shootout": _kicks("AoBxAoBxAoBxAo")}
    data["result"]["shootout"] = {"AAA": 4, "BBB": 0}
    assert any("already decided by kick 6" in p for p in _problems(data))


def _reachable_finals(limit: int = 12) -> set[tuple[int, int]]:
    """Every score an alternating shoot-out (A first) can end with, by brute force."""
    finals, todo = set(), [(0, 0, 0, 0)]
    while todo:
        ta, tb, sa, sb = todo.pop()
        side = (ta + tb) % 2
        for goal in (0, 1):
            state = (ta + 1, tb, sa + goal, sb) if side == 0 else (ta, tb + 1, sa, sb + goal)
            if max(state[2:]) > limit:
                continue
            if is_decided(state[:2], state[2:]):
                finals.add(state[2:])
            elif state[0] <= limit + 1:
                todo.append(state)
    return finals


REACHABLE = _reachable_finals()


@given(st.integers(0, 12), st.integers(0, 12))
def test_synthesised_shootouts_end_exactly_when_decided(a: int, b: int) -> None:
    """Any score a shoot-out can end with gets a kick list that ends there and no later."""
    if (a, b) not in REACHABLE:
        with pytest.raises(ValueError, match="shoot-out"):
            synthesise("A", "B", (a, b))
        return
    kicks = synthesise("A", "B", (a, b))
    assert decided_at(kicks, ("A", "B")) == len(kicks) - 1
    assert (sum(s for t, s in kicks if t == "A"), sum(s for t, s in kicks if t == "B")) == (a, b)
    assert [t for t, _ in kicks] == ["A", "B"] * (len(kicks) // 2) + ["A"] * (len(kicks) % 2)


def test_every_2022_shootout_score_is_reachable() -> None:
    assert {(4, 2), (2, 4), (1, 3), (3, 0), (3, 4)} <= REACHABLE


def test_shootout_decision_rule() -> None:
    assert not is_decided((3, 3), (3, 2))
    assert is_decided((4, 4), (4, 1))  # B can reach 2 at most
    assert is_decided((3, 3), (3, 0))  # B can reach 2 at most
    assert not is_decided((3, 2), (3, 0))  # B could still reach 3
    assert not is_decided((5, 5), (4, 4))
    assert is_decided((6, 6), (5, 4))


def test_matches_round_trip_through_yaml_and_json(tmp_path: Path) -> None:
    """Written files load back to the same match, the bundled semi-final included."""
    for match in [*resolve_matches("semifinal"), *resolve_matches("worldcup:2022/final")]:
        assert parse_match(yaml.safe_load(dump_match(match))) == match
        assert parse_match(json.loads(dump_match(match, "json"))) == match
        assert load_match(write_match(match, tmp_path / "m.json")) == match


def test_schema_command_prints_the_match_file_schema() -> None:
    result = run_cli("schema", "--match-file")
    assert result.code == 0
    schema = json.loads(result.stdout)
    assert {"timeline", "periods", "shootout", "result"} <= set(schema["properties"])
    assert "GoalDisallowedIncident" in schema["$defs"]


def test_the_documented_example_is_a_valid_match_that_replays_as_described() -> None:
    """docs/match-format.md's example parses and ends as the text says."""
    doc = (Path(__file__).parents[1] / "docs" / "match-format.md").read_text(encoding="utf-8")
    example = doc.split("## Example", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    match = parse_match(yaml.safe_load(example))
    stream = [s.event for s in expand(match)]
    state = replay_state(match.match_id, stream)
    assert (state.scoreline, state.winner) == ("NTH 2-2 STH (2-4 pens)", "STH")
    assert "goal_disallowed" in [e.type for e in stream]
    assert [g.goal_id for g in state.goals] == ["n1", "s1", "s2", "n3"]
    assert [g.clock.label for g in state.goals] == ["45+2'", "60'", "105+1'", "119'"]
