"""Turns matches into timed event streams and publishes them.

Named for simulation, it holds all that makes a stream of a match: the match file and every
input file's one boundary (``_files.py``), the importers, the seeded generator, the timeline,
recordings, chaos, and mostly the replayer that publishes the stream (``_replay.py`` and the
modules its docstring names). The name stays because users import it (``from simulator import
Replayer``); docs/architecture.md maps its modules.

Depends on :mod:`events`; never on :mod:`consumers`.
"""

from simulator import _matchfile
from simulator._chaos import ChaosStream, Emission, Fault, apply_chaos
from simulator._chaos_spec import FAULTS, ChaosSpec, ChaosSpecError
from simulator._feed import Feed, in_feed, lean_match
from simulator._files import (
    IMPORT_FILE,
    LOAD_REPORT,
    MATCH_FILE,
    RECORDING,
    FileKind,
    input_lines,
    load_input,
    parse_json,
    parse_yaml,
    read_input,
)
from simulator._generate import BASE_RATE, expected_goals, simulate_match
from simulator._matchfile import *  # noqa: F403 - the match file and every kind of incident
from simulator._recording import RECORDING_SUFFIX, Recording, is_recording, load_recording
from simulator._replay import (
    MAX_BREAK_SECONDS,
    MAX_RESEND_WINDOW_S,
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
from simulator._states import ReplayStates
from simulator._timeline import Scheduled, expand, state_before
from simulator._writer import MatchFormat, dump_match, write_match

__all__ = [
    "BASE_RATE",
    "BUNDLED",
    "DEFAULT_MATCH",
    "FAULTS",
    "IMPORT_FILE",
    "LOAD_REPORT",
    "MATCH_FILE",
    "MAX_BREAK_SECONDS",
    "MAX_RESEND_WINDOW_S",
    "RECORDING",
    "RECORDING_SUFFIX",
    "RESEND_WINDOW_S",
    "RESOLVERS",
    "ChaosSpec",
    "ChaosSpecError",
    "ChaosStream",
    "Clock",
    "Emission",
    "Fault",
    "Feed",
    "FileKind",
    "MatchFormat",
    "MonotonicClock",
    "Recording",
    "ReplayOptions",
    "ReplayReport",
    "ReplayStates",
    "Replayer",
    "Scheduled",
    "apply_chaos",
    "bundled_path",
    "dump_match",
    "expand",
    "expected_goals",
    "in_feed",
    "input_lines",
    "is_recording",
    "kickoff_delays",
    "lean_match",
    "load_input",
    "load_recording",
    "matches_on",
    "new_run",
    "parse_json",
    "parse_yaml",
    "read_input",
    "resolve_matches",
    "resolve_sources",
    "select_matches",
    "simulate_match",
    "state_before",
    "wall_offsets",
    "write_match",
]
# The match file's names, every kind of incident among them, with no second list here.
__all__ += _matchfile.__all__
