"""Which events a replay sends (``--feed full|lean``): the full feed is a match file as it is,
the lean one the same match without the events wire 1.4 added (:func:`lean_match`).
"""

from __future__ import annotations

from enum import StrEnum

from simulator._matchfile import CardIncident, GoalIncident, Incident, Match

__all__ = ["Feed", "in_feed", "lean_match"]


class Feed(StrEnum):
    """Which events a replay sends (``--feed``): ``full``, every event of wire 1.4 (shots,
    saves, corners, fouls, offsides, penalties awarded, as far as the match has them), or
    ``lean``, the events of wire 1.3."""

    full = "full"
    lean = "lean"


def in_feed(match: Match, feed: Feed | str) -> Match:
    """``match`` as ``feed`` carries it: itself for the full feed, :func:`lean_match` for the
    lean one."""
    return lean_match(match) if Feed(feed) is Feed.lean else match


def lean_match(match: Match) -> Match:
    """``match`` as the lean feed carries it (``--feed lean``): the events of wire 1.3, no
    shots, saves, corners, fouls, offsides or penalties awarded, no ``shot`` on a goal and no
    ``foul`` on a card. The score, the cards and the rest of the match are unchanged."""
    timeline: list[Incident] = []
    for inc in match.timeline:
        if inc.full_feed:
            continue
        if isinstance(inc, GoalIncident):
            timeline.append(inc.model_copy(update={"shot": None}))
        elif isinstance(inc, CardIncident):
            timeline.append(inc.model_copy(update={"foul": None}))
        else:
            timeline.append(inc)
    return match.model_copy(update={"timeline": tuple(timeline)})
