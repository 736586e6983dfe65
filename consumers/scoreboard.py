"""The built-in scoreboard subscriber (score state), and the terminal's line of an event."""

from __future__ import annotations

from collections.abc import Callable

from consumers._bounded import BoundedMatches, trim_lines
from consumers._runner import MAX_MATCHES
from consumers._subscriber import Subscriber, on, on_state, on_stop
from consumers.printable import printable
from events import Event, MatchState

__all__ = ["KEEP_LINES", "Scoreboard", "commentary"]

#: Lines a built-in view keeps for a program to read back (``lines``); older ones go.
KEEP_LINES = 10_000


def commentary(event: Event, state: MatchState) -> str | None:
    """One line for a ticker, e.g. ``90+2'  GOAL  Lautaro Martínez (ARG)  2-1``; None for ticks.

    The words are the event type's own (``events``: each model's ``describe``), so the terminal
    and the page say the same thing.
    """
    said = event.commentary(state)
    return None if said is None else said.terminal


class Scoreboard(Subscriber):
    """Keeps the latest :class:`MatchState` of every match; says when a score or status changes.

    A plug-in like any other (``matchcast consume scoreboard``) and an example of the class
    form: it keeps state of its own (``states``) across handler calls.

    Args:
        echo: called with each line (a changed score, kick-off, half time, full time, and a
            final table on stop); ``print`` by default, None for quiet.
        max_matches: states kept at most, the least recently changed forgotten first (as the
            runner evicts its matches; ``match.forgotten``).

    Attributes:
        states: the latest state by match id.
        lines: the last lines said (at most :data:`KEEP_LINES` to :data:`KEEP_LINES` x 2).
    """

    def __init__(
        self, echo: Callable[[str], None] | None = print, *, max_matches: int = MAX_MATCHES
    ) -> None:
        super().__init__("scoreboard")
        self.states: BoundedMatches[MatchState] = BoundedMatches(max_matches, "scoreboard")
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
        trim_lines(self.lines, KEEP_LINES)
        if self._echo is not None:
            self._echo(line)


def _line(state: MatchState) -> str:
    return f"{state.match_id}  {state.display_clock:<9} {state.scoreline}"
