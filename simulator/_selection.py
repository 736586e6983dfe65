"""Choosing matches from a set, and starting a match day on its real kickoff times.

A selector names matches of a tournament the way people do: ``final``, ``third-place``,
``semi-finals``, ``round-of-16``, ``group-a``, ``matchday-3``, a pair of teams ``ARG-FRA``
(either order), a date ``2022-12-18``, or a match id.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence

from events import MatchFileError
from simulator._matchfile import Match
from simulator.importers._common import slug

__all__ = ["kickoff_delays", "matches_on", "select_matches"]

_ALIASES = {
    "third-place": "match-for-third-place",
    "3rd-place": "match-for-third-place",
    "semifinals": "semi-finals",
    "semi-final": "semi-finals",
    "quarterfinals": "quarter-finals",
    "quarter-final": "quarter-finals",
    "last-16": "round-of-16",
    "r16": "round-of-16",
}


def _stages(match: Match) -> set[str]:
    stage = match.competition.stage or ""
    return {slug(part) for part in stage.split(",") if part.strip()}


def select_matches(matches: Sequence[Match], selector: str, *, where: str) -> list[Match]:
    """The matches ``selector`` names (all of them for an empty selector or ``all``).

    Raises:
        MatchFileError: naming ``where`` when nothing matches.
    """
    wanted = selector.strip().lower()
    if wanted in ("", "all"):
        return list(matches)
    found = [m for m in matches if m.match_id == wanted]
    if not found and re.fullmatch(r"\d{4}-\d{2}-\d{2}", wanted):
        found = matches_on(matches, dt.date.fromisoformat(wanted))
    if not found and re.fullmatch(r"[a-z0-9]{2,5}-[a-z0-9]{2,5}", wanted):
        pair = set(wanted.upper().split("-"))
        found = [m for m in matches if {m.home.code, m.away.code} == pair]
    if not found:
        stage = _ALIASES.get(slug(wanted), slug(wanted))
        found = [m for m in matches if stage in _stages(m)]
    if not found:
        raise MatchFileError(
            where,
            [
                f"no match is {selector!r}; name a stage (final, third-place, semi-finals, "
                "quarter-finals, round-of-16, group-a, matchday-1), two teams (ARG-FRA), "
                "a date (2022-12-18) or a match id"
            ],
        )
    return found


def matches_on(matches: Sequence[Match], day: dt.date) -> list[Match]:
    """The matches kicking off on ``day`` (their local date), in kickoff order."""
    return sorted((m for m in matches if m.kickoff.date == day), key=lambda m: m.kickoff.utc())


def kickoff_delays(matches: Sequence[Match], speed: float | None) -> list[float]:
    """Wall seconds from the first kickoff to each match's, divided by ``speed``.

    A match kicking off three hours after the first starts ``3 h / speed`` later; everything
    starts at once at maximum speed (``None``).
    """
    if not matches:
        return []
    first = min(m.kickoff.utc() for m in matches)
    if speed is None:
        return [0.0] * len(matches)
    return [(m.kickoff.utc() - first).total_seconds() / speed for m in matches]
