"""The live terminal view: a scoreboard per match and a ticker of what happened.

On a terminal it redraws in place with rich; elsewhere (a pipe, a log file) it prints one
commentary line per event, so ``matchcast watch | tee`` stays readable.
"""

from __future__ import annotations

from collections import deque

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from consumers._subscriber import Subscriber
from consumers.printable import printable
from consumers.scoreboard import Scoreboard, commentary
from events import Event, MatchState

__all__ = ["TerminalView"]


class TerminalView:
    """A subscriber that draws the scoreboard and ticker.

    Use as a context manager around the run so the live display is restored on exit.
    """

    def __init__(self, console: Console | None = None, *, ticker_lines: int = 12) -> None:
        self.console = console or Console()
        self.board = Scoreboard(echo=None)
        self._ticker: deque[str] = deque(maxlen=ticker_lines)
        self._live: Live | None = None
        self.subscriber = Subscriber("terminal")
        self.subscriber.on()(self._on_event)
        self.subscriber.on_state(self._on_state)

    @property
    def interactive(self) -> bool:
        """True when redrawing in place (a terminal), False when printing lines."""
        return self.console.is_terminal

    def __enter__(self) -> TerminalView:
        if self.interactive:
            self._live = Live(
                self._render(), console=self.console, refresh_per_second=8, transient=False
            )
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.update(self._render())
            self._live.__exit__(None, None, None)
            self._live = None

    def _on_event(self, event: Event, state: MatchState) -> None:
        self.board.states[state.match_id] = state
        line = commentary(event, state)
        if line is not None:
            line = printable(line)  # names on the wire may hold terminal controls
            self._ticker.append(line)
            if not self.interactive:
                self.console.print(line, highlight=False, markup=False)
        self._refresh()

    def _on_state(self, state: MatchState) -> None:
        self.board.states[state.match_id] = state
        line = printable(f"{'':<7}JOINED  {state.scoreline}  ({state.display_clock})")
        self._ticker.append(line)
        if not self.interactive:
            self.console.print(line, highlight=False, markup=False)
        self._refresh()

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._render())

    def _render(self) -> RenderableType:
        boards: list[RenderableType] = []
        for state in self.board.states.values():
            boards.append(_board(state))
        if not boards:
            boards.append(Text("waiting for a match...", style="dim"))
        ticker = Text("\n".join(self._ticker) or "-", no_wrap=True)
        return Group(*boards, Panel(ticker, title="ticker", border_style="dim"))


def _board(state: MatchState) -> Panel:
    home = printable(state.home.name) if state.home else "?"
    away = printable(state.away.name) if state.away else "?"
    hc = state.home.code if state.home else ""
    ac = state.away.code if state.away else ""
    table = Table.grid(expand=True, padding=(0, 2))
    table.add_column(justify="right", ratio=2)
    table.add_column(justify="center", ratio=1)
    table.add_column(justify="left", ratio=2)
    score = f"{state.score.get(hc, 0)} - {state.score.get(ac, 0)}"
    table.add_row(
        Text(home, style="bold"), Text(score, style="bold reverse"), Text(away, style="bold")
    )
    scorers_home = "\n".join(
        printable(f"{g.scorer} {g.clock.label}") for g in state.goals if g.team == hc
    )
    scorers_away = "\n".join(
        printable(f"{g.scorer} {g.clock.label}") for g in state.goals if g.team == ac
    )
    table.add_row(
        Text(scorers_home, style="dim"),
        Text(state.display_clock, style="bold"),
        Text(scorers_away, style="dim"),
    )
    body: list[RenderableType] = [table]
    if state.possession:
        poss = " · ".join(f"{t} {v:.0f}%" for t, v in state.possession.items())
        body.append(Text(f"possession {poss}", style="dim", justify="center"))
    return Panel(Group(*body), title=state.match_id, subtitle=f"seq {state.last_seq}")
