"""One wording of each fact, for every view: the terminal's scoreboard and ticker, the stats
report and the page agree (a penalty is "(pen)" in all of them, possession is home first)."""

from __future__ import annotations

import io

from rich.console import Console

from consumers import Stats
from consumers.terminal import TerminalView
from events import EVENT_MODELS, Goal, MatchState, Possession, apply, facts
from matchcast.testing import Harness, match_events
from matchcast.web._view import page_view, ticker_row

FINAL = "worldcup:2022/final"


def _screen(view: TerminalView) -> str:
    console = Console(width=120, record=True, force_terminal=False, emoji=False)
    console.print(view._render())
    return console.export_text()


async def test_the_scoreboard_tags_a_penalty_as_the_ticker_does() -> None:
    out = io.StringIO()
    view = TerminalView(Console(file=out, force_terminal=False, width=120))
    async with Harness(view.subscriber) as h:
        await h.play(FINAL)
    screen, ticker = _screen(view), out.getvalue()
    assert "Lionel Messi 23' (pen)" in screen  # the board
    assert "GOAL  Lionel Messi (ARG) (pen)" in ticker  # the ticker


async def test_possession_reads_home_first_in_the_board_the_ticker_the_page_and_stats() -> None:
    out = io.StringIO()
    view = TerminalView(Console(file=out, force_terminal=False, width=120))
    reports: list[str] = []
    async with Harness(view.subscriber, Stats(echo=reports.append)) as h:
        await h.play("semifinal")
    shares = "ARG 88% · ENG 12%"  # the file lists ENG first
    assert f"possession 55'-86': {shares}" in _screen(view)
    assert f"POSSESSION 55'-86'  {shares}" in out.getvalue()
    assert f"possession   55'-86'  {shares}" in reports[0]
    state = MatchState.new("wc2026-sf-arg-eng")
    for event in match_events("semifinal"):
        state = apply(state, event)
        if isinstance(event, Possession):
            row = ticker_row(event, state)
            assert row is not None and row["text"].startswith(shares)


def test_a_goal_known_from_a_snapshot_reads_as_the_live_one() -> None:
    events = match_events(FINAL)
    state = MatchState.new(events[0].match_id)
    for event in events:
        state = apply(state, event)
    messi = next(g for g in state.goals if g.method == "penalty")
    view = page_view(state)
    joined = view["joined"]
    assert isinstance(joined, list)
    live = next(e for e in events if isinstance(e, Goal) and e.goal_id == messi.goal_id)
    said = live.describe(state)
    assert said is not None
    assert joined[state.goals.index(messi)]["text"] == said.text.rsplit(". ", 1)[0]
    assert facts.scorer_line(messi) == "Lionel Messi 23' (pen)"


def test_every_event_type_with_words_has_them_in_the_facts_module() -> None:
    """Only the clock and the types a ticker only counts (corners, fouls, offsides) are
    silent; every other type's words are registered in events/_facts.py."""
    silent = {"clock"} | {m.event_type() for m in EVENT_MODELS if m.counted_only}
    assert silent == {"clock", "corner", "foul", "offside"}
    for model in EVENT_MODELS:
        kind = model.event_type()
        assert (facts.describer(kind) is None) == (kind in silent), kind
