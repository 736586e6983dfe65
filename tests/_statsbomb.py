"""StatsBomb's excerpt of Barcelona 2-2 Girona (tests/fixtures/statsbomb), imported: the
importer's tests and the simulator's spread check both measure against it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from events import MatchState, replay_state
from simulator import Match, expand
from simulator.importers import import_statsbomb

__all__ = ["DATE", "EVENTS", "FIXTURES", "LINEUPS", "final_state", "import_sample"]

FIXTURES = Path(__file__).parent / "fixtures" / "statsbomb"
EVENTS = FIXTURES / "15986_events.json"
LINEUPS = FIXTURES / "15986_lineups.json"
#: The match's date, which the events and lineups files do not give.
DATE = dt.date(2018, 9, 23)


def import_sample(*paths: Path, **kwargs: Any) -> Match:
    """The excerpt imported (or ``paths`` instead of its events and lineups), on its date
    unless ``kwargs`` says otherwise."""
    return import_statsbomb(list(paths) or [EVENTS, LINEUPS], **({"date": DATE} | kwargs))


def final_state(match: Match) -> MatchState:
    """The state at the end of the match's replay."""
    return replay_state(match.match_id, [s.event for s in expand(match)])
