"""The built-in scoreboard subscriber (score state), and the commentary line of each event."""

from __future__ import annotations

from collections.abc import Callable

from consumers._subscriber import Subscriber, on, on_state, on_stop
from consumers.printable import printable
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
    ReplayStopped,
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
            span = f" {event.since.label}-{c}" if event.since else ""  # the stretch it covers
            return f"{c:<7}POSSESSION{span}  {shares}"
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
        case ReplayStopped():
            why = "interrupted" if event.reason == "interrupted" else "replayer error"
            return f"{c:<7}REPLAY STOPPED ({why})  {state.scoreline}: not a final score"
    return None  # pragma: no cover


class Scoreboard(Subscriber):
    """Keeps the latest :class:`MatchState` of every match; says when a score or status changes.

    A plug-in like any other (``matchcast consume scoreboard``) and an example of the class
    form: it keeps state of its own (``states``) across handler calls.

    Args:
        echo: called with each line (a changed score, kick-off, half time, full time, and a
            final table on stop); ``print`` by default, None for quiet.
    """

    def __init__(self, echo: Callable[[str], None] | None = print) -> None:
        super().__init__("scoreboard")
        self.states: dict[str, MatchState] = {}
        self.lines: list[str] = []
        self._echo = echo

    @on()
    def _on_event(self, event: Event, state: MatchState) -> None:
        before = self.states.get(state.match_id)
        self.states[state.match_id] = state
        if before is None or before.score != state.score or before.status != state.status:
            self._say(_line(state))

    @on_state
    def _on_state(self, state: MatchState) -> None:
        self.states[state.match_id] = state
        self._say(f"{_line(state)}  (from snapshot, seq {state.last_seq})")

    @on_stop
    def _final(self) -> None:
        if self.states:
            self._say("scoreboard:")
            for state in self.states.values():
                self._say(f"  {_line(state)}")

    def _say(self, line: str) -> None:
        line = printable(line)  # names on the wire may hold terminal controls
        self.lines.append(line)
        if self._echo is not None:
            self._echo(line)


def _line(state: MatchState) -> str:
    return f"{state.match_id}  {state.display_clock:<9} {state.scoreline}"
