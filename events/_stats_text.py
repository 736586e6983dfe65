"""The live match stats as the views say them: the page's panel and ``watch``'s line.

Small functions of a state, no I/O: the page (``matchcast/web/_view.py``) and the terminal
(``consumers/terminal.py``) both say the stats through them, home team first.
"""

from __future__ import annotations

from events._facts import xg_text
from events._state import MatchState, TeamStats

__all__ = ["STAT_NAMES", "stat_text", "stats_line", "stats_rows"]

#: The stats the views show, in order: field of :class:`TeamStats`, the panel's label, the
#: line's word.
STAT_NAMES: tuple[tuple[str, str, str], ...] = (
    ("shots", "Shots", "shots"),
    ("on_target", "Shots on target", "on target"),
    ("xg", "Expected goals (xG)", "xG"),
    ("corners", "Corners", "corners"),
    ("fouls", "Fouls", "fouls"),
    ("offsides", "Offsides", "offsides"),
)


def stat_text(stats: TeamStats, field: str) -> str:
    """One team's figure: ``22``, or expected goals to two decimals, ``2.16``."""
    value = getattr(stats, field)
    return xg_text(value) if field == "xg" else str(value)


def _teams(state: MatchState) -> tuple[TeamStats, TeamStats] | None:
    """Home's and away's stats, None while the state has no stats (a lean feed) or no teams."""
    if not state.stats or state.home is None or state.away is None:
        return None
    home = state.stats.get(state.home.code, TeamStats())
    return home, state.stats.get(state.away.code, TeamStats())


def stats_rows(state: MatchState) -> list[dict[str, object]]:
    """The page's stats panel: a row per stat, each team's text and value (for its bar);
    empty without stats."""
    teams = _teams(state)
    if teams is None:
        return []
    home, away = teams
    return [
        {
            "key": field,
            "label": label,
            "home": stat_text(home, field),
            "away": stat_text(away, field),
            "home_value": getattr(home, field),
            "away_value": getattr(away, field),
        }
        for field, label, _ in STAT_NAMES
    ]


def stats_line(state: MatchState) -> str | None:
    """``watch``'s compact line, home first: ``shots 22-8 · on target 8-3 · xG 2.16-0.72 ·
    corners 11-3 · fouls 12-16 · offsides 3-2``; None without stats."""
    teams = _teams(state)
    if teams is None:
        return None
    home, away = teams
    return " · ".join(
        f"{word} {stat_text(home, field)}-{stat_text(away, field)}" for field, _, word in STAT_NAMES
    )
