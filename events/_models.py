"""The events on the wire: one frozen pydantic model per kind, a tagged union on ``type``.

Every event carries the envelope of :class:`BaseEvent`: schema version, match id, the run it
belongs to, a per-match sequence number (1, 2, 3, ... contiguous within a run), the match
clock, and the wall time it was emitted.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter

from events._clock import MatchClock

__all__ = [
    "SCHEMA_VERSION",
    "BaseEvent",
    "Card",
    "ClockTick",
    "Event",
    "EventAdapter",
    "FullTime",
    "Goal",
    "GoalDisallowed",
    "GoalMethod",
    "KickOff",
    "MatchId",
    "PeriodEnd",
    "Possession",
    "RunId",
    "Score",
    "ShootoutKick",
    "Substitution",
    "TeamCode",
    "TeamRef",
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
SCHEMA_VERSION = "1.2"

MatchId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=64,
        pattern=r"^[a-z0-9][a-z0-9_.-]*$",
        description="Lower-case slug; safe in a topic level (no '/', '+', '#')",
    ),
]
TeamCode = Annotated[
    str, Field(pattern=r"^[A-Z0-9]{2,5}$", description="FIFA code or short club code: ARG, ENG")
]
#: Goals per team, keyed by team code.
Score = dict[TeamCode, Annotated[int, Field(ge=0)]]
GoalMethod = Literal["open_play", "header", "penalty", "free_kick", "own_goal"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TeamRef(_Frozen):
    """A team as events name it."""

    code: TeamCode
    name: str = Field(min_length=1)


class BaseEvent(_Frozen):
    """The envelope every event carries."""

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


class KickOff(BaseEvent):
    """A period starts: the kickoff (period 1) or the restart after a break."""

    type: Literal["kick_off"] = "kick_off"
    home: TeamRef
    away: TeamRef


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
    goal_id: str = Field(min_length=1, description="Stable id; a GoalDisallowed names it")
    team: TeamCode = Field(description="The team credited with the goal")
    scorer: str = Field(min_length=1)
    method: GoalMethod | None = Field(default=None, description="How it was scored, where known")
    detail: str | None = Field(default=None, description="Free text: 'header from five yards'")
    score: Score = Field(description="Score after the goal")


class GoalDisallowed(BaseEvent):
    """An earlier goal is retracted after review; the score goes back."""

    type: Literal["goal_disallowed"] = "goal_disallowed"
    goal_id: str = Field(min_length=1, description="The goal_id of the retracted Goal")
    team: TeamCode
    reason: str | None = None
    score: Score = Field(description="Score after the retraction")


class Possession(BaseEvent):
    """Possession shares over a stretch of play, in percent."""

    type: Literal["possession"] = "possession"
    share: dict[TeamCode, Annotated[float, Field(ge=0, le=100)]]
    since: MatchClock | None = Field(default=None, description="Start of the stretch measured")


class Card(BaseEvent):
    """A booking or a sending-off."""

    type: Literal["card"] = "card"
    team: TeamCode
    player: str = Field(min_length=1)
    card: Literal["yellow", "second_yellow", "red"]


class Substitution(BaseEvent):
    """One player replaces another."""

    type: Literal["substitution"] = "substitution"
    team: TeamCode
    player_off: str = Field(min_length=1)
    player_on: str = Field(min_length=1)


class ShootoutKick(BaseEvent):
    """One kick of a penalty shoot-out, with the shoot-out score after it."""

    type: Literal["shootout_kick"] = "shootout_kick"
    team: TeamCode
    taker: str = Field(min_length=1)
    scored: bool
    shootout: Score


class FullTime(BaseEvent):
    """The final whistle: the final score, and the winner where there is one."""

    type: Literal["full_time"] = "full_time"
    score: Score
    shootout: Score | None = None
    winner: TeamCode | None = Field(default=None, description="None for a draw")


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
    | FullTime,
    Field(discriminator="type"),
]

#: Validates and serialises the :data:`Event` union; built once, at import.
EventAdapter: TypeAdapter[Event] = TypeAdapter(Event)
