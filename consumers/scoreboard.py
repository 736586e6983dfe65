"""Built-in subscribers: the scoreboard (score state) and the commentary line of each event."""

from __future__ import annotations

from collections.abc import Callable

from consumers._subscriber import Subscriber
from events import (
    Card,
    ClockTick,
    Event,
    FullTime,
    Goal,
    GoalDisallowed,
    KickOff,
    MatchState,
    Period,
    PeriodEnd,
    Possession,
    ShootoutKick,
    Substitution,
)

__all__ = ["Scoreboard", "commentary"]


def _score(state: MatchState) -> str:
    codes = [t.code for t in (state.home, state.away) if t] or list(state.score)
    return "-".join(str(state.score.get(c, 0)) for c in codes)


def commentary(event: Event, state: MatchState) -> str | None:
    """One line for a ticker, e.g. ``90+2'  GOAL  Lautaro Martínez (ARG)  2-1``; None for ticks."""
    c = event.clock.label
    match event:
        case KickOff():
            if event.clock.period is Period.FIRST_HALF:
                return f"{c:<7}KICK-OFF  {event.home.name} v {event.away.name}"
            return f"{c:<7}KICK-OFF  {event.clock.period.short} under way"
        case ClockTick():
            return None
        case PeriodEnd():
            what = (
                "HALF TIME"
                if event.clock.period is Period.FIRST_HALF
                else f"END OF {event.clock.period.short}"
            )
            return f"{c:<7}{what}  {state.scoreline}"
        case Goal():
            how = {"penalty": " (pen)", "own_goal": " (o.g.)"}.get(event.method or "", "")
            return f"{c:<7}GOAL  {event.scorer} ({event.team}){how}  {_score(state)}"
        case GoalDisallowed():
            why = f": {event.reason}" if event.reason else ""
            return f"{c:<7}NO GOAL  {event.team} goal ruled out{why}  {_score(state)}"
        case Possession():
            shares = "  ".join(f"{t} {v:.0f}%" for t, v in event.share.items())
            since = f" since {event.since.label}" if event.since else ""
            return f"{c:<7}POSSESSION{since}  {shares}"
        case Card():
            return (
                f"{c:<7}{event.card.replace('_', ' ').upper()} CARD  {event.player} ({event.team})"
            )
        case Substitution():
            return f"{c:<7}SUB  {event.team}: {event.player_on} on, {event.player_off} off"
        case ShootoutKick():
            result = "scores" if event.scored else "misses"
            pens = "-".join(str(v) for v in event.shootout.values())
            return f"{'PEN':<7}{event.taker} ({event.team}) {result}  {pens}"
        case FullTime():
            return f"{c:<7}FULL TIME  {state.scoreline}"
    return None  # pragma: no cover


class Scoreboard:
    """Keeps the latest :class:`MatchState` of every match and reports score changes.

    ``Scoreboard().subscriber`` is a plug-in like any other; ``states`` holds the scoreboard.

    Args:
        echo: called with one line per notable event (``print`` to show them; None for quiet).
    """

    def __init__(self, echo: Callable[[str], None] | None = None) -> None:
        self.states: dict[str, MatchState] = {}
        self.lines: list[str] = []
        self._echo = echo
        self.subscriber = Subscriber("scoreboard")
        self.subscriber.on()(self._on_event)
        self.subscriber.on_state(self._on_state)

    def _on_event(self, event: Event, state: MatchState) -> None:
        self.states[state.match_id] = state
        line = commentary(event, state)
        if line is not None:
            self.lines.append(line)
            if self._echo:
                self._echo(line)

    def _on_state(self, state: MatchState) -> None:
        self.states[state.match_id] = state
        if self._echo:
            self._echo(f"{'':<7}JOINED  {state.scoreline}  ({state.display_clock})")
