"""Import a match from StatsBomb Open Data: events, and optionally lineups and matches files.

StatsBomb data is published under the StatsBomb Public Data User Agreement: whatever is
published from it must name StatsBomb as the source. Imported match files say so in
``sources``; keep that line.

What is read from the events (``{match_id}.json``, a list of events):

- goals: shots whose outcome is ``Goal`` (``Penalty``, ``Free Kick`` and headers become the goal
  method), and own goals, an ``Own Goal Against`` event (the player who put it in his own net)
  with its ``Own Goal For`` twin (the team credited);
- cards: ``Foul Committed`` and ``Bad Behaviour`` events with a card;
- substitutions, and the ``Half Start`` / ``Half End`` of each period, whose end gives the added
  time; shots in period 5 are the shoot-out, not match shots;
- the full feed: every ``Shot`` (with ``statsbomb_xg``, the body part, and whether its
  ``location`` is inside the penalty area), a goal's shot on its goal; the keeper of a saved
  shot from its related ``Goal Keeper`` event (``Shot Saved``...), which becomes a ``save``;
  corners, passes of type ``Corner``; fouls, every ``Foul Committed`` (a card names its foul;
  one with ``penalty`` awards the other team a penalty); offsides, ``Offside`` events and
  passes with outcome ``Pass Offside``.

StatsBomb counts minutes continuously (``minute`` 47, ``second`` 30 in the first half is 47:30
of play); football labels the minute being played and counts past the period's end as added
time, so that moment is in the 48th minute, ``45+3'``. The second half starts at minute 45,
extra time at 90 and 105.

Lineups (``lineups/{match_id}.json``) give the players' common names (``Philippe Coutinho``
rather than ``Philippe Coutinho Correia``). A matches file (``matches/{competition}/{season}.json``)
gives the date, kickoff time, home team, stadium and competition; without one the date must be
passed, and the first team in the events is taken as the home team.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import TypeAdapter
from pydantic import ValidationError as _ValidationError

from events import MatchFileError, Period, minute_of_play
from simulator._matchfile import Match, parse_match
from simulator._teams import club_code
from simulator.importers._common import fail, read_json, slug, validation_problems
from simulator.importers._statsbomb_schema import (
    EVENTS,
    LINEUPS,
    MATCHES,
    Event,
    MatchRecord,
    Named,
    file_kind,
)

__all__ = ["ATTRIBUTION", "import_statsbomb"]

#: The attribution StatsBomb's user agreement asks for; imported files carry it.
ATTRIBUTION = "Data: StatsBomb Open Data (github.com/statsbomb/open-data), provided by StatsBomb"

#: A shot's outcome as StatsBomb names it, and as the wire does: on target is a goal or a save
#: (``Saved To Post`` included); ``Saved Off Target`` was going wide.
_SHOT_OUTCOMES = {
    "Goal": "goal",
    "Saved": "saved",
    "Saved To Post": "saved",
    "Saved Off Target": "off_target",
    "Off T": "off_target",
    "Wayward": "off_target",
    "Post": "woodwork",
    "Blocked": "blocked",
}
_BODY_PARTS = {"Right Foot": "right_foot", "Left Foot": "left_foot", "Head": "head"}
#: StatsBomb's pitch is 120 by 80; the penalty area is the last 18 of the length and the
#: middle 44 of the width.
_BOX_X, _BOX_Y = 102.0, (18.0, 62.0)
_CARDS: dict[str, Literal["yellow", "second_yellow", "red"]] = {
    "Yellow Card": "yellow",
    "Second Yellow": "second_yellow",
    "Red Card": "red",
}


def import_statsbomb(
    paths: Sequence[Path | str], *, date: dt.date | None = None, home: str | None = None
) -> Match:
    """One match from StatsBomb files: an events file, plus lineups and matches files if given.

    Args:
        paths: the files, in any order; which is which is told from their content.
        date: the match date, when no matches file gives it.
        home: the home team's name as StatsBomb spells it, when no matches file gives it.

    Raises:
        MatchFileError: a file is not StatsBomb data, a record is malformed or inconsistent
            (the problem names the file and the record), or the date is unknown.
    """
    files: dict[str, tuple[Path, Any]] = {}
    for p in map(Path, paths):
        data = read_json(p)
        kind = file_kind(data)
        if kind is None:
            raise MatchFileError(
                p,
                [
                    "not a StatsBomb events, lineups or matches file: expected a JSON list of "
                    "events (with type, period, minute), of lineups (team_name, lineup) or of "
                    "matches (match_id, home_team, away_team)"
                ],
            )
        if kind in files:
            raise MatchFileError(p, [f"a second {kind} file (the first is {files[kind][0]})"])
        files[kind] = (p, data)
    if "events" not in files:
        where = ", ".join(str(p) for p in paths) or "(no files)"
        raise MatchFileError(where, ["no StatsBomb events file among the files given"])
    return _Importer(files, date, home).match()


def _outcome(e: Event) -> str:
    return e.pass_.outcome.name if e.pass_ is not None and e.pass_.outcome is not None else ""


def _pass_type(e: Event) -> str:
    return e.pass_.type.name if e.pass_ is not None and e.pass_.type is not None else ""


def _validated(adapter: TypeAdapter[Any], path: Path, data: Any, root: str) -> Any:
    try:
        return adapter.validate_python(data)
    except _ValidationError as err:
        raise fail(path, validation_problems(err, root)) from None


class _Importer:
    def __init__(
        self, files: dict[str, tuple[Path, Any]], date: dt.date | None, home: str | None
    ) -> None:
        self.path, raw = files["events"]
        self.events: list[Event] = _validated(EVENTS, self.path, raw, "events")
        self.by_id = {e.id: e for e in self.events if e.id is not None}
        self.codes: dict[str, str] = {}
        self.names: dict[int, str] = {}
        if "lineups" in files:
            lp, ldata = files["lineups"]
            for team in _validated(LINEUPS, lp, ldata, "lineups"):
                for player in team.lineup:
                    self.names[player.player_id] = player.player_nickname or player.player_name
        self.stem = self.path.stem.split("_")[0]
        self.record: MatchRecord | None = None
        if "matches" in files:
            self.record = self._find_record(*files["matches"])
        self.date = date
        self.home_name = home
        self.problems: list[str] = []

    def _find_record(self, path: Path, data: Any) -> MatchRecord:
        records: list[MatchRecord] = _validated(MATCHES, path, data, "matches")
        wanted = [r for r in records if str(r.match_id) == self.stem]
        if len(wanted) == 1:
            return wanted[0]
        if len(records) == 1:
            return records[0]
        raise MatchFileError(
            path, [f"no record with match_id {self.stem} (the events file's name) among these"]
        )

    def where(self, i: int) -> str:
        e = self.events[i]
        return f"events[{i}] (index {e.index}, {e.type.name})"

    def player(self, named: Named | None, i: int, field: str = "player") -> str:
        if named is None:
            self.problems.append(f"{self.where(i)}.{field}: missing")
            return "?"
        return self.names.get(named.id, named.name) if named.id is not None else named.name

    def teams(self) -> tuple[str, str]:
        order: list[str] = []
        for e in sorted(self.events, key=lambda e: e.type.name != "Starting XI"):
            if e.team.name not in order:
                order.append(e.team.name)
        if len(order) != 2:
            raise MatchFileError(
                self.path, [f"expected events of two teams, found {len(order)}: {order}"]
            )
        home = self.home_name
        if self.record is not None:
            home = str(self.record.home_team.get("home_team_name", ""))
        if home is not None and home not in order:
            raise MatchFileError(
                self.path, [f"home team {home!r} is not one of the teams in the events: {order}"]
            )
        if home == order[1]:
            order.reverse()
        return order[0], order[1]

    def match(self) -> Match:
        names = self.teams()
        home_code = club_code(names[0])
        codes = {names[0]: home_code, names[1]: club_code(names[1], taken=home_code)}
        self.codes = codes
        timeline, ends, shootout = self.incidents(codes)
        periods = self.periods(ends, timeline)
        kickoff = self.kickoff()
        if self.problems:
            raise fail(self.path, self.problems)
        score = dict.fromkeys(codes.values(), 0)
        for inc in timeline:
            if inc["type"] == "goal":
                score[inc["team"]] += 1
        result: dict[str, Any] = {"score": score, "source": "data"}
        if shootout:
            result["shootout"] = {
                c: sum(k["scored"] for k in shootout if k["team"] == c) for c in codes.values()
            }
        self.check_record(score, codes)
        assumed_home = self.record is None and self.home_name is None
        team_note = "home: the first team in the events (StatsBomb lists the home team first)"
        data: dict[str, Any] = {
            "match_id": f"statsbomb-{slug(self.stem) or 'match'}",
            "title": f"{names[0]} v {names[1]}",
            "competition": self.competition(),
            "kickoff": kickoff,
            "home": {
                "code": codes[names[0]],
                "name": names[0],
                "source": "assumption" if assumed_home else "data",
                "note": team_note if assumed_home else None,
            },
            "away": {"code": codes[names[1]], "name": names[1], "source": "data"},
            "periods": periods,
            "timeline": timeline,
            "shootout": shootout,
            "result": result,
            "sources": {"statsbomb": f"{ATTRIBUTION}; match {self.stem}, {self.path.name}"},
        }
        if self.record is not None and self.record.stadium:
            data["venue"] = {"name": str(self.record.stadium.get("name")), "source": "data"}
        try:
            return parse_match(data, path=self.path)
        except MatchFileError as err:
            raise fail(self.path, err.problems) from None

    def incidents(
        self, codes: dict[str, str]
    ) -> tuple[list[dict[str, Any]], dict[int, tuple[int, int]], list[dict[str, Any]]]:
        timeline: list[dict[str, Any]] = []
        shootout: list[dict[str, Any]] = []
        ends: dict[int, tuple[int, int]] = {}
        own_goals_for: list[int] = []
        for i, e in enumerate(self.events):
            kind = e.type.name
            if kind == "Half End":
                ends[e.period] = max(ends.get(e.period, (0, 0)), (e.minute, e.second))
                continue
            if kind == "Own Goal For":
                own_goals_for.append(i)
                continue
            if e.period == 5:
                if kind == "Shot" and e.shot is not None:
                    shootout.append(
                        {
                            "team": codes[e.team.name],
                            "taker": self.player(e.player, i),
                            "scored": e.shot.outcome.name == "Goal",
                            "source": "data",
                        }
                    )
                continue
            found = self.incident(i, e, codes)
            if not found:
                continue
            label = minute_of_play(Period(e.period), e.minute)
            if label is None:
                start = Period(e.period).first_minute - 1
                self.problems.append(
                    f"{self.where(i)}.minute: {e.minute} is before period {e.period} starts "
                    f"(minute {start})"
                )
                continue
            minute, added = label
            clock = {"minute": minute, "added": added, "second": e.second, "period": e.period}
            timeline += [{**incident, **clock, "source": "data"} for incident in found]
        self.pair_own_goals(own_goals_for, timeline)
        return timeline, ends, shootout

    def incident(self, i: int, e: Event, codes: dict[str, str]) -> list[dict[str, Any]]:
        """The incidents one event makes: none, one, or a foul with its card and penalty."""
        kind = e.type.name
        team = codes[e.team.name]
        if kind == "Shot" and e.shot is not None:
            return [self.shot(i, e, team)]
        if kind == "Foul Committed":
            return self.foul(i, e, team, codes)
        if kind == "Offside" or (kind == "Pass" and _outcome(e) == "Pass Offside"):
            return [{"type": "offside", "team": team, "player": self.player(e.player, i)}]
        if kind == "Pass" and _pass_type(e) == "Corner":
            return [{"type": "corner", "team": team, "player": self.player(e.player, i)}]
        one = self.other_incident(i, e, codes)
        return [one] if one is not None else []

    def shot(self, i: int, e: Event, team: str) -> dict[str, Any]:
        """A shot; with outcome Goal, the goal with its shot."""
        assert e.shot is not None
        outcome = _SHOT_OUTCOMES.get(e.shot.outcome.name)
        if outcome is None:
            self.problems.append(
                f"{self.where(i)}.shot.outcome: unknown {e.shot.outcome.name!r}; expected one "
                f"of {sorted(_SHOT_OUTCOMES)}"
            )
            outcome = "off_target"
        if e.shot.statsbomb_xg is None:
            self.problems.append(f"{self.where(i)}.shot.statsbomb_xg: missing")
        body = e.shot.body_part.name if e.shot.body_part else ""
        loc = e.location or []
        facts = {
            "xg": round(e.shot.statsbomb_xg or 0.0, 4),
            "body_part": _BODY_PARTS.get(body, "other") if body else None,
            "inside_box": len(loc) >= 2 and loc[0] >= _BOX_X and _BOX_Y[0] <= loc[1] <= _BOX_Y[1],
        }
        player = self.player(e.player, i)
        if outcome == "goal":
            shot_type = e.shot.type.name if e.shot.type else ""
            method = {"Penalty": "penalty", "Free Kick": "free_kick"}.get(shot_type)
            if method is None:
                method = "header" if body == "Head" else "open_play"
            return {"type": "goal", "team": team, "scorer": player, "method": method} | {
                "id": f"sb-{e.index}",
                "shot": {"id": f"sb-shot-{e.index}", **facts},
            }
        incident = {"type": "shot", "id": f"sb-shot-{e.index}", "team": team, "player": player}
        keeper = self.keeper(e) if outcome == "saved" else None
        return incident | {"outcome": outcome, **facts} | ({"keeper": keeper} if keeper else {})

    def keeper(self, shot: Event) -> str | None:
        """The keeper who saved ``shot``: its related ``Goal Keeper`` event's player."""
        for related in shot.related_events:
            e = self.by_id.get(related)
            kind = e.goalkeeper.type.name if e and e.goalkeeper and e.goalkeeper.type else ""
            if e is not None and kind.startswith("Shot Saved") and e.player is not None:
                return self.player(e.player, self.events.index(e))
        return None

    def foul(self, i: int, e: Event, team: str, codes: dict[str, str]) -> list[dict[str, Any]]:
        """A foul, the card it earned, and the penalty it gave away."""
        foul_id = f"sb-foul-{e.index}"
        player = self.player(e.player, i) if e.player is not None else None
        out: list[dict[str, Any]] = [{"type": "foul", "id": foul_id, "team": team}]
        if player is not None:
            out[0]["player"] = player
        card = self.card(i, e)
        if card is not None:
            out.append(card | {"foul": foul_id})
        if e.foul_committed is not None and e.foul_committed.penalty:
            other = next(c for c in codes.values() if c != team)
            out.append({"type": "penalty_awarded", "team": other, "foul": foul_id})
        return out

    def card(self, i: int, e: Event) -> dict[str, Any] | None:
        block = e.foul_committed if e.type.name == "Foul Committed" else e.bad_behaviour
        if block is None or block.card is None:
            return None
        card = _CARDS.get(block.card.name)
        if card is None:
            self.problems.append(
                f"{self.where(i)}.card: unknown card {block.card.name!r}; "
                f"expected one of {sorted(_CARDS)}"
            )
            return None
        team = e.team.name
        return {"type": "card", "team": self.codes[team], "player": self.player(e.player, i)} | {
            "card": card
        }

    def other_incident(self, i: int, e: Event, codes: dict[str, str]) -> dict[str, Any] | None:
        kind = e.type.name
        team = codes[e.team.name]
        if kind == "Own Goal Against":
            other = next(c for c in codes.values() if c != team)
            scorer = self.player(e.player, i)
            return {"type": "goal", "team": other, "scorer": scorer, "method": "own_goal"} | {
                "id": f"sb-{e.index}",
                "note": f"own goal by {scorer} ({team})",
            }
        if kind == "Bad Behaviour":
            return self.card(i, e)
        if kind == "Substitution":
            if e.substitution is None:
                self.problems.append(f"{self.where(i)}.substitution: missing")
                return None
            on = self.player(e.substitution.replacement, i, "substitution.replacement")
            return {
                "type": "substitution",
                "team": team,
                "player_off": self.player(e.player, i),
            } | {"player_on": on}
        return None

    def pair_own_goals(self, own_goals_for: list[int], timeline: list[dict[str, Any]]) -> None:
        """Every ``Own Goal For`` must have its ``Own Goal Against`` at the same moment."""
        against = [
            (inc["period"], inc["minute"], inc["added"], inc["second"])
            for inc in timeline
            if inc.get("method") == "own_goal"
        ]
        for i in own_goals_for:
            e = self.events[i]
            label = minute_of_play(Period(e.period), e.minute) or (0, 0)
            key = (e.period, *label, e.second)
            if key in against:
                against.remove(key)
            else:
                self.problems.append(
                    f"{self.where(i)}: an own goal for {e.team.name} with no 'Own Goal Against' "
                    "event at the same moment"
                )

    def periods(
        self, ends: dict[int, tuple[int, int]], timeline: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        played = sorted({e.period for e in self.events if e.type.name == "Half Start"})
        if played not in ([1, 2], [1, 2, 3, 4], [1, 2, 3, 4, 5]):
            self.problems.append(
                f"events: periods started (Half Start) are {played}; expected 1-2, 1-4 or 1-5"
            )
            return []
        out = []
        for period in played:
            if period == 5:
                out.append({"period": 5, "added_minutes": 0, "source": "data"})
                continue
            if period not in ends:
                self.problems.append(f"events: no Half End event for period {period}")
                continue
            minute, second = ends[period]
            last = Period(period).last_minute
            played_to = minute + (1 if second else 0)
            added = max(0, played_to - last)
            latest = max((i["added"] for i in timeline if i["period"] == period), default=0)
            out.append(
                {
                    "period": period,
                    "added_minutes": max(added, latest),
                    "source": "data",
                    "note": f"Half End at {minute}:{second:02d} of StatsBomb's minute count",
                }
            )
        return out

    def kickoff(self) -> dict[str, Any]:
        if self.record is not None:
            out: dict[str, Any] = {"date": self.record.match_date, "source": "data"}
            if self.record.kick_off is not None:
                out["time"] = self.record.kick_off.replace(microsecond=0)
                out["note"] = "StatsBomb gives local time without a UTC offset"
            return out
        if self.date is None:
            self.problems.append(
                "kickoff date: StatsBomb events carry no date; pass the date (--date YYYY-MM-DD) "
                "or the competition's matches file (matches/<competition>/<season>.json)"
            )
            return {}
        return {"date": self.date, "source": "data", "note": "date given at import"}

    def competition(self) -> dict[str, Any]:
        r = self.record
        if r is None or not r.competition:
            return {
                "name": "Unknown competition",
                "knockout": False,
                "source": "assumption",
                "note": "the events do not name the competition; a matches file would",
            }
        name = str(r.competition.get("competition_name", "Unknown competition"))
        if r.season and r.season.get("season_name"):
            name += f" {r.season['season_name']}"
        stage = r.competition_stage.get("name") if r.competition_stage else None
        knockout = bool(stage) and str(stage) != "Regular Season" and "Group" not in str(stage)
        return {
            "name": name,
            "stage": stage,
            "knockout": knockout,
            "source": "data",
            "note": "knockout inferred from the competition stage",
        }

    def check_record(self, score: dict[str, int], codes: dict[str, str]) -> None:
        r = self.record
        if r is None or r.home_score is None or r.away_score is None:
            return
        home_name = str(r.home_team.get("home_team_name"))
        away_name = str(r.away_team.get("away_team_name"))
        if {home_name, away_name} != set(codes):
            raise MatchFileError(
                self.path,
                [
                    f"the matches file names {home_name!r} v {away_name!r}, the events "
                    f"{' v '.join(codes)}"
                ],
            )
        counted = (score[codes[home_name]], score[codes[away_name]])
        if counted != (r.home_score, r.away_score):
            raise MatchFileError(
                self.path,
                [
                    f"the events have {counted[0]}-{counted[1]} in goals but the matches file "
                    f"records {r.home_score}-{r.away_score}"
                ],
            )
