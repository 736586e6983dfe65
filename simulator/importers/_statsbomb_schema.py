"""StatsBomb Open Data records as the importer reads them (the fields it needs, nothing more).

Each model ignores fields it does not use, so the files validate as StatsBomb publishes them;
a field the importer does use and that is missing or of the wrong type is reported with the
record's place in the file (``events[5].minute: ...``).
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, TypeAdapter

__all__ = [
    "EVENTS",
    "LINEUPS",
    "MATCHES",
    "Event",
    "Lineup",
    "MatchRecord",
    "Named",
    "file_kind",
]


class _Raw(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class Named(_Raw):
    id: StrictInt | None = None
    name: str = Field(min_length=1)


class _Card(_Raw):
    card: Named | None = None
    penalty: bool = False


class _Shot(_Raw):
    outcome: Named
    type: Named | None = None
    body_part: Named | None = None
    statsbomb_xg: float | None = Field(default=None, ge=0, le=1)


class _Pass(_Raw):
    type: Named | None = None
    outcome: Named | None = None


class _Keeper(_Raw):
    type: Named | None = None


class _Substitution(_Raw):
    replacement: Named


class Event(_Raw):
    id: str | None = None
    index: StrictInt = Field(ge=1)
    period: StrictInt = Field(ge=1, le=5)
    minute: StrictInt = Field(ge=0, le=150)
    second: StrictInt = Field(ge=0, le=59)
    type: Named
    team: Named
    player: Named | None = None
    location: list[float] | None = None
    related_events: tuple[str, ...] = ()
    shot: _Shot | None = None
    pass_: _Pass | None = Field(default=None, alias="pass")
    goalkeeper: _Keeper | None = None
    foul_committed: _Card | None = None
    bad_behaviour: _Card | None = None
    substitution: _Substitution | None = None


class _LineupPlayer(_Raw):
    player_id: StrictInt
    player_name: str = Field(min_length=1)
    player_nickname: str | None = None


class Lineup(_Raw):
    team_id: StrictInt | None = None
    team_name: str = Field(min_length=1)
    lineup: list[_LineupPlayer]


class MatchRecord(_Raw):
    match_id: StrictInt
    match_date: dt.date
    kick_off: dt.time | None = None
    home_team: Annotated[dict[str, Any], Field(min_length=1)]
    away_team: Annotated[dict[str, Any], Field(min_length=1)]
    home_score: StrictInt | None = None
    away_score: StrictInt | None = None
    competition: dict[str, Any] | None = None
    season: dict[str, Any] | None = None
    competition_stage: dict[str, Any] | None = None
    stadium: dict[str, Any] | None = None


EVENTS = TypeAdapter(list[Event])
LINEUPS = TypeAdapter(list[Lineup])
MATCHES = TypeAdapter(list[MatchRecord])


def file_kind(data: Any) -> str | None:
    """``events``, ``lineups`` or ``matches`` by shape, None for anything else."""
    if not isinstance(data, list) or not data or not isinstance(data[0], dict):
        return None
    first = data[0]
    if {"type", "period", "minute"} <= set(first):
        return "events"
    if {"team_name", "lineup"} <= set(first):
        return "lineups"
    if {"match_id", "home_team", "away_team"} <= set(first):
        return "matches"
    return None
