"""Turns matches into timed event streams and publishes them.

Depends on :mod:`events`; never on :mod:`consumers`.
"""

from simulator._matchfile import (
    CardIncident,
    Competition,
    DisallowedIncident,
    GoalIncident,
    Incident,
    Kickoff,
    Match,
    MatchResult,
    PeriodSpec,
    PossessionIncident,
    ShootoutKickSpec,
    Source,
    SubstitutionIncident,
    Team,
    Venue,
    load_match,
    parse_match,
)
from simulator._replay import (
    Clock,
    MonotonicClock,
    Replayer,
    ReplayOptions,
    ReplayReport,
    wall_offsets,
)
from simulator._sources import BUNDLED, DEFAULT_MATCH, RESOLVERS, bundled_path, resolve_matches
from simulator._timeline import Scheduled, expand, state_before

__all__ = [
    "BUNDLED",
    "DEFAULT_MATCH",
    "RESOLVERS",
    "CardIncident",
    "Clock",
    "Competition",
    "DisallowedIncident",
    "GoalIncident",
    "Incident",
    "Kickoff",
    "Match",
    "MatchResult",
    "MonotonicClock",
    "PeriodSpec",
    "PossessionIncident",
    "ReplayOptions",
    "ReplayReport",
    "Replayer",
    "Scheduled",
    "ShootoutKickSpec",
    "Source",
    "SubstitutionIncident",
    "Team",
    "Venue",
    "bundled_path",
    "expand",
    "load_match",
    "parse_match",
    "resolve_matches",
    "state_before",
    "wall_offsets",
]
