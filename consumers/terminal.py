"""The live terminal view: a scoreboard per match and a ticker of what happened.

On a terminal it redraws in place with rich, the live match stats on a compact line under the
score; elsewhere (a pipe, a log file) it prints one commentary line per event, and the stats
line at half time, each break and full time, so ``matchcast watch | tee`` stays readable.
"""

from __future__ import annotations

import itertools
from collections import deque

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from consumers._bounded import BoundedMatches
from consumers._runner import MAX_MATCHES
from consumers._subscriber import Subscriber
from consumers.printable import printable
from consumers.scoreboard import Scoreboard, commentary
from events import Event, FullTime, MatchState, PeriodEnd, Possession, clip, facts, stats_line

__all__ = ["TerminalView"]


#: Scoreboards drawn at once, the most recently changed: drawing every match tracked would cost
#: each redraw time in the number of matches.
MAX_BOARDS = 12


class TerminalView:
    """A subscriber that draws the scoreboard and ticker.

    Use as a context manager around the run so the live display is restored on exit.
    """

    def __init__(
        self,
        console: Console | None = None,
        *,
        ticker_lines: int = 12,
        max_matches: int = MAX_MATCHES,
    ) -> None:
        # No emoji codes or markup: names and ids print as they are.
        self.console = console or Console(emoji=False)
        #: The states shown, at most ``max_matches``: the least recently changed forgotten
        #: first, as the runner evicts its matches (``match.forgotten``).
        self.board = Scoreboard(echo=None, max_matches=max_matches)
        self._ticker: deque[str] = deque(maxlen=ticker_lines)
        self._live: Live | None = None
        #: The stretch of play each match's possession shares cover (``55'-86'``), from its
        #: possession event: for a state without ``possession_since``/``until`` (before 1.2).
        self._possession_span: BoundedMatches[str] = BoundedMatches(max_matches, "terminal")
        #: Matches whose replayer is offline (stopped, or died: its last will said so), least
        #: recently said first; at most MAX_MATCHES (a status may name matches never shown).
        self._offline: dict[str, None] = {}
        #: The run each match shown is in: a newer one is a new replay (or a seek), said.
        self._runs: dict[str, int] = {}
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

    def _new_run(self, state: MatchState) -> bool:
        """Whether ``state`` is of a newer run than the match was in (remembered now)."""
        known = self._runs.get(state.match_id)
        self._runs[state.match_id] = state.run
        if len(self._runs) > MAX_MATCHES:
            del self._runs[next(iter(self._runs))]
        return known is not None and state.run > known

    def _on_event(self, event: Event, state: MatchState) -> None:
        if self._new_run(state):
            self._say(printable(f"{'':<7}NEW RUN  {state.match_id}: replayed again from here"))
        self.board.states[state.match_id] = state
        if state.match_id in self._offline:  # events again: a replayer runs it
            del self._offline[state.match_id]
            self._say(f"{'':<7}REPLAYER ONLINE  {state.match_id}")
        if isinstance(event, Possession):
            span = facts.possession_span(event.since, event.clock)
            self._possession_span[state.match_id] = span or ""
        line = commentary(event, state)
        if line is not None:
            self._say(printable(line))  # names on the wire may hold terminal controls
        stats = stats_line(state)
        if stats is not None and isinstance(event, PeriodEnd | FullTime):
            self._say(f"{'':<7}STATS  {stats}")
        self._refresh()

    def _on_state(self, state: MatchState) -> None:
        said = "NEW RUN" if self._new_run(state) else "JOINED"
        self.board.states[state.match_id] = state
        self._say(printable(f"{'':<7}{said}  {state.scoreline}  ({state.display_clock})"))
        self._refresh()

    def replayer_status(self, match_id: str, status: str) -> None:
        """The replayer of ``match_id`` is ``online`` or ``offline`` (its status topic)."""
        was = match_id in self._offline
        self._offline.pop(match_id, None)  # said again: the last to forget
        if status == "offline":
            self._offline[match_id] = None
            if len(self._offline) > MAX_MATCHES:
                del self._offline[next(iter(self._offline))]
        state = self.board.states.get(match_id)
        if was != (status == "offline") and state is not None and state.status in _RUNNING:
            self._say(f"{'':<7}REPLAYER {status.upper()}  {match_id}")
        self._refresh()

    def _say(self, line: str) -> None:
        """A line of the ticker (printed at once where the output is no terminal)."""
        self._ticker.append(line)
        if not self.interactive:
            self.console.print(line, highlight=False, markup=False)

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(self._render())

    def _render(self) -> RenderableType:
        boards: list[RenderableType] = []
        states = self.board.states
        shown = list(itertools.islice(reversed(states.values()), MAX_BOARDS))[::-1]
        if len(states) > len(shown):
            more = len(states) - len(shown)
            boards.append(Text(f"... and {more} more matches (the latest shown)", style="dim"))
        for state in shown:
            offline = state.match_id in self._offline and state.status in _RUNNING
            boards.append(_board(state, self._possession_span.get(state.match_id), offline))
        if not boards:
            boards.append(Text("waiting for a match...", style="dim"))
        ticker = Text("\n".join(self._ticker) or "-", no_wrap=True)
        return Group(*boards, Panel(ticker, title="ticker", border_style="dim"))


#: Statuses of a match still under way, which an offline replayer leaves hanging.
_RUNNING = ("scheduled", "live", "half_time", "break")


def _about(state: MatchState) -> str | None:
    """``FIFA World Cup 2026 · Semi-final · Mercedes-Benz Stadium, Atlanta · 2026-07-15 15:00``."""
    info = state.info
    if info is None:
        return None
    where = ", ".join(clip(p) for p in (info.venue, info.city) if p)
    when = info.kickoff.strftime("%Y-%m-%d %H:%M") if info.kickoff else info.date
    parts = [clip(p) if p else None for p in (info.competition, info.stage)]
    parts += [where, str(when) if when else None]
    return " · ".join(p for p in parts if p) or None


def _board(state: MatchState, possession_span: str | None = None, offline: bool = False) -> Panel:
    home = printable(clip(state.home.name)) if state.home else "?"
    away = printable(clip(state.away.name)) if state.away else "?"
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
    scorers_home = "\n".join(printable(facts.scorer_line(g)) for g in state.goals if g.team == hc)
    scorers_away = "\n".join(printable(facts.scorer_line(g)) for g in state.goals if g.team == ac)
    table.add_row(
        Text(scorers_home, style="dim"),
        Text(state.display_clock, style="bold"),
        Text(scorers_away, style="dim"),
    )
    body: list[RenderableType] = []
    about = _about(state)
    if about is not None:
        body.append(Text(about, style="dim", justify="center"))
    body.append(table)
    if state.status == "stopped":
        at = f" at {state.clock.display}" if state.clock else ""
        body.append(Text(f"replay stopped{at}: not a final score", style="bold", justify="center"))
    elif offline:
        body.append(
            Text("replayer offline: no more events coming", style="bold red", justify="center")
        )
    shootout = facts.shootout_result(state)
    if shootout is not None:
        body.append(Text(shootout, style="bold", justify="center"))
    stats = stats_line(state)
    if stats is not None:
        body.append(Text(stats, justify="center"))
    if state.possession:
        poss = facts.possession(state)
        # The shares cover one stretch of play (the semi-final's 88/12 is 55'-86'), not the match.
        span = (
            facts.possession_span(state.possession_since, state.possession_until)
            or possession_span
            or "over a stretch of play"
        )
        body.append(Text(f"possession {span}: {poss}", style="dim", justify="center"))
    return Panel(Group(*body), title=Text(state.match_id), subtitle=Text(f"seq {state.last_seq}"))
