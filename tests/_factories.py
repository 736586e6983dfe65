"""Small builders for events in tests."""

from __future__ import annotations

import datetime as dt
from typing import Any

from events import ClockTick, Goal, KickOff, MatchClock, TeamRef

T0 = dt.datetime(2026, 7, 15, 19, 0, tzinfo=dt.UTC)
#: Events of the bundled semi-final's replay (the full feed); its lean feed has 106.
SEMIFINAL_EVENTS = 191
SEMIFINAL_LEAN_EVENTS = 106
ARG = TeamRef(code="ARG", name="Argentina")
ENG = TeamRef(code="ENG", name="England")


def kickoff(seq: int = 1, match_id: str = "m1") -> KickOff:
    return KickOff(
        match_id=match_id, seq=seq, clock=MatchClock.at(1), emitted_at=T0, home=ARG, away=ENG
    )


def tick(seq: int, minute: int, match_id: str = "m1", added: int = 0) -> ClockTick:
    return ClockTick(match_id=match_id, seq=seq, clock=MatchClock.at(minute, added), emitted_at=T0)


def goal(
    seq: int, minute: int, team: str, score: dict[str, int], match_id: str = "m1", **kw: Any
) -> Goal:
    return Goal(
        match_id=match_id,
        seq=seq,
        clock=MatchClock.at(minute, kw.pop("added", 0)),
        emitted_at=T0,
        goal_id=kw.pop("goal_id", f"g{seq}"),
        team=team,
        scorer=kw.pop("scorer", "Someone"),
        score=score,
        **kw,
    )
