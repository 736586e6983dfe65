"""The terminal view says what is true: the stretch of play a possession share covers, a
shoot-out's result, and names printed as they are."""

from __future__ import annotations

import io

from rich.console import Console

from consumers.terminal import TerminalView
from matchcast.testing import Harness


def _screen(view: TerminalView) -> str:
    console = Console(width=100, record=True, force_terminal=False, emoji=False)
    console.print(view._render())
    return console.export_text()


async def test_possession_names_the_stretch_of_play_it_covers() -> None:
    """The semi-final's 88/12 covers 55'-86', not the match."""
    view = TerminalView(Console(file=io.StringIO(), force_terminal=False))
    async with Harness(view.subscriber) as h:
        await h.play()
    assert "possession 55'-86': ARG 88% · ENG 12%" in _screen(view)

    late = TerminalView(Console(file=io.StringIO(), force_terminal=False))
    async with Harness(late.subscriber) as h:
        await h.play(start="90")  # joins from the snapshot, after the possession event
    assert "possession over a stretch of play: ARG 88% · ENG 12%" in _screen(late)


async def test_a_shootout_shows_its_result_and_unnamed_takers_as_kicks() -> None:
    view = TerminalView(Console(file=io.StringIO(), force_terminal=False))
    async with Harness(view.subscriber) as h:
        await h.play("worldcup:2022/final")
    screen = _screen(view)
    assert "3 - 3" in screen
    assert "Argentina win 4-2 on penalties" in screen
    assert "PEN    kick 1 (ARG) scores" in screen
    assert "kicker" not in screen
