"""Import openfootball ``worldcup.json`` results into match files.

The openfootball format (github.com/openfootball/worldcup.json, public domain) lists each match
with its teams by name, date and local time, ground, the score (``ft`` after 90 minutes, ``ht``,
``et`` after extra time, ``p`` the shoot-out) and the goals per team (``goals1`` for team 1,
own goals included), each with ``minute``, ``offset`` for added time (90+4 is minute 90,
offset 4), and ``penalty`` / ``owngoal`` flags. Goal lists are not in time order.

What it does not record is filled in and marked ``source: assumption``: the added time of each
period (at least the latest added minute with a goal), and the kicks of a shoot-out (made up to
end at the recorded score, team 1 kicking first).

openfootball records no shots, saves, corners, fouls, offsides or expected goals: its matches
are results, and replay as the lean feed.

Every goal list is checked against the recorded score, so a file that is not what it claims
to be is refused with the record named (``matches[12].goals1[0].minute: ...``) rather than
turned into a silently wrong match.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictInt
from pydantic import ValidationError as _ValidationError

from events import ADDED_TIME_AFTER, MatchClock, MatchFileError, Period, quote
from simulator._matchfile import Match, parse_match
from simulator._shootout import synthesise
from simulator._teams import code_for_name
from simulator.importers._common import fail, read_json, slug, validation_problems

__all__ = ["KNOWN_UTC_OFFSETS", "import_openfootball"]

#: Competitions played in one time zone without daylight saving: name -> UTC offset of
#: the local kickoff times openfootball gives.
KNOWN_UTC_OFFSETS = {"World Cup 2022": ("+03:00", "Qatar, UTC+3 all year")}
#: ``45, 90, 105 or 120``: where added time may follow, for problems that say so.
_AFTER = f"{', '.join(map(str, ADDED_TIME_AFTER[:-1]))} or {ADDED_TIME_AFTER[-1]}"
#: Added minutes assumed where no goal says more: the 2022 World Cup averaged about 4 in the
#: first half and 8 in the second (FIFA's drive to add the time actually lost).
_ASSUMED_ADDED = {Period.FIRST_HALF: 4, Period.SECOND_HALF: 8}
_ASSUMED_ADDED_ET = {Period.EXTRA_TIME_FIRST: 1, Period.EXTRA_TIME_SECOND: 2}
_TIME = re.compile(r"^(\d{1,2}):(\d{2})(?:\s*UTC\s*([+-])(\d{1,2})(?::?(\d{2}))?)?$")

_Count = Annotated[StrictInt, Field(ge=0)]
_Pair = tuple[_Count, _Count]


class _Raw(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class _Goal(_Raw):
    name: str = Field(min_length=1)
    minute: StrictInt = Field(ge=1, le=120)
    offset: StrictInt | None = Field(default=None, ge=0, le=30)
    penalty: StrictBool = False
    owngoal: StrictBool = False


class _Score(_Raw):
    ft: _Pair
    ht: _Pair | None = None
    et: _Pair | None = None
    p: _Pair | None = None


class _Team(_Raw):
    name: str = Field(min_length=1)
    code: str | None = Field(default=None, pattern=r"^[A-Z0-9]{2,5}$")


def _team(value: Any) -> Any:
    return {"name": value} if isinstance(value, str) else value


class _Record(_Raw):
    round: str = Field(min_length=1)
    date: dt.date
    time: str | None = Field(default=None, pattern=_TIME.pattern)
    team1: Annotated[_Team, BeforeValidator(_team)]
    team2: Annotated[_Team, BeforeValidator(_team)]
    score: _Score
    goals1: list[_Goal] = []
    goals2: list[_Goal] = []
    group: str | None = None
    ground: str | None = None


class _File(_Raw):
    name: str = Field(min_length=1)
    matches: list[_Record]


def _not_openfootball(data: Any) -> str | None:
    """Why ``data`` is not an openfootball worldcup.json, or None if it looks like one."""
    expected = "expected an openfootball worldcup.json: an object with 'name' and 'matches'"
    if isinstance(data, list):
        first = data[0] if data and isinstance(data[0], dict) else {}
        if "type" in first and "period" in first:
            return f"{expected}, got a list of events (a StatsBomb events file?)"
        return f"{expected}, got a list"
    if not isinstance(data, dict):
        return f"{expected}, got {type(data).__name__}"
    if "rounds" in data and "matches" not in data:
        return (
            f"{expected}; this is the older format with 'rounds' (score1/score2), which this "
            "importer does not read"
        )
    if "matches" not in data:
        return f"{expected}; it has {sorted(data)[:6]}"
    return None


def import_openfootball(path: Path | str, *, utc_offset: str | None = None) -> list[Match]:
    """Every match in an openfootball ``worldcup.json``, in the file's order.

    Args:
        path: the file.
        utc_offset: the UTC offset (``+03:00``) of kickoff times that carry none; needed
            unless the competition is in :data:`KNOWN_UTC_OFFSETS`.

    Raises:
        MatchFileError: the file is not openfootball JSON, or a record is inconsistent; each
            problem names the record (``matches[12].goals1[0].minute: ...``).
    """
    path = Path(path)
    data = read_json(path)
    why = _not_openfootball(data)
    if why is not None:
        raise MatchFileError(path, [why])
    try:
        parsed = _File.model_validate(data)
    except _ValidationError as err:
        raise fail(path, validation_problems(err)) from None
    if utc_offset is not None and not re.fullmatch(r"[+-](0[0-9]|1[0-4]):[0-5][0-9]", utc_offset):
        raise MatchFileError(
            path, [f"utc_offset: expected +HH:MM or -HH:MM, not {quote(utc_offset)}"]
        )
    offset_note = None
    if utc_offset is None and parsed.name in KNOWN_UTC_OFFSETS:
        utc_offset, where = KNOWN_UTC_OFFSETS[parsed.name]
        offset_note = f"openfootball gives local time without a UTC offset; {where}"
    elif utc_offset is not None:
        offset_note = f"openfootball gives local time; the UTC offset {utc_offset} was given"
    prefix = _id_prefix(parsed.name)
    matches: list[Match] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    for i, record in enumerate(parsed.matches):
        converter = _Converter(path, parsed.name, prefix, i, record, (utc_offset, offset_note))
        try:
            match = converter.match()
        except MatchFileError as err:
            problems += err.problems
            continue
        if match.match_id in seen:
            problems.append(
                f"matches[{i}]: the same teams on the same day as matches[{seen[match.match_id]}]"
            )
        seen[match.match_id] = i
        matches.append(match)
    if problems:
        raise fail(path, problems)
    return matches


def _id_prefix(name: str) -> str:
    """``wc2022`` for a name with "World Cup" and a year after it, else the name's slug."""
    return f"wc{year}" if (year := _world_cup_year(name)) else slug(name)[:32].strip("-") or "match"


def _world_cup_year(name: str) -> str | None:
    """The first four digits that follow "World Cup" across no other digit.

    Not one ``world\\s*cup\\D*(\\d{4})`` search: from every "world cup" in a long name
    without the digits, ``\\D*`` ran to the end again (quadratic). The name is split into
    runs of digits and of the rest once; each run is searched once.
    """
    runs = re.split(r"([0-9]+)", name)  # text, digits, text, digits, ..., text
    for i in range(0, len(runs) - 1, 2):
        if len(runs[i + 1]) >= 4 and re.search(r"world\s*cup", runs[i], re.IGNORECASE):
            return runs[i + 1][:4]
    return None


class _Converter:
    """One openfootball record to one match."""

    def __init__(
        self,
        path: Path,
        competition: str,
        prefix: str,
        index: int,
        record: _Record,
        offset: tuple[str | None, str | None],
    ) -> None:
        self.path = path
        self.competition = competition
        self.prefix = prefix
        self.i = index
        self.r = record
        self.utc_offset, self.offset_note = offset
        self.where = f"matches[{index}]"
        self.problems: list[str] = []
        self.notes: list[str] = []

    def code(self, side: int) -> str:
        team = (self.r.team1, self.r.team2)[side]
        code = team.code or code_for_name(team.name)
        if code is None:
            self.problems.append(
                f"{self.where}.team{side + 1}: unknown team {team.name!r}; give it as "
                '{"name": ..., "code": "ABC"} or add it to simulator/_teams.py'
            )
            return f"T{side + 1}"
        return code

    def match(self) -> Match:
        r = self.r
        codes = (self.code(0), self.code(1))
        names = (r.team1.name, r.team2.name)
        label = f"{self.where} ({names[0]} v {names[1]})"
        timeline = self.goals(codes)
        periods = self.periods(timeline)
        kickoff = self.kickoff()
        shootout = self.shootout(codes, names)
        self.check_score(timeline)
        if self.problems:
            raise MatchFileError(self.path, self.problems)
        knockout = r.group is None and not r.round.lower().startswith("matchday")
        stage = f"{r.group}, {r.round}" if r.group else r.round
        data: dict[str, Any] = {
            "match_id": f"{self.prefix}-{r.date:%m%d}-{codes[0]}-{codes[1]}".lower(),
            "title": f"{names[0]} v {names[1]}, {self.competition}, {stage}",
            "competition": {
                "name": self.competition,
                "stage": stage,
                "knockout": knockout,
                "source": "data",
                "note": f"{'knockout' if knockout else 'group'} match: "
                + ("no group given" if knockout else f"in {r.group or r.round}"),
            },
            "kickoff": kickoff,
            "home": {"code": codes[0], "name": names[0], "source": "data"},
            "away": {"code": codes[1], "name": names[1], "source": "data"},
            "periods": periods,
            "timeline": [g for _, g in sorted(timeline, key=lambda p: p[0])],
            "shootout": shootout,
            "result": {
                "score": dict(zip(codes, r.score.et or r.score.ft, strict=True)),
                "source": "data",
                "note": "; ".join(self.notes) or None,
            },
            "sources": {
                "openfootball": f"{self.path.name}, {self.where}: openfootball worldcup.json "
                "(github.com/openfootball/worldcup.json), CC0 1.0 public domain",
            },
        }
        if r.score.p is not None:
            data["result"]["shootout"] = dict(zip(codes, r.score.p, strict=True))
        if r.ground:
            name, _, city = r.ground.rpartition(", ")
            data["venue"] = {"name": name or city, "city": city if name else None, "source": "data"}
        try:
            return parse_match(data, path=self.path)
        except MatchFileError as err:
            raise MatchFileError(self.path, [f"{label}: {p}" for p in err.problems]) from None

    def goals(self, codes: tuple[str, str]) -> list[tuple[tuple[int, int, int, int], Any]]:
        out = []
        for side, goals in enumerate((self.r.goals1, self.r.goals2)):
            for j, g in enumerate(goals):
                where = f"{self.where}.goals{side + 1}[{j}]"
                added = g.offset or 0
                if added and g.minute not in ADDED_TIME_AFTER:
                    self.problems.append(
                        f"{where}.offset: added time only follows minute {_AFTER}, not {g.minute}"
                    )
                    continue
                clock = MatchClock.at(g.minute, added)
                incident: dict[str, Any] = {
                    "type": "goal",
                    "minute": g.minute,
                    "added": added,
                    "team": codes[side],
                    "scorer": g.name,
                    "source": "data",
                }
                if g.owngoal and g.penalty:
                    self.problems.append(f"{where}: both a penalty and an own goal")
                if g.owngoal:
                    incident["method"] = "own_goal"
                    incident["note"] = f"own goal by {g.name}, credited to {codes[side]}"
                elif g.penalty:
                    incident["method"] = "penalty"
                out.append(((*clock.sort_key, side * 100 + j), incident))
        return out

    def periods(self, timeline: list[tuple[tuple[int, int, int, int], Any]]) -> list[Any]:
        latest: dict[Period, int] = {}
        for key, _ in timeline:
            period = Period(key[0])
            latest[period] = max(latest.get(period, 0), key[2])
        assumed = dict(_ASSUMED_ADDED)
        if self.r.score.et is not None or any(p >= Period.EXTRA_TIME_FIRST for p in latest):
            assumed |= _ASSUMED_ADDED_ET
        out: list[Any] = []
        for period, typical in assumed.items():
            added = max(typical, latest.get(period, 0))
            why = (
                f"a goal in {period.short} came in added minute {latest[period]}"
                if latest.get(period, 0) > typical
                else f"typical for the 2022 World Cup ({typical})"
            )
            out.append(
                {
                    "period": int(period),
                    "added_minutes": added,
                    "source": "assumption",
                    "note": f"openfootball does not record added time; {why}",
                }
            )
        if self.r.score.p is not None:
            out.append({"period": 5, "added_minutes": 0, "source": "data"})
        return out

    def kickoff(self) -> dict[str, Any]:
        kickoff: dict[str, Any] = {"date": self.r.date, "source": "data"}
        if self.r.time is None:
            return kickoff
        found = _TIME.match(self.r.time)
        assert found is not None  # the field pattern checked it
        hh, mm, sign, off_h, off_m = found.groups()
        if not (int(hh) < 24 and int(mm) < 60):
            self.problems.append(f"{self.where}.time: no such time {self.r.time!r}")
            return kickoff
        kickoff["time"] = f"{int(hh):02d}:{mm}"
        if sign:
            kickoff["utc_offset"] = f"{sign}{int(off_h):02d}:{off_m or '00'}"
        elif self.utc_offset:
            kickoff["utc_offset"] = self.utc_offset
            kickoff["note"] = self.offset_note
        else:
            self.problems.append(
                f"{self.where}.time: {self.r.time!r} has no UTC offset and the competition's is "
                "not known; give one (--utc-offset +03:00)"
            )
        return kickoff

    def check_score(self, timeline: list[tuple[tuple[int, int, int, int], Any]]) -> None:
        s = self.r.score
        by_side: list[dict[Period, int]] = [{}, {}]
        for key, _ in timeline:
            side, period = key[3] // 100, Period(key[0])
            by_side[side][period] = by_side[side].get(period, 0) + 1

        def upto(side: int, last: Period) -> int:
            return sum(n for p, n in by_side[side].items() if p <= last)

        checks = [("ft", s.ft, Period.SECOND_HALF)]
        if s.et is not None:
            checks.append(("et", s.et, Period.EXTRA_TIME_SECOND))
        for name, recorded, last in checks:
            counted = (upto(0, last), upto(1, last))
            if counted != recorded:
                self.problems.append(
                    f"{self.where}.score.{name}: says {recorded[0]}-{recorded[1]} but "
                    f"goals1/goals2 list {counted[0]}-{counted[1]} up to the end of {last.short}"
                )
        half_time = (upto(0, Period.FIRST_HALF), upto(1, Period.FIRST_HALF))
        if s.ht is not None and half_time != s.ht:
            # The half-time score is not part of a match file (the goals are), and the 2022
            # data gets it wrong three times while its goal minutes agree with reports.
            self.notes.append(
                f"openfootball's score.ht says {s.ht[0]}-{s.ht[1]} but its goal minutes make it "
                f"{half_time[0]}-{half_time[1]} at half time; the goal minutes are used"
            )
        extra = upto(0, Period.EXTRA_TIME_SECOND) + upto(1, Period.EXTRA_TIME_SECOND)
        if s.et is None and extra != upto(0, Period.SECOND_HALF) + upto(1, Period.SECOND_HALF):
            self.problems.append(f"{self.where}.score.et: goals in extra time but no score.et")
        if s.p is not None and s.et is None:
            self.problems.append(
                f"{self.where}.score.p: a shoot-out straight after 90 minutes; the match format "
                "needs extra time (score.et) before it"
            )

    def shootout(self, codes: tuple[str, str], names: tuple[str, str]) -> list[Any]:
        p = self.r.score.p
        if p is None:
            return []
        try:
            kicks = synthesise(codes[0], codes[1], (p[0], p[1]))
        except ValueError as err:
            self.problems.append(f"{self.where}.score.p: {err}")
            return []
        count = {codes[0]: 0, codes[1]: 0}
        out: list[Any] = []
        for team, scored in kicks:
            count[team] += 1
            out.append(
                {
                    "team": team,
                    "taker": f"kick {count[team]}",  # no names in the data: invent no one
                    "scored": scored,
                    "source": "assumption",
                }
            )
        out[0]["note"] = (
            f"openfootball records only the shoot-out score ({p[0]}-{p[1]}); the order "
            f"({names[0]} first) and which kicks missed are made up to match it; the takers "
            "are not named (kick 1, kick 2, ...)"
        )
        return out
