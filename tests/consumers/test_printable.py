"""Wire text with terminal controls is shown escaped, never obeyed, wherever it is printed."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from consumers import Scoreboard, Stats, Ticker
from consumers.printable import printable
from consumers.terminal import TerminalView
from events import Event, Goal, KickOff
from matchcast.testing import Harness, match_events

#: Clear screen, a fake newline, a C1 CSI, a bell, and a right-to-left override.
HOSTILE = "Evil\x1b[2J\x1b]0;pwned\x07\n90'  GOAL  Fake\x9b31m\u202eNG\u2066"
FORBIDDEN = ["\x1b", "\x07", "\x9b", "\u202e", "\u2066"]


def _hostile_events() -> list[Event]:
    out: list[Event] = []
    for event in match_events():
        if isinstance(event, Goal):
            out.append(event.model_copy(update={"scorer": HOSTILE}))
        elif isinstance(event, KickOff):
            home = event.home.model_copy(update={"name": HOSTILE})
            out.append(event.model_copy(update={"home": home}))
        else:
            out.append(event)
    return out


def _clean(text: str) -> None:
    for char in FORBIDDEN:
        assert char not in text, repr(char)
    assert "\\x1b[2J" in text  # shown, escaped, so a person sees what was sent


async def test_ticker_scoreboard_and_stats_print_hostile_names_escaped() -> None:
    lines: list[str] = []
    subs = [Ticker(echo=lines.append), Scoreboard(echo=lines.append), Stats(echo=lines.append)]
    async with Harness(*subs) as h:
        await h.play(_hostile_events())
    text = "\n".join(lines)
    _clean(text)
    assert not any(line.startswith("90'  GOAL  Fake") for line in text.splitlines())


@pytest.mark.parametrize("terminal", [True, False])
async def test_the_terminal_view_draws_hostile_names_escaped(terminal: bool) -> None:
    out = io.StringIO()
    view = TerminalView(Console(file=out, force_terminal=terminal, width=200))
    with view:
        async with Harness(view.subscriber) as h:
            await h.play(_hostile_events())
    text = out.getvalue()
    assert "\x1b[2J" not in text and "\x1b]0;" not in text
    for char in FORBIDDEN[1:]:
        assert char not in text, repr(char)
    assert "\\x1b[2J" in text


@given(st.text())
def test_printable_leaves_no_control_or_bidi_character(text: str) -> None:
    safe = printable(text)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in safe)
    assert not any(0x202A <= ord(c) <= 0x202E or 0x2066 <= ord(c) <= 0x2069 for c in safe)
    plain = "".join(c for c in text if c.isprintable() and c not in "\\")
    assert printable(plain) == plain  # ordinary names (Martínez, 孫興慜) are left alone


@pytest.mark.parametrize("fmt", ["console", "json"])
def test_log_lines_show_wire_text_escaped(fmt: str) -> None:
    """A topic or reason off the wire in a log line cannot drive the terminal either."""
    import logging

    import structlog

    from matchcast.logs import configure_logging

    config, root = structlog.get_config(), logging.getLogger()
    handlers, level = root.handlers[:], root.level
    out = io.StringIO()
    try:
        configure_logging(fmt, "INFO", stream=out)  # type: ignore[arg-type]
        structlog.get_logger().warning("message.rejected", topic="matchcast/events/\x1b[2J\u202e")
    finally:
        structlog.configure(**config)
        root.handlers[:] = handlers
        root.setLevel(level)
    text = out.getvalue()
    assert "message.rejected" in text
    assert "\x1b[2J" not in text and "\u202e" not in text
