"""Turns matches into timed event streams and publishes them.

Depends on :mod:`events`; never on :mod:`consumers`.
"""

from simulator._generate import BASE_RATE, expected_goals, simulate_match
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
    RESEND_WINDOW_S,
    Clock,
    MonotonicClock,
    Replayer,
    ReplayOptions,
    ReplayReport,
    new_run,
    wall_offsets,
)
from simulator._selection import kickoff_delays, matches_on, select_matches
from simulator._sources import (
    BUNDLED,
    DEFAULT_MATCH,
    RESOLVERS,
    bundled_path,
    resolve_matches,
    resolve_sources,
)
from simulator._timeline import Scheduled, expand, state_before
from simulator._writer import MatchFormat, dump_match, write_match

__all__ = [
    "BASE_RATE",
    "BUNDLED",
    "DEFAULT_MATCH",
    "RECORDING_SUFFIX",
    "RESEND_WINDOW_S",
    "RESOLVERS",
    "CardIncident",
    "Clock",
    "Competition",
    "DisallowedIncident",
    "GoalIncident",
    "Incident",
    "Kickoff",
    "Match",
    "MatchFormat",
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
    "dump_match",
    "expand",
    "expected_goals",
    "is_recording",
    "kickoff_delays",
    "load_match",
    "load_recording",
    "matches_on",
    "new_run",
    "parse_match",
    "resolve_matches",
    "resolve_sources",
    "select_matches",
    "simulate_match",
    "state_before",
    "wall_offsets",
    "write_match",
]
