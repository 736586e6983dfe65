"""What the page shows of a state and an event, computed here and sent in the SSE frames.

The page's JavaScript draws; it does not know football. The words of each event's ticker row
come from its type (``events``: the model's ``describe`` and ``style``, the same words the
terminal ticker prints), and the clock, the status, the goals' labels and the span of the
controls' timeline from the state, here. So a new event type needs nothing in ``static/app.js``,
and no period's length is written in ``static/control.js``.
"""

from __future__ import annotations

from events import (
    Event,
    Goal,
    GoalRecord,
    MatchClock,
    MatchState,
    MatchStatus,
    Period,
    Shot,
    facts,
    stats_rows,
)

__all__ = [
    "STATUS_LABELS",
    "page_clock",
    "page_timeline",
    "page_view",
    "ticker_row",
    "timeline_x",
    "xg_point",
]

#: How the page's status pill names each status.
STATUS_LABELS: dict[MatchStatus, str] = {
    "scheduled": "Not started",
    "live": "Live",
    "half_time": "Half time",
    "break": "Break",
    "finished": "Full time",
    "stopped": "Replay stopped",
}

_JOINED_NOTES: dict[MatchStatus, str] = {
    "finished": "final score",
    "stopped": "the replay stopped here",
}


def page_clock(state: MatchState) -> str:
    """The clock beside the status: ``2H 55'``, ``HT``, ``FT``; where a replay stopped,
    ``at 2H 52'`` (the pill already says it stopped)."""
    if state.status == "stopped":
        clock = state.clock
        return f"at {clock.period.short} {clock.label}" if clock else "--"
    return state.display_clock


def ticker_row(event: Event, state: MatchState) -> dict[str, str] | None:
    """The page's ticker row of ``event`` (minute, kind, text, style); None for a silent one."""
    said = event.commentary(state)
    return None if said is None else said.page()


#: The periods the timeline always spans, and those it spans once the match reaches them.
_REGULATION = (Period.FIRST_HALF, Period.SECOND_HALF)
_EXTRA_TIME = (Period.EXTRA_TIME_FIRST, Period.EXTRA_TIME_SECOND)


def page_timeline(state: MatchState) -> dict[str, int]:
    """The span of the controls' timeline (``web --control``), in regulation minutes: the first
    of the first half to the last of the second (1 to 90), or of extra time once the match is in
    it (to 120). The page places each clock and goal on it and seeks to the minute clicked."""
    reached = state.clock.period if state.clock else Period.FIRST_HALF
    periods = _REGULATION + (_EXTRA_TIME if reached >= Period.EXTRA_TIME_FIRST else ())
    return {"first": periods[0].first_minute, "last": periods[-1].last_minute}


def timeline_x(clock: MatchClock) -> float:
    """Where ``clock`` sits on the page's timelines, in regulation minutes: its minute, and a
    tenth of a minute past the period's end for each added one (at most nine), so ``45+3'``
    is 45.3, before the second half's 46."""
    return clock.minute + min(clock.added, 9) / 10


def xg_point(event: Event, state: MatchState) -> dict[str, object] | None:
    """A point of the expected-goals timeline: a shot, and its team's xg after it; None for
    any other event."""
    if not isinstance(event, Shot) or event.team not in state.stats:
        return None
    return {
        "x": timeline_x(event.clock),
        "minute": event.clock.label,
        "team": event.team,
        "xg": state.stats[event.team].xg,
        "goal": event.outcome == "goal",
    }


def _goal(goal: GoalRecord) -> dict[str, object]:
    return {
        "how": facts.goal_how(goal.method, goal.detail),
        "tag": facts.goal_tag(goal.method),
        "x": timeline_x(goal.clock),
    }


def _joined(state: MatchState, clock: str) -> list[dict[str, str]]:
    """The rows a page that joins mid-match starts its ticker with: the goals, then where it
    joined."""
    rows = [Goal.recalled(g).page() for g in state.goals]
    if state.status != "scheduled":
        note = _JOINED_NOTES.get(state.status, "following live from here")
        rows.append(
            {
                "minute": clock.rsplit(" ", maxsplit=1)[-1],
                "kind": "JOINED",
                "text": f"{facts.page_score(state)}: {note}",
                "style": "joined",
            }
        )
    return rows


def page_view(state: MatchState) -> dict[str, object]:
    """What the page shows of ``state`` beyond its fields: the clock, the status label, each
    goal's ``how``, ``tag`` and place on the timelines (``x``, in ``state.goals`` order), the
    ticker of a page joining, the span of the timelines (:func:`page_timeline`), and the
    stats panel's rows (empty without stats: a lean feed)."""
    clock = page_clock(state)
    return {
        "clock": clock,
        "status": STATUS_LABELS.get(state.status, state.status),
        "goals": [_goal(g) for g in state.goals],
        "joined": _joined(state, clock),
        "timeline": page_timeline(state),
        "clock_x": timeline_x(state.clock) if state.clock else None,
        "stats": stats_rows(state),
    }
