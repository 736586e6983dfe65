"""The StatsBomb importer, on a real excerpt of Barcelona 2-2 Girona (data: StatsBomb)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from events import MatchFileError, Period, Topics, minute_of_play
from matchcast.app import run_replay
from matchcast.transport.connection import BrokerURL
from simulator import ReplayOptions, expand, load_match
from simulator.importers import ATTRIBUTION, import_statsbomb
from tests._cli import run_cli
from tests._retained import retained_state
from tests._statsbomb import DATE, EVENTS, FIXTURES, LINEUPS, final_state, import_sample


def _events() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(EVENTS.read_text(encoding="utf-8"))
    return data


def _write(tmp_path: Path, events: Any, name: str = "15986_events.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(events), encoding="utf-8")
    return path


def test_the_excerpt_keeps_its_attribution_note() -> None:
    assert "StatsBomb" in (FIXTURES / "README.md").read_text(encoding="utf-8")


def test_the_sample_replays_to_its_real_score_scorers_and_labels() -> None:
    """Barcelona 2-2 Girona: Messi 19', Stuani 45' and 51', Piqué 63'."""
    state = final_state(import_sample())
    assert state.scoreline == "BAR 2-2 GIR"
    assert [(g.clock.label, g.team, g.scorer) for g in state.goals] == [
        ("19'", "BAR", "Lionel Messi"),
        ("45'", "GIR", "Cristhian Stuani"),
        ("51'", "GIR", "Cristhian Stuani"),
        ("63'", "BAR", "Gerard Piqué"),
    ]
    assert state.goals[-1].method == "header"


def test_cards_and_substitutions_come_through() -> None:
    match = import_sample()
    state = final_state(match)
    assert ("33'", "Clément Lenglet", "red") in [
        (c.clock.label, c.player, c.card) for c in state.cards
    ]
    assert sum(c.card == "yellow" for c in state.cards) == 8
    subs = [i for i in match.timeline if i.type == "substitution"]
    assert len(subs) == 6
    assert (subs[2].clock.label, subs[2].player_off, subs[2].player_on) == (
        "58'",
        "Arthur",
        "Philippe Coutinho",
    )


def test_half_ends_give_the_added_time() -> None:
    """The first half ended at 48:01 (into 45+4'), the second at 93:08 (into 90+4')."""
    match = import_sample()
    assert [(p.period, p.added_minutes) for p in match.periods] == [
        (Period.FIRST_HALF, 4),
        (Period.SECOND_HALF, 4),
    ]


@pytest.mark.parametrize(
    ("period", "minute", "label"),
    [
        (1, 0, (1, 0)),
        (1, 44, (45, 0)),
        (1, 47, (45, 3)),  # 47:xx is the 48th minute, 45+3'
        (2, 45, (46, 0)),
        (2, 93, (90, 4)),
        (3, 90, (91, 0)),
        (4, 119, (120, 0)),
        (4, 121, (120, 2)),
        (2, 30, None),
    ],
)
def test_continuous_minutes_become_football_labels(
    period: int, minute: int, label: tuple[int, int] | None
) -> None:
    """The importer reads StatsBomb's minute with the clock vocabulary of events."""
    assert minute_of_play(Period(period), minute) == label


def test_names_come_from_the_lineups_when_given() -> None:
    scorers = {g.scorer for g in final_state(import_statsbomb([EVENTS], date=DATE)).goals}
    assert "Lionel Andrés Messi Cuccittini" in scorers


def test_the_match_file_names_statsbomb_and_round_trips(tmp_path: Path) -> None:
    out = tmp_path / "m.yaml"
    result = run_cli(
        "import", "statsbomb", str(EVENTS), str(LINEUPS), "--date", "2018-09-23", "-o", str(out)
    )
    assert result.code == 0, result.stderr
    text = out.read_text(encoding="utf-8")
    assert "StatsBomb" in text.splitlines()[0]
    assert load_match(out).sources["statsbomb"].startswith(ATTRIBUTION)
    assert load_match(out) == import_sample()


def test_an_own_goal_pair_counts_for_the_team_it_benefits(tmp_path: Path) -> None:
    """Not in this match, so added here: Pere Pons puts one past his own keeper at 70:05."""
    events = _events()
    girona = next(e for e in events if e["team"]["name"] == "Girona")["team"]
    barca = next(e for e in events if e["team"]["name"] == "Barcelona")["team"]
    at = {"period": 2, "minute": 70, "second": 5, "timestamp": "00:25:05.000"}
    events[-3:-3] = [
        {"index": 3090, "type": {"id": 20, "name": "Own Goal Against"}, "team": girona}
        | {"player": {"id": 6565, "name": "Pere Pons Riera"}}
        | at,
        {"index": 3091, "type": {"id": 25, "name": "Own Goal For"}, "team": barca} | at,
    ]
    state = final_state(import_statsbomb([_write(tmp_path, events), LINEUPS], date=DATE))
    assert state.scoreline == "BAR 3-2 GIR"
    own = next(g for g in state.goals if g.method == "own_goal")
    assert (own.clock.label, own.team, own.scorer) == ("71'", "BAR", "Pere Pons")  # lineups' name


def test_a_shootout_in_period_5_becomes_kicks(tmp_path: Path) -> None:
    """Shots of period 5 are kicks, not goals (a made-up shoot-out on the real events)."""
    events = [e for e in _events() if e["type"]["name"] != "Half End" or e["period"] < 2]
    teams = {e["team"]["name"]: e["team"] for e in events}
    shooters = {"Barcelona": {"id": 5503, "name": "Messi"}, "Girona": {"id": 6351, "name": "X"}}

    def marker(kind: str, period: int, minute: int, team: str) -> dict[str, Any]:
        return {"index": 5000 + len(events), "type": {"name": kind}, "team": teams[team]} | {
            "period": period,
            "minute": minute,
            "second": 0,
        }

    for name in ("Barcelona", "Girona"):
        events.append(marker("Half End", 2, 94, name))
    for period, start in ((3, 90), (4, 105)):
        for name in ("Barcelona", "Girona"):
            events.append(marker("Half Start", period, start, name))
        for name in ("Barcelona", "Girona"):
            events.append(marker("Half End", period, start + 15, name))
    for name in ("Barcelona", "Girona"):
        events.append(marker("Half Start", 5, 120, name))
    for i in range(10):
        team = ("Barcelona", "Girona")[i % 2]
        scored = team == "Barcelona" or i > 6
        shot = marker("Shot", 5, 120, team) | {"player": shooters[team]}
        shot["shot"] = {"outcome": {"name": "Goal" if scored else "Saved"}}
        events.append(shot)
        if i == 5:
            break  # 3-0 with two kicks left each: decided
    match = import_statsbomb([_write(tmp_path, events)], date=DATE)
    assert match.result.shootout == {"BAR": 3, "GIR": 0}
    final = final_state(match)
    assert final.winner == "BAR"
    # A shoot-out kick is no match shot: the stats are those of the 120 minutes.
    assert (final.stats["BAR"].shots, final.stats["GIR"].shots) == (20, 7)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("minute", "events[5].minute: Input should be a valid integer"),
        ("card", "unknown card 'Pink Card'"),
        ("no-half-end", "no Half End event for period 2"),
        ("three-teams", "expected events of two teams, found 3"),
    ],
)
def test_malformed_events_are_refused_naming_the_record(
    tmp_path: Path, change: str, expected: str
) -> None:
    events = _events()
    if change == "minute":
        events[5]["minute"] = "4"
    elif change == "card":
        card = next(e for e in events if "foul_committed" in e)
        card["foul_committed"]["card"]["name"] = "Pink Card"
    elif change == "no-half-end":
        events = [e for e in events if not (e["type"]["name"] == "Half End" and e["period"] == 2)]
    else:
        events[6]["team"] = {"id": 1, "name": "Real Madrid"}
    path = _write(tmp_path, events)
    with pytest.raises(MatchFileError) as info:
        import_statsbomb([path], date=DATE)
    assert info.value.path == path
    assert any(expected in p for p in info.value.problems), info.value.problems


def test_a_missing_date_is_asked_for() -> None:
    with pytest.raises(MatchFileError, match="--date"):
        import_statsbomb([EVENTS, LINEUPS])


@pytest.mark.parametrize(
    ("paths", "expected"),
    [
        ([LINEUPS], "no StatsBomb events file"),
        ([EVENTS, EVENTS], "a second events file"),
    ],
)
def test_the_wrong_files_are_refused(paths: list[Path], expected: str) -> None:
    with pytest.raises(MatchFileError, match=expected):
        import_statsbomb(paths, date=DATE)


def test_a_file_that_is_not_statsbomb_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, {"name": "World Cup 2022", "matches": []}, "worldcup.json")
    result = run_cli("import", "statsbomb", str(path), "--date", "2018-09-23")
    assert result.code == 2
    assert "not a StatsBomb events, lineups or matches file" in result.stderr
    assert result.stderr.count("\n") == 1


def test_a_matches_file_gives_date_home_team_and_checks_the_score(tmp_path: Path) -> None:
    """The fields StatsBomb's matches files carry (values here made up for the test)."""
    record = {
        "match_id": 15986,
        "match_date": "2018-09-23",
        "kick_off": "16:30:00.000",
        "home_team": {"home_team_name": "Girona"},
        "away_team": {"away_team_name": "Barcelona"},
        "home_score": 2,
        "away_score": 2,
        "competition": {"competition_name": "La Liga"},
        "season": {"season_name": "2018/2019"},
    }
    matches = _write(tmp_path, [record], "matches.json")
    match = import_statsbomb([EVENTS, LINEUPS, matches])
    assert (match.home.name, match.kickoff.date, match.competition.name) == (
        "Girona",
        DATE,
        "La Liga 2018/2019",
    )
    wrong = _write(tmp_path, [record | {"home_score": 3}], "matches.json")
    with pytest.raises(MatchFileError, match="matches file records 3-2"):
        import_statsbomb([EVENTS, LINEUPS, wrong])


@pytest.mark.parametrize("broker_url", ["amqtt"], indirect=True)
async def test_the_sample_replays_through_a_broker(broker_url: BrokerURL, topics: Topics) -> None:
    """Through the same path as the semi-final; the retained final state is the real result."""
    match = import_sample()
    (report,) = await run_replay([match], broker_url, ReplayOptions(speed=None, topics=topics))
    retained = await retained_state(broker_url, topics, match.match_id)
    assert retained == report.final_state
    assert retained.status == "finished"
    assert retained.scoreline == "BAR 2-2 GIR"
    assert [g.clock.label for g in retained.goals] == ["19'", "45'", "51'", "63'"]


def test_a_matches_file_for_other_teams_is_refused(tmp_path: Path) -> None:
    record = {
        "match_id": 15986,
        "match_date": "2018-09-23",
        "home_team": {"home_team_name": "Barcelona"},
        "away_team": {"away_team_name": "Sevilla"},
        "home_score": 2,
        "away_score": 2,
    }
    matches = _write(tmp_path, [record], "matches.json")
    with pytest.raises(MatchFileError, match="'Barcelona' v 'Sevilla'"):
        import_statsbomb([EVENTS, LINEUPS, matches])


def test_options_of_the_other_format_are_refused() -> None:
    result = run_cli("import", "statsbomb", str(EVENTS), "--match", "final")
    assert result.code == 2
    assert "--match: not an option of statsbomb imports" in result.stderr


def _raw_counts(events: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """The stats counted straight from StatsBomb's raw events, as its documentation defines
    them: shots are ``Shot`` events (not the shoot-out's), on target those that went in or
    were saved, corners passes of type Corner, offsides ``Offside`` events and passes with
    outcome Pass Offside, fouls ``Foul Committed``, saves the keepers' ``Shot Saved``."""
    counts: dict[str, dict[str, int]] = {}
    for e in events:
        line = counts.setdefault(
            e["team"]["name"],
            dict.fromkeys(("shots", "on_target", "corners", "fouls", "offsides", "saves"), 0),
        )
        kind, block = e["type"]["name"], e.get("pass", {})
        if kind == "Shot" and e["period"] < 5:
            line["shots"] += 1
            line["on_target"] += e["shot"]["outcome"]["name"] in ("Goal", "Saved", "Saved To Post")
        line["corners"] += kind == "Pass" and block.get("type", {}).get("name") == "Corner"
        offside_pass = kind == "Pass" and block.get("outcome", {}).get("name") == "Pass Offside"
        line["offsides"] += kind == "Offside" or offside_pass
        line["fouls"] += kind == "Foul Committed"
        if kind == "Goal Keeper":
            line["saves"] += e["goalkeeper"]["type"]["name"].startswith("Shot Saved")
    return counts


def test_the_imported_stats_are_the_counts_of_the_raw_events() -> None:
    """The full feed from a real match: every stat as StatsBomb's own events count it."""
    state = final_state(import_sample())
    raw = _raw_counts(_events())
    codes = {"Barcelona": "BAR", "Girona": "GIR"}
    for name, line in raw.items():
        stats = state.stats[codes[name]]
        assert stats.model_dump(exclude={"xg"}) == line, name
    xg = {codes[e["team"]["name"]]: 0.0 for e in _events()}
    for e in _events():
        if e["type"]["name"] == "Shot" and e["period"] < 5:
            xg[codes[e["team"]["name"]]] += e["shot"]["statsbomb_xg"]
    assert {c: s.xg for c, s in state.stats.items()} == pytest.approx(xg, abs=0.005)
    assert raw["Barcelona"]["shots"] == 20 and raw["Girona"]["fouls"] == 16  # the real match


def test_every_goal_of_the_import_follows_its_shot() -> None:
    events = [s.event for s in expand(import_sample())]
    for i, e in enumerate(events):
        if e.type == "goal":
            shot = events[i - 1]
            assert shot.type == "shot" and shot.outcome == "goal"  # type: ignore[union-attr]
            assert e.shot_id == shot.shot_id  # type: ignore[union-attr]
    saves = [e for e in events if e.type == "save"]
    assert saves and all(s.keeper in ("Marc-André ter Stegen", "Yassine Bounou") for s in saves)  # type: ignore[union-attr]


def test_a_foul_that_gives_away_a_penalty_awards_it(tmp_path: Path) -> None:
    """Not in this match, so marked here: Girona's first foul is in the box."""
    events = _events()
    foul = next(
        e for e in events if e["type"]["name"] == "Foul Committed" and "foul_committed" not in e
    )
    foul["foul_committed"] = {"penalty": True}
    match = import_statsbomb([_write(tmp_path, events), LINEUPS], date=DATE)
    awarded = [i for i in match.timeline if i.type == "penalty_awarded"]
    assert [(a.team, a.foul) for a in awarded] == [  # type: ignore[union-attr]
        ("BAR" if foul["team"]["name"] == "Girona" else "GIR", f"sb-foul-{foul['index']}")
    ]


def test_a_shot_with_an_unknown_outcome_is_named(tmp_path: Path) -> None:
    events = _events()
    shot = next(e for e in events if e["type"]["name"] == "Shot")
    shot["shot"]["outcome"]["name"] = "Into Orbit"
    with pytest.raises(MatchFileError, match="unknown 'Into Orbit'"):
        import_statsbomb([_write(tmp_path, events), LINEUPS], date=DATE)
