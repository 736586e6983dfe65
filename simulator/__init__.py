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
from simulator._recording import RECORDING_SUFFIX, Recording, is_recording, load_recording
from simulator._replay import (
    Clock,
    MonotonicClock,
    Replayer,
    ReplayOptions,
    ReplayReport,
    wall_offsets,
)
from simulator._sources import (
    BUNDLED,
    DEFAULT_MATCH,
    RESOLVERS,
    bundled_path,
    resolve_matches,
    resolve_sources,
)
from simulator._timeline import Scheduled, expand, state_before

__all__ = [
    "BUNDLED",
    "DEFAULT_MATCH",
    "RECORDING_SUFFIX",
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
    "Recording",
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
    "is_recording",
    "load_match",
    "load_recording",
    "parse_match",
    "resolve_matches",
    "resolve_sources",
    "state_before",
    "wall_offsets",
]
