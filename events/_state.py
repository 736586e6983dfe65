"""Match state, and the pure reducer that derives it from events.

``apply(state, event)`` returns a new :class:`MatchState`; it never mutates. Only the event
types that change the state have a case here: any other moves ``last_seq`` and the clock.
Idempotency by sequence number lives here and only here: an event whose ``seq`` is not past
``state.last_seq`` changes nothing. :func:`check_sequence` tells a caller what an incoming
seq means (next, duplicate, or a gap with the missing range) before it applies it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from events._clock import MatchClock, Period
from events._models import (
    MAX_TEAMS,
    SCHEMA_VERSION,
    Card,
    ClippedId,
    ClippedName,
    ClippedText,
    ClockTick,
    Corner,
    Event,
    EventId,
    Foul,
    FullTime,
    Goal,
    GoalDisallowed,
    GoalMethod,
    KickOff,
    MatchId,
    MatchInfo,
    Offside,
    PeriodEnd,
    Possession,
    ReplayStopped,
    RunId,
    Save,
    Score,
    ShootoutKick,
    Shot,
    TeamCode,
    TeamRef,
)

__all__ = [
    "KEEP_CARDS",
    "KEEP_GOALS",
    "CardRecord",
    "GoalRecord",
    "MatchState",
    "MatchStatus",
    "SequenceCheck",
    "TeamStats",
    "apply",
    "check_sequence",
    "replay_state",
]

#: ``stopped`` (1.2): the replay stopped before full time (a ``replay_stopped`` event).
MatchStatus = Literal["scheduled", "live", "half_time", "break", "finished", "stopped"]

#: The goals a state keeps: the latest, far more than a real match has (the record score of a
#: first-class match is 36-0, Arbroath, 1885). The score never comes from them (every goal
#: carries the score after it), so past this a state still has the right score. Without a
#: bound, a feed of thousands of goals grew a match without end, and copying the list per goal
#: made the work quadratic (5,000 goals: 95 s of CPU in ``web``). A ``goal_disallowed`` of a
#: goal no longer kept still sets the score.
KEEP_GOALS = 64
#: The cards a state keeps: the latest (a real match has at most about twenty), as for goals.
KEEP_CARDS = 64


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GoalRecord(_Frozen):
    """A goal as the state remembers it."""

    goal_id: ClippedId
    seq: int
    clock: MatchClock
    team: TeamCode
    scorer: ClippedName
    method: GoalMethod | None = None
    detail: ClippedText | None = None
    shot_id: EventId | None = Field(default=None, description="The shot it came from (1.4)")


class CardRecord(_Frozen):
    """A card as the state remembers it."""

    seq: int
    clock: MatchClock
    team: TeamCode
    player: ClippedName
    card: Literal["yellow", "second_yellow", "red"]


class TeamStats(_Frozen):
    """A team's live match stats (1.4), counted from the events of the full feed: ``shot``,
    ``save``, ``corner``, ``foul``, ``offside``. A goal ruled out takes its shot back off."""

    shots: int = Field(default=0, ge=0, description="Shots, of every outcome")
    on_target: int = Field(default=0, ge=0, description="Shots that went in or were saved")
    xg: float = Field(default=0.0, ge=0, description="Expected goals: the shots' xg, summed")
    corners: int = Field(default=0, ge=0)
    fouls: int = Field(default=0, ge=0, description="Fouls committed")
    offsides: int = Field(default=0, ge=0)
    saves: int = Field(default=0, ge=0, description="Saves by its keeper")


#: Expected goals are summed to three decimals, so adding a shot and taking it back off
#: (a goal ruled out) gives back the very same number.
_XG_PLACES = 3
#: A team's stats before its first counted event (frozen: shared by every state).
_NONE_YET = TeamStats()


class MatchState(_Frozen):
    """Everything a scoreboard needs, as of ``last_seq``.

    Published retained after every event so a late subscriber knows the score at once.
    Bounded per match: it lists the last :data:`KEEP_GOALS` goals and :data:`KEEP_CARDS`
    cards at most, its names and free text are cut (``events._models.MAX_NAME``), and its
    maps keyed by team code (score, possession, shoot-out, stats) hold two teams at most
    (``events._models.MAX_TEAMS``).
    """

    schema_version: str = Field(default=SCHEMA_VERSION, pattern=r"^\d+\.\d+$")
    match_id: MatchId
    run: RunId = 0
    home: TeamRef | None = None
    away: TeamRef | None = None
    score: Score = Field(default_factory=dict, description="Goals keyed by team code")
    status: MatchStatus = "scheduled"
    period: Period | None = None
    clock: MatchClock | None = None
    last_seq: int = Field(default=0, ge=0, description="Seq of the last event applied")
    goals: tuple[GoalRecord, ...] = Field(
        default=(), description=f"The goals scored, oldest first: the last {KEEP_GOALS} at most"
    )
    cards: tuple[CardRecord, ...] = Field(
        default=(), description=f"The cards shown, oldest first: the last {KEEP_CARDS} at most"
    )
    possession: dict[TeamCode, float] | None = None
    possession_since: MatchClock | None = Field(
        default=None, description="Start of the stretch the possession shares cover (1.2)"
    )
    possession_until: MatchClock | None = Field(
        default=None, description="End of the stretch the possession shares cover (1.2)"
    )
    shootout: Score | None = None
    winner: TeamCode | None = None
    info: MatchInfo | None = Field(
        default=None, description="Competition, stage, venue, kickoff, from kick_off (1.2)"
    )
    stats: dict[TeamCode, TeamStats] = Field(
        default_factory=dict,
        max_length=MAX_TEAMS,
        description=(
            "Live match stats per team, from the full feed; empty without it (1.4); "
            f"{MAX_TEAMS} teams at most"
        ),
    )
    scoring_shots: dict[EventId, float] = Field(
        default_factory=dict,
        max_length=KEEP_GOALS,
        description=(
            "The xg of each shot that went in, by shot_id: what a goal ruled out takes back "
            f"off its team's stats (1.4); the last {KEEP_GOALS} at most, as for goals"
        ),
    )

    @model_validator(mode="after")
    def _bounded(self) -> MatchState:
        """Cuts what a snapshot's fields of 1.0-1.3 hold past the bounds: they are read at
        any size (docs/wire-format.md: a minor version refuses nothing an earlier one took),
        but a state keeps the last goals and cards, and two teams' score, possession and
        shoot-out. The fields 1.4 adds refuse more instead (``max_length`` above)."""
        fields = self.__dict__
        for name in ("score", "possession", "shootout"):
            entries = fields[name]
            if entries is not None and len(entries) > MAX_TEAMS:
                fields[name] = of_the_teams(self, entries)
        if len(self.goals) > KEEP_GOALS:
            fields["goals"] = self.goals[-KEEP_GOALS:]
        if len(self.cards) > KEEP_CARDS:
            fields["cards"] = self.cards[-KEEP_CARDS:]
        return self

    @classmethod
    def new(
        cls,
        match_id: str,
        home: TeamRef | None = None,
        away: TeamRef | None = None,
        *,
        run: int = 0,
        info: MatchInfo | None = None,
    ) -> MatchState:
        """The state before the first event of run ``run``, 0-0 when the teams are known."""
        score = {home.code: 0, away.code: 0} if home and away else {}
        return cls(match_id=match_id, run=run, home=home, away=away, score=score, info=info)

    @property
    def scoreline(self) -> str:
        """``ARG 2-1 ENG``, home first; falls back to the score dict's order."""
        codes = [t.code for t in (self.home, self.away) if t] or list(self.score)
        if len(codes) != 2:
            return " ".join(f"{c} {n}" for c, n in self.score.items()) or "-"
        h, a = codes
        line = f"{h} {self.score.get(h, 0)}-{self.score.get(a, 0)} {a}"
        if self.shootout:
            line += f" ({self.shootout.get(h, 0)}-{self.shootout.get(a, 0)} pens)"
        return line

    @property
    def display_clock(self) -> str:
        """The clock as a scoreboard shows it: ``1H 23'``, ``HT``, ``2H 90+2'``, ``FT``."""
        if self.status == "finished":
            return "FT"
        if self.status == "stopped":
            return "STOPPED"
        if self.status == "half_time":
            return "HT"
        if self.status == "scheduled" or self.clock is None:
            return "--"
        if self.status == "break":
            return "BREAK"
        return f"{self.clock.period.short} {self.clock.label}"


V = TypeVar("V")


def of_the_teams(state: MatchState, entries: dict[str, V]) -> dict[str, V]:
    """``entries`` (a map keyed by team code: a score, possession shares) as a state keeps it:
    :data:`MAX_TEAMS` teams at most, the home and away teams' where known, else the first.

    A real feed names the two teams only; a hostile one may name thousands in one payload,
    which a state would otherwise keep for the match. ``entries`` itself when within bounds.
    """
    if len(entries) <= MAX_TEAMS:
        return entries
    kept = {t.code: entries[t.code] for t in (state.home, state.away) if t and t.code in entries}
    for code, value in entries.items():
        if len(kept) >= MAX_TEAMS:
            break
        kept.setdefault(code, value)
    return kept


@dataclass(frozen=True, slots=True)
class SequenceCheck:
    """What an incoming seq means relative to the state.

    Attributes:
        kind: ``next`` (apply it), ``duplicate`` (already applied; drop it), or ``gap``
            (events ``missing`` never arrived; apply it and resynchronise).
        missing: the seqs skipped over, empty unless ``kind == "gap"``.
    """

    kind: Literal["next", "duplicate", "gap"]
    missing: range = range(0)


def check_sequence(state: MatchState, seq: int) -> SequenceCheck:
    """Classify ``seq`` against ``state.last_seq``."""
    if seq <= state.last_seq:
        return SequenceCheck("duplicate")
    if seq == state.last_seq + 1:
        return SequenceCheck("next")
    return SequenceCheck("gap", range(state.last_seq + 1, seq))


_new = object.__new__
_set = object.__setattr__

#: One set object per combination of fields set, shared by every state that has it. Each
#: state held its own ``__pydantic_fields_set__``: a set of twenty names is 1.2 KB, an eighth
#: of what a consumer keeps per tracked match (``benchmarks/memory_flood.py``). Sharing is
#: safe because a frozen model never adds to its set, and pydantic's ``model_copy`` copies
#: the set before it changes it. Bounded: the combinations are subsets of the model's fields
#: met in practice, a handful; past the cap a state keeps a set of its own.
_FIELDS_SETS: dict[frozenset[str], set[str]] = {}
_FIELDS_SETS_CAP = 256

M = TypeVar("M", bound=BaseModel)


def shared_fields_set(fields: set[str]) -> set[str]:
    """The shared set equal to ``fields`` (``fields`` itself once the cache is full)."""
    key = frozenset(fields)
    shared = _FIELDS_SETS.get(key)
    if shared is None:
        if len(_FIELDS_SETS) >= _FIELDS_SETS_CAP:
            return fields
        shared = _FIELDS_SETS[key] = set(key)
    return shared


def share_fields(model: M) -> M:
    """``model``, its fields set and those of the models it holds (directly or in a tuple)
    swapped for the shared ones (see :data:`_FIELDS_SETS`): for what is kept per match.

    About 10 us for a full-time state: called where a state is kept (a consumer adopting a
    snapshot), not on every decode (a snapshot comes after every event)."""
    _set(model, "__pydantic_fields_set__", shared_fields_set(model.__pydantic_fields_set__))
    for value in model.__dict__.values():
        if isinstance(value, BaseModel):
            share_fields(value)
        elif type(value) is tuple:
            for item in value:
                if isinstance(item, BaseModel):
                    share_fields(item)
    return model


def evolve(state: MatchState, changes: dict[str, Any]) -> MatchState:
    """``state.model_copy(update=changes)``, for the reducer's hot path: a tenth of the time.

    The changes are not validated, like ``model_copy``'s; the reducer only passes values
    taken from validated events. ``tests/test_reducer.py`` checks it equals ``model_copy``.
    """
    new = _new(MatchState)
    fields = state.__dict__.copy()
    fields.update(changes)
    _set(new, "__dict__", fields)
    fields_set = state.__pydantic_fields_set__
    if not fields_set.issuperset(changes):  # shared otherwise: pydantic copies before changing
        fields_set = shared_fields_set(fields_set | changes.keys())
    _set(new, "__pydantic_fields_set__", fields_set)
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_private__", None)
    return new


def apply(state: MatchState, event: Event) -> MatchState:
    """The state after ``event``. Pure; a duplicate (``seq <= last_seq``) changes nothing.

    Raises:
        ValueError: the event belongs to another match.
    """
    if event.match_id != state.match_id:
        raise ValueError(f"event of match {event.match_id!r} applied to {state.match_id!r}")
    if event.seq <= state.last_seq:
        return state
    if type(event) is ClockTick:  # most events: first, and without the pattern matching
        return evolve(state, {"last_seq": event.seq, "clock": event.clock})
    base: dict[str, object] = {"last_seq": event.seq, "clock": event.clock}
    match event:  # the full feed's counted events first: after the ticks, the most frequent
        case Shot():
            return evolve(state, base | _shot_counted(state, event))
        case Save():
            return evolve(state, base | _counted(state, event.team, "saves"))
        case Corner():
            return evolve(state, base | _counted(state, event.team, "corners"))
        case Foul():
            return evolve(state, base | _counted(state, event.team, "fouls"))
        case Offside():
            return evolve(state, base | _counted(state, event.team, "offsides"))
        case KickOff():
            score = state.score or {event.home.code: 0, event.away.code: 0}
            return evolve(
                state,
                {
                    **base,
                    "home": share_fields(event.home),  # kept for the match: share_fields
                    "away": share_fields(event.away),
                    "score": score,
                    "status": "live",
                    "period": event.clock.period,
                    "info": share_fields(event.info) if event.info else state.info,
                },
            )
        case PeriodEnd():
            status = "half_time" if event.clock.period is Period.FIRST_HALF else "break"
            score = of_the_teams(state, event.score)
            return evolve(state, {**base, "status": status, "score": score})
        case Goal():
            goals = (*state.goals[1 - KEEP_GOALS :], _goal_record(event))
            score = of_the_teams(state, event.score)
            return evolve(state, {**base, "score": score, "goals": goals})
        case GoalDisallowed():
            goals = tuple(g for g in state.goals if g.goal_id != event.goal_id)
            changes = {**base, "score": of_the_teams(state, event.score), "goals": goals}
            return evolve(state, changes | _shot_withdrawn(state, event.goal_id))
        case Possession():
            return evolve(
                state,
                {
                    **base,
                    "possession": dict(of_the_teams(state, event.share)),
                    "possession_since": event.since,
                    "possession_until": event.clock,
                },
            )
        case Card():
            cards = (*state.cards[1 - KEEP_CARDS :], _card_record(event))
            return evolve(state, {**base, "cards": cards})
        case ShootoutKick():
            shootout = dict(of_the_teams(state, event.shootout))
            return evolve(state, {**base, "shootout": shootout, "period": Period.PENALTIES})
        case FullTime():
            return evolve(
                state,
                {
                    **base,
                    "status": "finished",
                    "score": of_the_teams(state, event.score),
                    "shootout": event.shootout and of_the_teams(state, event.shootout),
                    "winner": event.winner,
                },
            )
        case ReplayStopped():
            return evolve(state, {**base, "status": "stopped"})
        case _:  # a type that changes nothing but the clock: a tick, a substitution, ...
            return evolve(state, base)


def _goal_record(event: Goal) -> GoalRecord:
    """What the state keeps of ``event``, in its list of goals."""
    return GoalRecord(
        goal_id=event.goal_id,
        seq=event.seq,
        clock=event.clock,
        team=event.team,
        scorer=event.scorer,
        method=event.method,
        detail=event.detail,
        shot_id=event.shot_id,
    )


def _card_record(event: Card) -> CardRecord:
    """What the state keeps of ``event``, in its list of cards."""
    return CardRecord(
        seq=event.seq, clock=event.clock, team=event.team, player=event.player, card=event.card
    )


def _changed(line: TeamStats, changes: dict[str, object]) -> TeamStats:
    """``line.model_copy(update=changes)`` at a fraction of the cost, as :func:`evolve` does
    (``tests/test_full_feed.py`` checks the two agree)."""
    new = _new(TeamStats)
    fields = line.__dict__.copy()
    fields.update(changes)
    _set(new, "__dict__", fields)
    _set(new, "__pydantic_fields_set__", line.__pydantic_fields_set__ | changes.keys())
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_private__", None)
    return new


def _team_stats(state: MatchState, team: str) -> tuple[dict[str, TeamStats], TeamStats] | None:
    """A copy of the stats, with both teams (and ``team``) in it, and ``team``'s line; None
    for a team the state keeps no stats of: neither team once both are known, a third one
    before (:data:`MAX_TEAMS`: a feed of thousands of team codes must not grow the match)."""
    teams = tuple(t.code for t in (state.home, state.away) if t)
    if len(teams) == MAX_TEAMS:
        if team not in teams:
            return None
        stats = {code: state.stats.get(code, _NONE_YET) for code in teams}
    else:
        stats = dict(state.stats)
        for code in (*teams, team):
            if code not in stats and len(stats) < MAX_TEAMS:
                stats[code] = _NONE_YET
        if team not in stats:
            return None
    return stats, stats[team]


def _counted(state: MatchState, team: str, stat: str, by: int = 1) -> dict[str, object]:
    found = _team_stats(state, team)
    if found is None:
        return {}
    stats, line = found
    stats[team] = _changed(line, {stat: getattr(line, stat) + by})
    return {"stats": stats}


def _shot_counted(state: MatchState, shot: Shot) -> dict[str, object]:
    found = _team_stats(state, shot.team)
    if found is None:
        return {}
    stats, line = found
    xg = round(shot.xg, _XG_PLACES)
    stats[shot.team] = _changed(
        line,
        {
            "shots": line.shots + 1,
            "on_target": line.on_target + shot.on_target,
            "xg": round(line.xg + xg, _XG_PLACES),
        },
    )
    if shot.outcome != "goal":
        return {"stats": stats}
    scoring = dict(state.scoring_shots)
    if len(scoring) >= KEEP_GOALS:  # its goal is no longer kept either: forget the oldest
        del scoring[next(iter(scoring))]
    scoring[shot.shot_id] = xg
    return {"stats": stats, "scoring_shots": scoring}


def _shot_withdrawn(state: MatchState, goal_id: str) -> dict[str, object]:
    """A goal ruled out: its shot leaves its team's shots, shots on target and xg, so the
    stats are those of the match as it stands (a goal ruled out is no attempt on goal)."""
    goal = next((g for g in state.goals if g.goal_id == goal_id), None)
    if goal is None or goal.shot_id not in state.scoring_shots or goal.team not in state.stats:
        return {}
    scoring = dict(state.scoring_shots)
    xg = scoring.pop(goal.shot_id)
    line = state.stats[goal.team]
    withdrawn = _changed(
        line,
        {
            "shots": max(0, line.shots - 1),
            "on_target": max(0, line.on_target - 1),
            "xg": max(0.0, round(line.xg - xg, _XG_PLACES)),
        },
    )
    return {"stats": {**state.stats, goal.team: withdrawn}, "scoring_shots": scoring}


def replay_state(match_id: str, events: list[Event] | tuple[Event, ...]) -> MatchState:
    """Fold ``events`` (in the order given) into a state, from nothing."""
    state = MatchState.new(match_id)
    for event in events:
        state = apply(state, event)
    return state
