"""The built-in ticker subscriber: one commentary line per event.

The smallest useful plug-in in the class form. A line looks like::

    90+2'  GOAL  Lautaro Martínez (ARG) (pen)  2-1
"""

from __future__ import annotations

from collections.abc import Callable

from consumers._bounded import trim_lines
from consumers._subscriber import Subscriber, on, on_state
from consumers.printable import printable
from consumers.scoreboard import KEEP_LINES, commentary
from events import Event, MatchState

__all__ = ["Ticker"]


class Ticker(Subscriber):
    """Prints one commentary line per event (clock ticks are silent).

    Args:
        echo: called with each line; ``print`` by default.
        match_ids: start each line with the match id, for a consumer of several matches.
    """

    def __init__(self, echo: Callable[[str], None] | None = print, match_ids: bool = False) -> None:
        super().__init__("ticker")
        self.lines: list[str] = []
        self._echo = echo
        self._match_ids = match_ids

    @on()
    def _on_event(self, event: Event, state: MatchState) -> None:
        line = commentary(event, state)
        if line is not None:
            self._say(state, line)

    @on_state
    def _on_state(self, state: MatchState) -> None:
        self._say(state, f"{'':<7}FROM SNAPSHOT  {state.scoreline}  ({state.display_clock})")

    def _say(self, state: MatchState, line: str) -> None:
        line = printable(line)  # names on the wire may hold terminal controls
        if self._match_ids:
            line = f"{state.match_id}  {line}"
        self.lines.append(line)
        trim_lines(self.lines, KEEP_LINES)  # the last lines, for a program to read back
        if self._echo is not None:
            self._echo(line)
