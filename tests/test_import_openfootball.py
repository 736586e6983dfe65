"""The openfootball importer: real records in, validated matches out, bad records named."""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from events import MatchFileError, Period, replay_state
from simulator import GoalIncident, Match, expand, load_match, resolve_matches
from simulator._schemes import worldcup_path
from simulator.importers import import_openfootball
from tests._cli import run_cli

WORLDCUP = json.loads(worldcup_path("2022").read_text(encoding="utf-8"))


def _record(team1: str, team2: str) -> dict[str, Any]:
    """A copy of the real 2022 record of ``team1`` v ``team2``."""
    found = next(m for m in WORLDCUP["matches"] if (m["team1"], m["team2"]) == (team1, team2))
    return copy.deepcopy(found)


def _import(tmp_path: Path, *records: dict[str, Any], name: str = "World Cup 2022") -> list[Match]:
    path = tmp_path / "worldcup.json"
    path.write_text(json.dumps({"name": name, "matches": list(records)}), encoding="utf-8")
    return import_openfootball(path)


def _problems(tmp_path: Path, data: Any) -> list[str]:
    path = tmp_path / "worldcup.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(MatchFileError) as info:
        import_openfootball(path)
    assert info.value.path == path
    return info.value.problems


def _final_state(match: Match) -> Any:
    return replay_state(match.match_id, [s.event for s in expand(match)])


def test_the_final_has_extra_time_and_a_shootout(tmp_path: Path) -> None:
    """Argentina 3-3 France, 4-2 on penalties, with goals in extra time."""
    (match,) = _import(tmp_path, _record("Argentina", "France"))
    assert [p.period for p in match.periods] == list(Period)
    assert match.competition.knockout
    state = _final_state(match)
    assert state.score == {"ARG": 3, "FRA": 3}
    assert state.shootout == {"ARG": 4, "FRA": 2}
    assert state.winner == "ARG"
    labels = [(g.clock.label, g.scorer) for g in state.goals]
    assert labels == [
        ("23'", "Lionel Messi"),
        ("36'", "Ángel Di María"),
        ("80'", "Kylian Mbappé"),
        ("81'", "Kylian Mbappé"),
        ("108'", "Lionel Messi"),
        ("118'", "Kylian Mbappé"),
    ]
    assert [g.method for g in state.goals] == ["penalty", None, "penalty", None, None, "penalty"]


def test_shootout_kicks_are_made_up_and_marked_as_assumptions(tmp_path: Path) -> None:
    (match,) = _import(tmp_path, _record("Argentina", "France"))
    assert {k.source for k in match.shootout} == {"assumption"}
    assert match.shootout[0].note is not None
    assert "only the shoot-out score" in match.shootout[0].note
    assert match.shootout_score() == {"ARG": 4, "FRA": 2}


def test_goal_lists_out_of_time_order_are_sorted(tmp_path: Path) -> None:
    """openfootball lists Messi's 108th-minute goal before Di María's 36th."""
    (match,) = _import(tmp_path, _record("Argentina", "France"))
    minutes = [i.clock.sort_key for i in match.timeline]
    assert minutes == sorted(minutes)


def test_an_own_goal_counts_for_the_other_team(tmp_path: Path) -> None:
    """Enzo Fernández's own goal is listed under Australia, and counts for Australia."""
    (match,) = _import(tmp_path, _record("Argentina", "Australia"))
    own = next(i for i in match.timeline if isinstance(i, GoalIncident) and i.method == "own_goal")
    assert (own.team, own.scorer, own.clock.label) == ("AUS", "Enzo Fernández", "77'")
    assert _final_state(match).score == {"ARG": 2, "AUS": 1}


def test_added_time_offsets_become_labels_and_lengthen_the_period(tmp_path: Path) -> None:
    """Klaassen's 90+9 and Neymar's 105+1 (extra time) keep their labels."""
    (sen_ned,) = _import(tmp_path, _record("Senegal", "Netherlands"))
    assert _final_state(sen_ned).goals[-1].clock.label == "90+9'"
    assert sen_ned.periods[1].added_minutes >= 9
    (cro_bra,) = _import(tmp_path, _record("Croatia", "Brazil"))
    neymar = next(g for g in _final_state(cro_bra).goals if g.scorer == "Neymar")
    assert (neymar.clock.label, neymar.clock.period) == ("105+1'", Period.EXTRA_TIME_FIRST)


def test_kickoff_is_local_qatar_time(tmp_path: Path) -> None:
    (match,) = _import(tmp_path, _record("Qatar", "Ecuador"))
    assert match.kickoff.utc() == dt.datetime(2022, 11, 20, 16, 0, tzinfo=dt.UTC)


def test_a_half_time_score_at_odds_with_the_goals_is_noted_not_fatal(tmp_path: Path) -> None:
    """The 2022 file says Japan v Spain was 0-0 at half time; Morata scored in the 11th."""
    (match,) = _import(tmp_path, _record("Japan", "Spain"))
    assert match.result.note is not None
    assert "score.ht" in match.result.note


def test_teams_may_carry_their_code_and_times_their_offset(tmp_path: Path) -> None:
    record = _record("Qatar", "Ecuador") | {
        "team1": {"name": "Hosts", "code": "HST"},
        "time": "19:00 UTC+3",
    }
    (match,) = _import(tmp_path, record, name="Some Cup 2030")
    assert match.home.code == "HST"
    assert match.match_id == "some-cup-2030-1120-hst-ecu"
    assert match.kickoff.utc_offset == "+03:00"


def test_an_offset_can_be_given_for_local_times(tmp_path: Path) -> None:
    path = tmp_path / "cup.json"
    path.write_text(json.dumps({"name": "Cup", "matches": [_record("Qatar", "Ecuador")]}))
    (match,) = import_openfootball(path, utc_offset="-05:00")
    assert match.kickoff.utc_offset == "-05:00"


def _mutated(change: str) -> Any:
    final = _record("Argentina", "France")
    group = _record("Qatar", "Ecuador")
    records = [group, final]
    match change:
        case "minute-not-int":
            group["goals2"][0]["minute"] = "16"
        case "unknown-team":
            group["team1"] = "Atlantis"
        case "goal-missing":
            del group["goals2"][1]
        case "offset-mid-half":
            group["goals2"][1]["offset"] = 2
        case "shootout-without-et":
            del final["score"]["et"]
            final["goals1"] = [g for g in final["goals1"] if g["minute"] <= 90]
            final["goals2"] = [g for g in final["goals2"] if g["minute"] <= 90]
        case "knockout-level-without-et":
            del final["score"]["et"], final["score"]["p"]
            final["goals1"] = [g for g in final["goals1"] if g["minute"] <= 90]
            final["goals2"] = [g for g in final["goals2"] if g["minute"] <= 90]
        case "impossible-shootout":
            final["score"]["p"] = [5, 0]
        case "et-goal-without-et":
            group["goals2"][1]["minute"] = 95
            group["score"]["ft"] = [0, 1]
    return {"name": "World Cup 2022", "matches": records}


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("minute-not-int", "matches[0].goals2[0].minute: Input should be a valid integer"),
        ("unknown-team", "matches[0].team1: unknown team 'Atlantis'"),
        ("goal-missing", "matches[0].score.ft: says 0-2 but goals1/goals2 list 0-1"),
        ("offset-mid-half", "matches[0].goals2[1].offset: added time only follows minute 45"),
        ("shootout-without-et", "matches[1].score.p: a shoot-out straight after 90 minutes"),
        ("knockout-level-without-et", "matches[1] (Argentina v France): periods: a knockout"),
        ("impossible-shootout", "matches[1].score.p: no shoot-out ends 5-0"),
        ("et-goal-without-et", "matches[0].score.et: goals in extra time but no score.et"),
    ],
)
def test_inconsistent_records_are_refused_naming_the_record(
    tmp_path: Path, change: str, expected: str
) -> None:
    problems = _problems(tmp_path, _mutated(change))
    assert any(p.startswith(expected) for p in problems), problems


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ([{"type": {"name": "Pass"}, "period": 1}], "a StatsBomb events file?"),
        ({"rounds": []}, "the older format with 'rounds'"),
        ({"name": "x", "games": []}, "an object with 'name' and 'matches'"),
        ("just a string", "got str"),
    ],
)
def test_files_that_are_not_openfootball_are_refused(
    tmp_path: Path, data: Any, expected: str
) -> None:
    (problem,) = _problems(tmp_path, data)
    assert expected in problem


def test_a_missing_utc_offset_is_refused_unless_known(tmp_path: Path) -> None:
    problems = _problems(tmp_path, {"name": "Cup", "matches": [_record("Qatar", "Ecuador")]})
    assert any("has no UTC offset" in p for p in problems)


def test_not_json_and_missing_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(MatchFileError, match="not valid JSON"):
        import_openfootball(bad)
    with pytest.raises(MatchFileError, match="no such file"):
        import_openfootball(tmp_path / "missing.json")


def test_import_command_writes_a_match_file_that_replays(tmp_path: Path) -> None:
    out = tmp_path / "final.yaml"
    result = run_cli(
        "import", "openfootball", str(worldcup_path("2022")), "--match", "final", "-o", str(out)
    )
    assert result.code == 0, result.stderr
    assert "ARG 3-3 FRA (4-2 pens)" in result.stderr
    assert load_match(out) == resolve_matches("worldcup:2022/final")[0]


def test_import_command_writes_every_match_into_a_directory(tmp_path: Path) -> None:
    result = run_cli(
        "import", "openfootball", str(worldcup_path("2022")), "-o", str(tmp_path / "wc")
    )
    assert result.code == 0, result.stderr
    assert len(list((tmp_path / "wc").glob("wc2022-*.yaml"))) == 64


def test_import_command_reports_bad_input_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "worldcup.json"
    path.write_text(json.dumps(_mutated("minute-not-int")))
    result = run_cli("import", "openfootball", str(path), "-o", str(tmp_path / "x.yaml"))
    assert result.code == 2
    assert result.stderr.count("\n") == 1
    assert "matches[0].goals2[0].minute" in result.stderr
    assert not (tmp_path / "x.yaml").exists()
