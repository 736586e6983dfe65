"""The match file: a match as data, validated on load.

A match file (YAML or JSON) describes one match: who, where, when, the structure of play
(periods and their added time) and the incidents (goals, cards, ...). Every fact says where it
comes from (``source``): a published ``article``, imported ``data``, a ``simulated`` match, or an
``assumption`` made because the sources are silent. The replayer expands the file into the full
event stream: kickoff, a clock tick for every minute, the incidents, half time, full time.

**A kind of incident is declared once, here, in its class**: its fields, what it is in the docs
(``becomes``), and the events it becomes on the wire (``events``). :data:`Incident`, the union
a timeline holds, lists the classes (``tests/test_event_registry.py`` checks it names every
one); ``simulator._timeline`` places each incident's events in the stream and knows no kind.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Self, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from events import (
    PERIOD_BOUNDS,
    BodyPart,
    Card,
    Corner,
    Event,
    Foul,
    Goal,
    GoalDisallowed,
    GoalMethod,
    MatchClock,
    MatchFileError,
    MatchId,
    Offside,
    PenaltyAwarded,
    Period,
    Possession,
    Save,
    Score,
    Shot,
    Substitution,
    TeamCode,
    TeamRef,
    VarDecision,
    VarReview,
    VarReviewed,
    quote,
)
from simulator._files import MATCH_FILE, Positions, load_input, parse_yaml, read_input
from simulator._problems import _problems
from simulator._shootout import decided_at

__all__ = [
    "INCIDENT_MODELS",
    "CardIncident",
    "Competition",
    "CornerIncident",
    "DisallowedIncident",
    "Expansion",
    "FoulIncident",
    "GoalDisallowedIncident",
    "GoalIncident",
    "GoalShot",
    "Incident",
    "Kickoff",
    "Match",
    "MatchResult",
    "OffsideIncident",
    "PenaltyAwardedIncident",
    "PeriodSpec",
    "PossessionIncident",
    "ShootoutKickSpec",
    "ShotIncident",
    "Source",
    "SubstitutionIncident",
    "Team",
    "VarReviewIncident",
    "Venue",
    "load_match",
    "parse_match",
]

Source = Literal["article", "assumption", "data", "simulated"]
FORMAT_VERSION = 1


class _Spec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _Fact(_Spec):
    source: Source = Field(description="Where this fact comes from")
    note: str | None = Field(default=None, description="Why, or what the source says exactly")


class Team(_Fact):
    """A team: code, name and manager."""

    code: TeamCode
    name: str = Field(min_length=1)
    manager: str | None = None

    def ref(self) -> TeamRef:
        """The team as events name it."""
        return TeamRef(code=self.code, name=self.name)


class Competition(_Fact):
    """Competition and stage, e.g. FIFA World Cup 2026, Semi-final."""

    name: str = Field(min_length=1)
    stage: str | None = None
    knockout: bool = Field(default=False, description="Level at full time goes to extra time")


class Venue(_Fact):
    """Where the match is played."""

    name: str = Field(min_length=1)
    city: str | None = None


class Kickoff(_Fact):
    """Date and local time of kickoff."""

    date: dt.date
    time: dt.time | None = None
    #: The real offsets run from -12:00 to +14:00; in ASCII digits (Python's ``\d`` and
    #: ``int()`` take any Unicode digit, and ``+99:00`` was accepted, then ended a replay).
    utc_offset: str | None = Field(
        default=None, pattern=r"^[+-](0[0-9]|1[0-4]):[0-5][0-9]$", description="+HH:MM"
    )

    def utc(self) -> dt.datetime:
        """The kickoff as an aware UTC datetime (midnight when the time is unknown, UTC when
        the offset is)."""
        offset = dt.timedelta(0)
        if self.utc_offset:
            sign = -1 if self.utc_offset[0] == "-" else 1
            hours, minutes = int(self.utc_offset[1:3]), int(self.utc_offset[4:6])
            offset = sign * dt.timedelta(hours=hours, minutes=minutes)
        local = dt.datetime.combine(self.date, self.time or dt.time(0, 0), dt.timezone(offset))
        return local.astimezone(dt.UTC)


class PeriodSpec(_Fact):
    """One period of play and the minutes added at its end."""

    period: Period
    added_minutes: int = Field(ge=0, le=30)


@dataclass(slots=True)
class Expansion:
    """What an incident's events are built from, as ``simulator.expand`` walks the timeline.

    Attributes:
        score: goals so far, per team; an incident that changes the score changes it here.
        goals: the goals so far by id, for an incident that names one.
        envelope: the next event's envelope (match, seq, clock, time); each call takes a seq.
    """

    score: dict[str, int]
    goals: dict[str, GoalIncident]
    envelope: Callable[[], dict[str, Any]]


class _Incident(_Fact):
    #: What it becomes on the wire, for the docs' table of incidents.
    becomes: ClassVar[str]
    #: Part of the full feed only (wire 1.4): ``--feed lean`` leaves it out (:func:`lean_match`).
    full_feed: ClassVar[bool] = False

    minute: int = Field(ge=1, le=120, description="Regulation minute label (90 in 90+2')")
    added: int = Field(default=0, ge=0, le=30, description="Added minute (2 in 90+2')")
    second: int = Field(
        default=30, ge=0, le=59, description="Second within the minute; 30 unless known"
    )
    period: Period | None = Field(
        default=None, description="Only needed where the minute is ambiguous (45+ and 90+)"
    )

    @property
    def clock(self) -> MatchClock:
        """The incident's place on the match clock."""
        return MatchClock.at(self.minute, self.added, self.period)

    def events(self, play: Expansion) -> Iterator[Event]:
        """The events it becomes, in order; updates ``play`` as it goes."""
        raise NotImplementedError  # pragma: no cover - every kind of incident has its own


class _ShotFacts(_Spec):
    xg: float = Field(ge=0, le=1, description="expected goals of the chance, 0-1")
    body_part: BodyPart | None = None
    inside_box: bool | None = None


class GoalShot(_ShotFacts):
    """The shot a goal came from: its ``shot`` (the scorer's, outcome goal)."""

    id: str | None = Field(default=None, description="the shot's id; `shot-{seq}` if not given")


class GoalIncident(_Incident):
    """A goal. For an own goal, ``team`` is the team credited and ``scorer`` the opponent.

    With ``shot`` (the full feed), the goal follows its shot: a ``shot`` event, outcome goal,
    by the scorer, which the goal names by ``shot_id``. An own goal has no shot.
    """

    becomes = "`goal`, with the score after it; with `shot`, a `shot` (outcome goal) before it"

    type: Literal["goal"] = "goal"
    id: str | None = Field(default=None, description="needed to retract it")
    team: TeamCode = Field(description="credited")
    scorer: str = Field(min_length=1)
    method: GoalMethod | None = None
    detail: str | None = None
    shot: GoalShot | None = Field(default=None, description="the shot it came from")

    def events(self, play: Expansion) -> Iterator[Event]:
        shot_id = None
        if self.shot is not None:
            before = play.envelope()
            shot_id = self.shot.id or f"shot-{before['seq']}"
            yield Shot(
                **before,
                shot_id=shot_id,
                team=self.team,
                player=self.scorer,
                outcome="goal",
                xg=self.shot.xg,
                body_part=self.shot.body_part,
                inside_box=self.shot.inside_box,
            )
        base = play.envelope()
        play.score[self.team] += 1
        goal_id = self.id or f"goal-{base['seq']}"
        play.goals[goal_id] = self
        yield Goal(
            **base,
            goal_id=goal_id,
            team=self.team,
            scorer=self.scorer,
            method=self.method,
            detail=self.detail,
            score=dict(play.score),
            shot_id=shot_id,
        )


class GoalDisallowedIncident(_Incident):
    """A goal retracted after review; names the goal by its ``id``.

    ``disallowed``, the type's first name, is still read (and written back as
    ``goal_disallowed``, the name of the event it becomes).
    """

    becomes = "`goal_disallowed`, with the score after it"

    type: Literal["goal_disallowed", "disallowed"] = "goal_disallowed"
    goal: str = Field(description="the `id` of the goal")
    reason: str | None = None

    @field_validator("type")
    @classmethod
    def _wire_name(cls, _value: str) -> Literal["goal_disallowed"]:
        return "goal_disallowed"

    def events(self, play: Expansion) -> Iterator[Event]:
        goal = play.goals[self.goal]
        play.score[goal.team] -= 1
        yield GoalDisallowed(
            **play.envelope(),
            goal_id=self.goal,
            team=goal.team,
            reason=self.reason,
            score=dict(play.score),
        )


#: The old name of :class:`GoalDisallowedIncident`.
DisallowedIncident = GoalDisallowedIncident


class PossessionIncident(_Incident):
    """Possession shares over a stretch of play."""

    becomes = "`possession`"

    type: Literal["possession"] = "possession"
    share: dict[TeamCode, Annotated[float, Field(ge=0, le=100)]] = Field(
        description="percent per team"
    )
    since_minute: int | None = Field(default=None, ge=1, le=120)
    since_added: int = Field(default=0, ge=0)

    def events(self, play: Expansion) -> Iterator[Event]:
        since = MatchClock.at(self.since_minute, self.since_added) if self.since_minute else None
        yield Possession(**play.envelope(), share=dict(self.share), since=since)


class CardIncident(_Incident):
    """A yellow, second yellow or red card; ``foul`` names the foul it punished."""

    becomes = "`card`"

    type: Literal["card"] = "card"
    team: TeamCode
    player: str = Field(min_length=1)
    card: Literal["yellow", "second_yellow", "red"]
    foul: str | None = Field(default=None, description="the `id` of the foul it punished")

    def events(self, play: Expansion) -> Iterator[Event]:
        yield Card(
            **play.envelope(), team=self.team, player=self.player, card=self.card, foul_id=self.foul
        )


class SubstitutionIncident(_Incident):
    """A substitution."""

    becomes = "`substitution`"

    type: Literal["substitution"] = "substitution"
    team: TeamCode
    player_off: str = Field(min_length=1)
    player_on: str = Field(min_length=1)

    def events(self, play: Expansion) -> Iterator[Event]:
        yield Substitution(
            **play.envelope(), team=self.team, player_off=self.player_off, player_on=self.player_on
        )


class VarReviewIncident(_Incident):
    """A VAR review and the referee's decision. It changes nothing by itself: a goal ruled out
    after it is a ``goal_disallowed`` incident of its own, a card a ``card``."""

    becomes = "`var_review`"

    type: Literal["var_review"] = "var_review"
    team: TeamCode = Field(description="whose goal, penalty or player")
    player: str | None = Field(default=None, min_length=1)
    reviewed: VarReviewed
    decision: VarDecision
    reason: str | None = None

    def events(self, play: Expansion) -> Iterator[Event]:
        yield VarReview(
            **play.envelope(),
            team=self.team,
            player=self.player,
            reviewed=self.reviewed,
            decision=self.decision,
            reason=self.reason,
        )


class ShotIncident(_Incident, _ShotFacts):
    """A shot that did not go in (a goal's shot is its goal's ``shot``). A saved one names
    the ``keeper``, and becomes a ``save`` too."""

    becomes = "`shot`; a saved one with a `keeper`, a `save` after it"
    full_feed = True

    type: Literal["shot"] = "shot"
    id: str | None = Field(default=None, description="`shot-{seq}` if not given")
    team: TeamCode = Field(description="the shooting team")
    player: str = Field(min_length=1)
    outcome: Literal["saved", "off_target", "blocked", "woodwork"]
    keeper: str | None = Field(default=None, min_length=1, description="who saved it")

    def events(self, play: Expansion) -> Iterator[Event]:
        base = play.envelope()
        shot_id = self.id or f"shot-{base['seq']}"
        yield Shot(
            **base,
            shot_id=shot_id,
            team=self.team,
            player=self.player,
            outcome=self.outcome,
            xg=self.xg,
            body_part=self.body_part,
            inside_box=self.inside_box,
        )
        if self.keeper is not None:
            other = next(code for code in play.score if code != self.team)
            yield Save(**play.envelope(), team=other, keeper=self.keeper, shot_id=shot_id)


class CornerIncident(_Incident):
    """A corner kick, taken by ``team``."""

    becomes = "`corner`"
    full_feed = True

    type: Literal["corner"] = "corner"
    team: TeamCode
    player: str | None = Field(default=None, min_length=1)

    def events(self, play: Expansion) -> Iterator[Event]:
        yield Corner(**play.envelope(), team=self.team, player=self.player)


class FoulIncident(_Incident):
    """A foul committed by ``team``; a card or a penalty names it by ``id``."""

    becomes = "`foul`"
    full_feed = True

    type: Literal["foul"] = "foul"
    id: str | None = Field(default=None, description="`foul-{seq}` if not given")
    team: TeamCode = Field(description="who committed it")
    player: str | None = Field(default=None, min_length=1)

    def events(self, play: Expansion) -> Iterator[Event]:
        base = play.envelope()
        foul_id = self.id or f"foul-{base['seq']}"
        yield Foul(**base, foul_id=foul_id, team=self.team, player=self.player)


class OffsideIncident(_Incident):
    """A player of ``team`` caught offside."""

    becomes = "`offside`"
    full_feed = True

    type: Literal["offside"] = "offside"
    team: TeamCode
    player: str | None = Field(default=None, min_length=1)

    def events(self, play: Expansion) -> Iterator[Event]:
        yield Offside(**play.envelope(), team=self.team, player=self.player)


class PenaltyAwardedIncident(_Incident):
    """A penalty given to ``team``; ``foul`` names the foul it punishes. The kick is a goal
    (``method: penalty``, with its ``shot``) or a shot of its own."""

    becomes = "`penalty_awarded`"
    full_feed = True

    type: Literal["penalty_awarded"] = "penalty_awarded"
    team: TeamCode = Field(description="who takes it")
    player: str | None = Field(default=None, min_length=1, description="the player fouled")
    foul: str | None = Field(default=None, description="the `id` of the foul")

    def events(self, play: Expansion) -> Iterator[Event]:
        yield PenaltyAwarded(
            **play.envelope(), team=self.team, player=self.player, foul_id=self.foul
        )


#: Every kind of incident a timeline holds: add a new kind's class here too (a test fails when
#: a subclass of ``_Incident`` is missing). The order is the docs'.
Incident = Annotated[
    GoalIncident
    | GoalDisallowedIncident
    | PossessionIncident
    | CardIncident
    | SubstitutionIncident
    | VarReviewIncident
    | ShotIncident
    | CornerIncident
    | FoulIncident
    | OffsideIncident
    | PenaltyAwardedIncident,
    Field(discriminator="type"),
]
#: The classes of :data:`Incident`, in its order.
INCIDENT_MODELS: tuple[type[_Incident], ...] = get_args(get_args(Incident)[0])


class ShootoutKickSpec(_Fact):
    """One kick of a penalty shoot-out, in the order taken."""

    team: TeamCode
    taker: str = Field(min_length=1)
    scored: bool


class MatchResult(_Fact):
    """The recorded result; checked against the incidents on load."""

    score: Score
    shootout: Score | None = None


def _default_periods() -> tuple[PeriodSpec, ...]:
    return (
        PeriodSpec(period=Period.FIRST_HALF, added_minutes=2, source="assumption"),
        PeriodSpec(period=Period.SECOND_HALF, added_minutes=4, source="assumption"),
    )


class Match(_Spec):
    """A whole match file."""

    format: Literal[1] = Field(default=1, description="Match file format version")
    match_id: MatchId
    title: str | None = None
    competition: Competition
    venue: Venue | None = None
    kickoff: Kickoff
    home: Team
    away: Team
    periods: tuple[PeriodSpec, ...] = Field(default_factory=_default_periods, min_length=1)
    break_minutes: int = Field(default=15, ge=0, le=60, description="Length of each break")
    timeline: tuple[Incident, ...] = ()
    shootout: tuple[ShootoutKickSpec, ...] = ()
    result: MatchResult
    sources: dict[str, str] = Field(
        default_factory=dict, description="Named sources: article path, dataset, licence"
    )

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        problems: list[str] = []
        codes = {self.home.code, self.away.code}
        if self.home.code == self.away.code:
            problems.append(f"home and away are both {self.home.code}")
        played = [p.period for p in self.periods]
        expected = [Period(i) for i in range(1, len(played) + 1)]
        if played != expected or len(played) not in (2, 4, 5):
            problems.append(
                "periods: expected 1, 2 (regulation), then 3, 4 (extra time) and 5 "
                f"(penalties), in order; got {[int(p) for p in played]}"
            )
        added = {p.period: p.added_minutes for p in self.periods}
        goal_ids: set[str] = set()
        for i, inc in enumerate(self.timeline):
            where = f"timeline.{i}"
            try:
                clock = inc.clock
            except (ValidationError, StopIteration) as err:
                problems.append(f"{where}: no such minute {inc.minute}+{inc.added}: {err}")
                continue
            if clock.period not in added or clock.period is Period.PENALTIES:
                problems.append(f"{where}: minute {clock.label} is in a period not played")
                continue
            if clock.added > added[clock.period]:
                problems.append(
                    f"{where}: minute {clock.label} is past the {added[clock.period]} added "
                    f"minute(s) of {clock.period.short}; raise periods.added_minutes or move it"
                )
            team = getattr(inc, "team", None)
            if team is not None and team not in codes:
                problems.append(
                    f"{where}.team: {team} is neither {self.home.code} nor {self.away.code}"
                )
            if isinstance(inc, GoalIncident) and inc.id is not None:
                if inc.id in goal_ids:
                    problems.append(f"{where}.id: goal id {quote(inc.id)} is used twice")
                goal_ids.add(inc.id)
            if isinstance(inc, PossessionIncident) and set(inc.share) - codes:
                problems.append(f"{where}.share: unknown team(s) {sorted(set(inc.share) - codes)}")
        for i, inc in enumerate(self.timeline):
            if isinstance(inc, GoalDisallowedIncident) and inc.goal not in goal_ids:
                problems.append(f"timeline.{i}.goal: no goal has id {quote(inc.goal)}")
        problems += self._check_feed()
        for i, kick in enumerate(self.shootout):
            if kick.team not in codes:
                problems.append(f"shootout.{i}.team: {kick.team} is not playing")
        if self.shootout and Period.PENALTIES not in played:
            problems.append("shootout: kicks are listed but periods has no period 5 (penalties)")
        problems += self._check_result(codes)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def _check_feed(self) -> list[str]:
        """The full feed's rules: every goal but an own goal is a shot (once the match has
        shots at all), an own goal is none, a save is of a saved shot, ids named exist."""
        problems = []
        has_shots = any(
            isinstance(i, ShotIncident) or (isinstance(i, GoalIncident) and i.shot is not None)
            for i in self.timeline
        )
        fouls = {i.id for i in self.timeline if isinstance(i, FoulIncident) and i.id}
        ids: Counter[str] = Counter()
        for i, inc in enumerate(self.timeline):
            where = f"timeline.{i}"
            if isinstance(inc, GoalIncident):
                own = inc.method == "own_goal"
                if own and inc.shot is not None:
                    problems.append(f"{where}.shot: an own goal is no shot of the team credited")
                elif has_shots and not own and inc.shot is None:
                    problems.append(
                        f"{where}.shot: missing; in a match with shots every goal but an own "
                        "goal comes from one (give its xg)"
                    )
                if inc.shot is not None and inc.shot.id:
                    ids[inc.shot.id] += 1
            if isinstance(inc, ShotIncident):
                if inc.keeper is not None and inc.outcome != "saved":
                    problems.append(f"{where}.keeper: only a saved shot has a keeper")
                if inc.id:
                    ids[inc.id] += 1
            foul = getattr(inc, "foul", None)
            if isinstance(inc, CardIncident | PenaltyAwardedIncident) and foul not in {
                None,
                *fouls,
            }:
                problems.append(f"{where}.foul: no foul has id {quote(str(foul))}")
        problems += [f"timeline: shot id {quote(s)} is used twice" for s, n in ids.items() if n > 1]
        return problems

    def _check_result(self, codes: set[str]) -> list[str]:
        problems = []
        if set(self.result.score) != codes:
            return [
                f"result.score: expected the keys {sorted(codes)}, got {sorted(self.result.score)}"
            ]
        counted = self.final_score()
        if counted != dict(self.result.score):
            problems.append(
                f"result.score: says {self._line(self.result.score)} but the goals in the timeline "
                f"add up to {self._line(counted)}"
            )
        played = {p.period for p in self.periods}
        problems += self._check_extra_time(played)
        level = counted[self.home.code] == counted[self.away.code]
        if Period.PENALTIES in played:
            if not level:
                problems.append("periods: a shoot-out is only played when the score is level")
            shoot = self.shootout_score()
            if self.result.shootout is None or dict(self.result.shootout) != shoot:
                problems.append(
                    f"result.shootout: the kicks add up to {self._line(shoot)}, "
                    f"the result says {self._line(self.result.shootout or {})}"
                )
            elif shoot[self.home.code] == shoot[self.away.code]:
                problems.append("shootout: a shoot-out cannot end level")
            else:
                problems += self._check_shootout_order()
        elif self.result.shootout is not None:
            problems.append("result.shootout: given, but no shoot-out was played")
        return problems

    def _check_extra_time(self, played: set[Period]) -> list[str]:
        after_90 = self.score_after(Period.SECOND_HALF)
        level_90 = after_90[self.home.code] == after_90[self.away.code]
        extra_time = Period.EXTRA_TIME_FIRST in played
        if extra_time and not level_90:
            return [
                f"periods: extra time is only played when level after 90 minutes, "
                f"but the goals make it {self._line(after_90)}"
            ]
        if not self.competition.knockout:
            return []
        if level_90 and not extra_time:
            return [
                f"periods: a knockout match level after 90 minutes ({self._line(after_90)}) "
                "goes to extra time: add periods 3 and 4, or set competition.knockout: false"
            ]
        final = self.final_score()
        level_120 = final[self.home.code] == final[self.away.code]
        if extra_time and level_120 and Period.PENALTIES not in played:
            return [
                f"periods: a knockout match level after extra time ({self._line(final)}) "
                "goes to penalties: add period 5 and the shootout"
            ]
        return []

    def _check_shootout_order(self) -> list[str]:
        kicks = [(k.team, k.scored) for k in self.shootout]
        end = decided_at(kicks, (self.home.code, self.away.code))
        if end is None:
            return ["shootout: the kicks listed never decide it (five each, then sudden death)"]
        if end != len(kicks) - 1:
            return [
                f"shootout.{end + 1}: the shoot-out was already decided by kick {end + 1} of "
                f"{len(kicks)}: remove the kicks after it"
            ]
        return []

    def _line(self, score: dict[str, int]) -> str:
        h, a = self.home.code, self.away.code
        return f"{h} {score.get(h, 0)}-{score.get(a, 0)} {a}"

    def final_score(self) -> dict[str, int]:
        """Goals counted from the timeline, less the disallowed ones."""
        return self.score_after(Period.EXTRA_TIME_SECOND)

    def score_after(self, period: Period) -> dict[str, int]:
        """Goals counted up to the end of ``period``, less the disallowed ones."""
        disallowed = {i.goal for i in self.timeline if isinstance(i, GoalDisallowedIncident)}
        score = Counter({self.home.code: 0, self.away.code: 0})
        for inc in self.timeline:
            if not isinstance(inc, GoalIncident) or (inc.id is not None and inc.id in disallowed):
                continue
            try:
                in_time = inc.clock.period <= period
            except (ValidationError, StopIteration):
                continue  # reported by the minute check
            score[inc.team] += in_time
        return dict(score)

    def shootout_score(self) -> dict[str, int]:
        """Shoot-out kicks scored, per team."""
        score = Counter({self.home.code: 0, self.away.code: 0})
        for kick in self.shootout:
            score[kick.team] += kick.scored
        return dict(score)

    @property
    def winner(self) -> str | None:
        """Code of the winning team (after a shoot-out if there was one), None for a draw."""
        score = self.result.shootout if self.result.shootout else self.result.score
        h, a = score.get(self.home.code, 0), score.get(self.away.code, 0)
        if h == a:
            return None
        return self.home.code if h > a else self.away.code

    @property
    def period_bounds(self) -> dict[Period, tuple[int, int]]:
        """Regulation minutes of each period played."""
        return {p.period: PERIOD_BOUNDS[p.period] for p in self.periods}


def parse_match(
    data: Any, *, path: Path | str = "<match>", positions: Positions | None = None
) -> Match:
    """Validate already-parsed match data (``positions``: where its values are in the file).

    Raises:
        MatchFileError: naming ``path``, and each field path with what was expected.
    """
    if not isinstance(data, dict):
        raise MatchFileError(
            path, [f"expected a mapping at the top level, got {type(data).__name__}"]
        )
    try:
        return Match.model_validate(data)
    except ValidationError as err:
        raise MatchFileError(path, _problems(err, positions)) from None


def load_match(path: Path | str) -> Match:
    """Read and validate a match file (``.yaml``, ``.yml`` or ``.json``).

    The file is bounded before it is read (see :mod:`simulator._files`): a regular file of at
    most 8 MiB, JSON or YAML nested at most a hundred or so levels deep.

    Raises:
        MatchFileError: the file is missing, not a regular file, too big, unreadable, not
            YAML/JSON, nested too deep, or invalid.
    """
    positions: Positions = {}
    data = load_input(path, MATCH_FILE, positions)
    try:
        return parse_match(data, path=path, positions=positions)
    except MatchFileError:
        if positions or Path(path).suffix != ".json":
            raise
    # JSON is read by a parser that keeps no positions: YAML's reads it again for them.
    with contextlib.suppress(MatchFileError):
        parse_yaml(read_input(path, MATCH_FILE), path, positions)
    return parse_match(data, path=path, positions=positions)
