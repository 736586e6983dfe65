"""The events on the wire: one frozen pydantic model per type, a tagged union on ``type``.

Every event carries the envelope of :class:`BaseEvent`: schema version, match id, the run it
belongs to, a per-match sequence number (1, 2, 3, ... contiguous within a run), the match
clock, and the wall time it was emitted.

**An event type is declared once, here, in its class**: its fields, the schema version that
added it (``added_in``), the CSS class of its row on the page (``style``), and an example
payload where the bundled semi-final has none (``example``). How it reads in a ticker (the
terminal line and the page's badge and text) is its function in :mod:`events._facts`, which
:meth:`BaseEvent.describe` looks up, beside the facts every view words alike. Everything
else is built from :data:`EVENT_MODELS`: the codec, the wire examples, the docs, the AsyncAPI
document, the terminal and browser tickers. Only :data:`Event`, the static union the type
checker needs, repeats the list, at the end of this file; ``tests/test_event_registry.py``
fails when the two disagree. The reducer (events/_state.py) changes only for a type that
changes the state.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, ClassVar, Literal, get_args

from pydantic import AfterValidator, AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter

from events._clock import MatchClock, Period
from events._facts import GOAL_METHOD_NAMES, Said, describer, recalled_goal

if TYPE_CHECKING:
    from events._state import GoalRecord, MatchState

__all__ = [
    "EVENT_MODELS",
    "GOAL_METHOD_NAMES",
    "MAX_EVENT_ID",
    "MAX_MATCH_ID",
    "MAX_NAME",
    "MAX_TEAMS",
    "MAX_TEXT",
    "ON_TARGET",
    "SCHEMA_VERSION",
    "BaseEvent",
    "BodyPart",
    "Card",
    "ClippedId",
    "ClippedName",
    "ClippedText",
    "ClockTick",
    "Commentary",
    "Corner",
    "Event",
    "EventAdapter",
    "EventId",
    "Example",
    "Foul",
    "FullTime",
    "Goal",
    "GoalDisallowed",
    "GoalMethod",
    "KickOff",
    "MatchId",
    "MatchInfo",
    "Name",
    "Offside",
    "PenaltyAwarded",
    "PeriodEnd",
    "Possession",
    "ReplayStopped",
    "RunId",
    "Said",
    "Save",
    "Score",
    "ShootoutKick",
    "Shot",
    "ShotOutcome",
    "Substitution",
    "TeamCode",
    "TeamRef",
    "VarDecision",
    "VarReview",
    "VarReviewed",
]

#: A replay run's identity: its start, in milliseconds since the Unix epoch (0: unknown, as
#: in a 1.0 payload). Ordered: a later (re)start of a match has a larger run.
RunId = Annotated[
    int,
    Field(
        ge=0,
        description=(
            "The replay run this belongs to: the run's start, ms since the Unix epoch; a "
            "(re)started replay of a match has a larger one. 0 (or absent) in 1.0 payloads"
        ),
    ),
]

#: Version of the wire schema, ``MAJOR.MINOR``. See docs/wire-format.md for the rule.
SCHEMA_VERSION = "1.4"

#: The longest match id taken: one topic level (consumers cache no topic with a longer one).
MAX_MATCH_ID = 64

MatchId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_MATCH_ID,
        pattern=r"^[a-z0-9][a-z0-9_.-]*$",
        description="Lower-case slug; safe in a topic level (no '/', '+', '#')",
    ),
]

# ---------------------------------------------------------------- free text: how long it may be

#: The longest name a field holds: a team's or a player's. The longest in the repo's data is 38
#: characters (StatsBomb's "Arthur Henrique Ramos de Oliveira Melo"); FIFA's longest official
#: names are under 60.
MAX_NAME = 100
#: The longest free text a field holds: a match info field (competition, stage, venue, city),
#: a goal's detail, a reason. The longest in the repo's data is 66 characters (a goal's detail).
MAX_TEXT = 200
#: The longest id of an event a later one names (a goal's, a shot's, a foul's): StatsBomb's
#: UUIDs are 36 characters, the bundled matches' ids under 20.
MAX_EVENT_ID = 64


def _clipped_to(limit: int) -> AfterValidator:
    """Keeps the first ``limit`` characters: for the free text of released versions."""
    return AfterValidator(lambda text: text[:limit])


#: A name in a field new in 1.4: one past :data:`MAX_NAME` is refused (the message is invalid).
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME)]
#: A name in a field of a released version (1.0-1.3): a reader must accept what they allowed
#: (docs/wire-format.md, "Versioning": a tighter constraint is a major change), so a longer
#: one is read, and cut to :data:`MAX_NAME` characters: what is kept per match stays bounded
#: (a 60 KB team name made a tracked match cost 280 KB).
ClippedName = Annotated[str, _clipped_to(MAX_NAME)]
#: An event's id in a field new in 1.4 (``shot_id``, ``foul_id``): a longer one is refused.
EventId = Annotated[str, Field(min_length=1, max_length=MAX_EVENT_ID)]
#: ``goal_id`` (1.0): read at any length, as :data:`ClippedName`, and cut to
#: :data:`MAX_EVENT_ID` characters (the goal and its ``goal_disallowed`` are cut alike).
ClippedId = Annotated[str, _clipped_to(MAX_EVENT_ID)]
#: Free text in a field of a released version, cut to :data:`MAX_TEXT` characters (as
#: :data:`ClippedName`).
ClippedText = Annotated[str, _clipped_to(MAX_TEXT)]

TeamCode = Annotated[
    str, Field(pattern=r"^[A-Z0-9]{2,5}$", description="FIFA code or short club code: ARG, ENG")
]
#: Goals per team, keyed by team code.
Score = dict[TeamCode, Annotated[int, Field(ge=0)]]
#: The teams a map keyed by team code holds in a state (score, possession, shoot-out, stats):
#: a match has two. A map of a released version's field (1.0-1.3) is read at any size and
#: cut to them where kept (``events._state``); one 1.4 adds (``stats``) refuses more. Without
#: a bound, one 256 KiB payload's thousands of team codes were kept for the match.
MAX_TEAMS = 2
GoalMethod = Literal["open_play", "header", "penalty", "free_kick", "own_goal"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TeamRef(_Frozen):
    """A team as events name it."""

    code: TeamCode
    name: ClippedName = Field(min_length=1)


class MatchInfo(_Frozen):
    """What the match file says about the match: competition, stage, venue, kickoff (1.2)."""

    competition: ClippedText | None = Field(default=None, description="FIFA World Cup 2026")
    stage: ClippedText | None = Field(default=None, description="Semi-final, Group B, ...")
    venue: ClippedText | None = Field(default=None, description="Stadium: Mercedes-Benz Stadium")
    city: ClippedText | None = Field(default=None, description="The venue's city: Atlanta")
    date: dt.date | None = Field(default=None, description="Kickoff date, local to the venue")
    kickoff: AwareDatetime | None = Field(
        default=None,
        description="Kickoff, with the venue's UTC offset where known; absent when the time is",
    )


# ---------------------------------------------------------------- what a type declares


@dataclass(frozen=True, slots=True)
class Commentary:
    """How one event reads in a ticker: the terminal's line and the page's row.

    Built by :meth:`BaseEvent.commentary` from the type's :class:`Said` and ``style``, so the
    terminal ticker (``consumers.commentary``) and the page (which gets it in its server-sent
    frames) say the same thing without a second copy of the words.

    Attributes:
        minute: the minute column: ``55'``, ``90+2'``, ``PEN``.
        kind: the page's badge.
        text: the page's text.
        line: the terminal's line after the minute column.
        style: the CSS class of the page's row (matchcast/web/static/style.css).
    """

    minute: str
    kind: str
    text: str
    line: str
    style: str

    @property
    def terminal(self) -> str:
        """The terminal ticker's whole line: ``90+2'  GOAL  Lautaro Martínez (ARG)  2-1``."""
        return f"{self.minute:<7}{self.line}"

    def page(self) -> dict[str, str]:
        """The page's ticker row, as the server sends it: minute, kind, text and style."""
        return {"minute": self.minute, "kind": self.kind, "text": self.text, "style": self.style}


@dataclass(frozen=True, slots=True)
class Example:
    """An example of an event type the bundled semi-final does not have: its own fields, at a
    point of a made-up match (``matchcast.contract.wire_examples`` adds the envelope).

    Attributes:
        seq: its seq in the made-up match.
        clock: its place on the match clock.
        at: minutes of play after kickoff when it is due (breaks are added to it).
        fields: the fields of its type, beyond the envelope.
        earlier_run_ms: how much earlier its run started than the made-up match's (an event
            of an earlier run: negative).
    """

    seq: int
    clock: MatchClock
    at: float
    fields: Mapping[str, object]
    earlier_run_ms: int = 0


class BaseEvent(_Frozen):
    """The envelope every event carries."""

    #: The schema version that added the type; SCHEMA_VERSION is never below any type's.
    added_in: ClassVar[str] = "1.0"
    #: The CSS class of its row in the page's ticker; its ``type`` when None.
    style: ClassVar[str | None] = None
    #: Its example payload, for a type the bundled semi-final does not have.
    example: ClassVar[Example | None] = None
    #: It only counts in the match stats and never has a ticker row (a corner, a foul).
    counted_only: ClassVar[bool] = False

    schema_version: str = Field(
        default=SCHEMA_VERSION, pattern=r"^\d+\.\d+$", description="Wire schema MAJOR.MINOR"
    )
    match_id: MatchId
    run: RunId = 0
    seq: int = Field(
        ge=1, description="Per-match sequence number: 1, 2, 3, ... contiguous within a run"
    )
    clock: MatchClock
    emitted_at: AwareDatetime = Field(description="Wall time the replayer published it (UTC)")
    scheduled_at: AwareDatetime | None = Field(
        default=None,
        description="Wall time it was due; latency is measured from here, not from emitted_at",
    )

    @classmethod
    def event_type(cls) -> str:
        """The ``type`` this model carries on the wire."""
        return str(cls.model_fields["type"].default)

    def describe(self, state: MatchState) -> Said | None:
        """What the event says in a ticker, given the state after it; None: nothing (ticks).

        Its type's words are in :mod:`events._facts` (one place for how every fact reads)."""
        words = describer(self.event_type())
        return None if words is None else words(self, state)

    def commentary(self, state: MatchState) -> Commentary | None:
        """Its ticker row and line, given the state after it; None for a silent event."""
        said = self.describe(state)
        if said is None:
            return None
        return Commentary(
            minute=self.clock.label,
            kind=said.kind,
            text=said.text,
            line=said.line if said.line is not None else f"{said.kind}  {said.text}",
            style=self.style or self.event_type(),
        )


# ---------------------------------------------------------------- the event types


class KickOff(BaseEvent):
    """A period starts: the kickoff (period 1) or the restart after a break."""

    type: Literal["kick_off"] = "kick_off"
    home: TeamRef
    away: TeamRef
    info: MatchInfo | None = Field(
        default=None, description="Competition, stage, venue, kickoff, where known (1.2)"
    )


class ClockTick(BaseEvent):
    """The clock enters a new minute of play."""

    type: Literal["clock"] = "clock"


class PeriodEnd(BaseEvent):
    """A period ends: half time after period 1, and so on."""

    type: Literal["period_end"] = "period_end"
    score: Score


class Goal(BaseEvent):
    """A goal, with the score after it."""

    type: Literal["goal"] = "goal"
    goal_id: ClippedId = Field(min_length=1, description="Stable id; a GoalDisallowed names it")
    team: TeamCode = Field(description="The team credited with the goal")
    scorer: ClippedName = Field(min_length=1)
    method: GoalMethod | None = Field(default=None, description="How it was scored, where known")
    detail: ClippedText | None = Field(
        default=None, description="Free text: 'header from five yards'"
    )
    score: Score = Field(description="Score after the goal")
    shot_id: EventId | None = Field(
        default=None,
        description=(
            "The shot (outcome goal) it came from; none for an own goal, or where the feed "
            "carries no shots (1.4)"
        ),
    )

    @classmethod
    def recalled(cls, goal: GoalRecord) -> Commentary:
        """The row of a goal the page learns from a state snapshot (it joined after it)."""
        said = recalled_goal(goal)
        return Commentary(
            minute=goal.clock.label,
            kind=said.kind,
            text=said.text,
            line=said.line or f"{said.kind}  {said.text}",
            style=cls.style or cls.event_type(),
        )


class GoalDisallowed(BaseEvent):
    """An earlier goal is retracted after review; the score goes back."""

    example = Example(
        seq=101,
        clock=MatchClock.at(84),
        at=83.9,
        fields={
            "goal_id": "carter-83",
            "team": "RED",
            "reason": "offside in the build-up, after a VAR review",
            "score": {"RED": 1, "BLU": 1},
        },
    )

    type: Literal["goal_disallowed"] = "goal_disallowed"
    goal_id: ClippedId = Field(min_length=1, description="The goal_id of the retracted Goal")
    team: TeamCode
    reason: ClippedText | None = None
    score: Score = Field(description="Score after the retraction")


class Possession(BaseEvent):
    """Possession shares over a stretch of play, in percent."""

    type: Literal["possession"] = "possession"
    share: dict[TeamCode, Annotated[float, Field(ge=0, le=100)]]
    since: MatchClock | None = Field(default=None, description="Start of the stretch measured")


class Card(BaseEvent):
    """A booking or a sending-off."""

    example = Example(
        seq=81,
        clock=MatchClock.at(67),
        at=66.4,
        fields={"team": "BLU", "player": "Jonas Berg", "card": "yellow", "foul_id": "f-80"},
    )

    type: Literal["card"] = "card"
    team: TeamCode
    player: ClippedName = Field(min_length=1)
    card: Literal["yellow", "second_yellow", "red"]
    foul_id: EventId | None = Field(
        default=None, description="The foul it punished, where there is one (1.4)"
    )


class Substitution(BaseEvent):
    """One player replaces another."""

    example = Example(
        seq=88,
        clock=MatchClock.at(72),
        at=71.25,
        fields={"team": "RED", "player_off": "Luca Moretti", "player_on": "Sami Haddad"},
    )

    type: Literal["substitution"] = "substitution"
    team: TeamCode
    player_off: ClippedName = Field(min_length=1)
    player_on: ClippedName = Field(min_length=1)


class ShootoutKick(BaseEvent):
    """One kick of a penalty shoot-out, with the shoot-out score after it."""

    example = Example(
        seq=163,
        clock=MatchClock(period=Period.PENALTIES, minute=120),
        at=134.0,
        fields={
            "team": "BLU",
            "taker": "Jonas Berg",
            "scored": True,
            "shootout": {"RED": 2, "BLU": 3},
        },
    )

    type: Literal["shootout_kick"] = "shootout_kick"
    team: TeamCode
    taker: ClippedName = Field(min_length=1)
    scored: bool
    shootout: Score


class FullTime(BaseEvent):
    """The final whistle: the final score, and the winner where there is one."""

    type: Literal["full_time"] = "full_time"
    score: Score
    shootout: Score | None = None
    winner: TeamCode | None = Field(default=None, description="None for a draw")


class ReplayStopped(BaseEvent):
    """The replay stopped before full time (interrupted, or ended by an error); the clock is
    where it stopped. No event of its run follows (1.2)."""

    added_in = "1.2"
    #: An earlier run of the made-up match, stopped by Ctrl-C in the second half.
    example = Example(
        seq=64,
        clock=MatchClock.at(52),
        at=51.7,
        fields={"reason": "interrupted"},
        earlier_run_ms=-3_600_000,
    )

    type: Literal["replay_stopped"] = "replay_stopped"
    reason: Literal["interrupted", "error"] = Field(
        description="interrupted: Ctrl-C or SIGTERM; error: the replayer failed"
    )
    detail: ClippedText | None = Field(default=None, description="What failed, for a person")


#: What a VAR review checked: the four situations the video assistant referee may review.
VarReviewed = Literal["goal", "penalty", "red_card", "mistaken_identity"]
#: What the referee decided after the review.
VarDecision = Literal[
    "goal_awarded",
    "goal_disallowed",
    "penalty_awarded",
    "penalty_cancelled",
    "red_card",
    "red_card_cancelled",
    "no_change",
]


class VarReview(BaseEvent):
    """A video assistant referee (VAR) review of a goal, a penalty, a red card or a player's
    identity, and the referee's decision after it (1.3). It changes no score or card by itself:
    what the decision changes follows as an event of its own (a ``goal_disallowed``, ...)."""

    added_in = "1.3"
    example = Example(
        seq=100,
        clock=MatchClock.at(84),
        at=83.6,
        fields={
            "team": "RED",
            "player": "Tom Carter",
            "reviewed": "goal",
            "decision": "goal_disallowed",
            "reason": "offside in the build-up",
        },
    )

    type: Literal["var_review"] = "var_review"
    team: TeamCode = Field(description="The team whose goal, penalty or player is reviewed")
    player: ClippedName | None = Field(
        default=None, min_length=1, description="The player, where one"
    )
    reviewed: VarReviewed = Field(description="What the VAR checked")
    decision: VarDecision = Field(description="The referee's decision after the review")
    reason: ClippedText | None = Field(default=None, description="Why, for a person: 'offside'")


# ---------------------------------------------------------------- the full feed (1.4)

#: How a shot ended: in the net, saved by the keeper, wide or over, blocked by an outfield
#: player, or off the post or bar (and out).
ShotOutcome = Literal["goal", "saved", "off_target", "blocked", "woodwork"]
#: The outcomes that count as a shot on target: the keeper had to save it, or it went in.
ON_TARGET: frozenset[str] = frozenset({"goal", "saved"})
BodyPart = Literal["right_foot", "left_foot", "head", "other"]


class Shot(BaseEvent):
    """An attempt at goal (1.4). Every goal other than an own goal follows its shot, whose
    outcome is ``goal`` and which the goal names by ``shot_id``; a shoot-out kick is not a shot.
    The tickers show the shots that reach the keeper or the woodwork; the others only count."""

    added_in = "1.4"
    style = "shot"

    type: Literal["shot"] = "shot"
    shot_id: EventId = Field(description="Stable id; a save and a goal name it")
    team: TeamCode = Field(description="The shooting team")
    player: Name
    outcome: ShotOutcome
    xg: float = Field(ge=0, le=1, description="Expected goals: the chance it went in, 0-1")
    body_part: BodyPart | None = Field(default=None, description="What it was struck with")
    inside_box: bool | None = Field(default=None, description="Taken inside the penalty area")

    @property
    def on_target(self) -> bool:
        """It went in or the keeper saved it."""
        return self.outcome in ON_TARGET


class Save(BaseEvent):
    """The keeper stops a shot on target (1.4); names the shot by ``shot_id``."""

    added_in = "1.4"

    type: Literal["save"] = "save"
    team: TeamCode = Field(description="The keeper's team")
    keeper: Name
    shot_id: EventId = Field(description="The shot_id of the shot saved")


class Corner(BaseEvent):
    """A corner kick awarded to ``team`` (1.4). Counted, not shown in the tickers."""

    added_in = "1.4"
    counted_only = True

    type: Literal["corner"] = "corner"
    team: TeamCode = Field(description="The team taking the corner")
    player: Name | None = Field(default=None, description="The taker, where known")


class Foul(BaseEvent):
    """A foul given against ``team`` (1.4); a card for it names it by ``foul_id``. Counted,
    not shown in the tickers (its card is)."""

    added_in = "1.4"
    counted_only = True

    type: Literal["foul"] = "foul"
    foul_id: EventId = Field(description="Stable id; a card or a penalty names it")
    team: TeamCode = Field(description="The team that committed it")
    player: Name | None = Field(default=None, description="Who, where known")


class Offside(BaseEvent):
    """A player of ``team`` caught offside (1.4). Counted, not shown in the tickers."""

    added_in = "1.4"
    counted_only = True

    type: Literal["offside"] = "offside"
    team: TeamCode = Field(description="The team caught offside")
    player: Name | None = Field(default=None, description="Who, where known")


class PenaltyAwarded(BaseEvent):
    """A penalty kick given to ``team`` (1.4); its shot, and the goal if it goes in, follow.
    Names the foul it punishes, where the feed has it."""

    added_in = "1.4"
    example = Example(
        seq=95,
        clock=MatchClock.at(79),
        at=78.4,
        fields={"team": "RED", "player": "Tom Carter", "foul_id": "f-94"},
    )

    type: Literal["penalty_awarded"] = "penalty_awarded"
    team: TeamCode = Field(description="The team that takes it")
    player: Name | None = Field(default=None, description="The player fouled, where known")
    foul_id: EventId | None = Field(default=None, description="The foul it punishes")


# ---------------------------------------------------------------- the union

#: Every event type, for the type checker: add a new type's class here too (a test fails when
#: this and :data:`EVENT_MODELS` disagree). The order is the docs' and the AsyncAPI's.
Event = Annotated[
    KickOff
    | ClockTick
    | PeriodEnd
    | Goal
    | GoalDisallowed
    | Possession
    | Card
    | Substitution
    | ShootoutKick
    | FullTime
    | ReplayStopped
    | VarReview
    | Shot
    | Save
    | Corner
    | Foul
    | Offside
    | PenaltyAwarded,
    Field(discriminator="type"),
]

#: Every event model, in the order of :data:`Event`: the registry the codec, examples, docs
#: and tickers are built from.
EVENT_MODELS: tuple[type[BaseEvent], ...] = get_args(get_args(Event)[0])

#: Validates and serialises the :data:`Event` union; built once, at import.
EventAdapter: TypeAdapter[Event] = TypeAdapter(Event)
