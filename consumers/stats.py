"""The built-in stats subscriber: goals timeline, possession, cards, per match.

It prints a report at full time (and, for a match still going, when the consumer stops)::

    wc2026-sf-arg-eng  FT  ARG 2-1 ENG
      goals        55'    ENG  Anthony Gordon           0-1
                   ...
      possession   55'-86'  ARG 88% · ENG 12%

The goals come from the state (so a goal ruled out later drops out, and a late joiner knows
the goals before it joined); the possession stretches and cards from the events seen.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from consumers._subscriber import Subscriber, on, on_state, on_stop
from consumers.printable import printable
from events import Card, FullTime, GoalDisallowed, MatchState, Possession, clip, facts

__all__ = ["GoalLine", "MatchStats", "PossessionStretch", "Stats"]


@dataclass(frozen=True, slots=True)
class GoalLine:
    """One goal of the timeline, with the score after it."""

    clock: str
    team: str
    scorer: str
    score: str
    method: str | None = None


@dataclass(frozen=True, slots=True)
class PossessionStretch:
    """Possession shares over a stretch of play (``since`` is empty when not reported)."""

    since: str
    until: str
    share: dict[str, float]


@dataclass(slots=True)
class MatchStats:
    """What :class:`Stats` knows about one match."""

    state: MatchState
    possession: list[PossessionStretch] = field(default_factory=list)
    disallowed: list[str] = field(default_factory=list)
    cards: Counter[tuple[str, str]] = field(default_factory=Counter)
    reported: bool = False

    @property
    def goals(self) -> list[GoalLine]:
        """The goals that stand, in order, each with the score after it."""
        codes = [t.code for t in (self.state.home, self.state.away) if t] or sorted(
            self.state.score
        )
        running = dict.fromkeys(codes, 0)
        lines = []
        for g in self.state.goals:
            running[g.team] = running.get(g.team, 0) + 1
            score = "-".join(str(running.get(c, 0)) for c in codes)
            lines.append(GoalLine(g.clock.label, g.team, clip(g.scorer), score, g.method))
        return lines

    def report(self) -> str:
        """The report as printed."""
        s = self.state
        out = [f"{s.match_id}  {s.display_clock}  {s.scoreline}"]
        rows: list[tuple[str, str]] = []
        for g in self.goals:
            how = facts.goal_tag(g.method)
            rows.append(("goals", f"{g.clock:<6} {g.team:<4} {g.scorer + how:<26} {g.score}"))
        rows += [("ruled out", d) for d in self.disallowed]
        for p in self.possession:
            stretch = f"{p.since}-{p.until}" if p.since else f"to {p.until}"
            rows.append(("possession", f"{stretch}  {facts.possession(s, p.share)}"))
        if not self.possession and s.possession:
            rows.append(("possession", f"latest  {facts.possession(s)}"))
        if self.cards:
            rows.append(
                ("cards", "  ".join(f"{t} {n} {c}" for (t, c), n in sorted(self.cards.items())))
            )
        last = ""
        for label, text in rows:
            # Each row is one line: names on the wire may hold terminal controls.
            out.append(printable(f"  {'' if label == last else label:<12} {text}"))
            last = label
        if not rows:
            out.append("  no goals yet")
        return "\n".join(out)


class Stats(Subscriber):
    """Keeps a :class:`MatchStats` per match and prints its report at full time.

    Args:
        echo: called with each report; ``print`` by default, None for quiet.
    """

    def __init__(self, echo: Callable[[str], None] | None = print) -> None:
        super().__init__("stats")
        self.matches: dict[str, MatchStats] = {}
        self._echo = echo

    def _of(self, state: MatchState) -> MatchStats:
        stats = self.matches.get(state.match_id)
        if stats is None:
            stats = self.matches[state.match_id] = MatchStats(state)
        stats.state = state
        return stats

    @on()
    def _any(self, event: object, state: MatchState) -> None:
        self._of(state)

    @on(Possession)
    def _possession(self, event: Possession, state: MatchState) -> None:
        since = event.since.label if event.since else ""
        stretch = PossessionStretch(since, event.clock.label, dict(event.share))
        self._of(state).possession.append(stretch)

    @on(GoalDisallowed)
    def _disallowed(self, event: GoalDisallowed, state: MatchState) -> None:
        why = f": {clip(event.reason)}" if event.reason else ""
        self._of(state).disallowed.append(
            f"{event.clock.label:<6} {event.team} {clip(event.goal_id)}{why}"
        )

    @on(Card)
    def _card(self, event: Card, state: MatchState) -> None:
        self._of(state).cards[event.team, event.card.replace("_", " ")] += 1

    @on(FullTime)
    def _full_time(self, event: FullTime, state: MatchState) -> None:
        self._report(self._of(state))

    @on_state
    def _on_state(self, state: MatchState) -> None:
        stats = self._of(state)
        if state.status == "finished" and not stats.reported:
            self._report(stats)

    @on_stop
    def _at_stop(self) -> None:
        for stats in self.matches.values():
            if not stats.reported:
                self._report(stats)

    def _report(self, stats: MatchStats) -> None:
        stats.reported = True
        if self._echo is not None:
            self._echo(stats.report())
