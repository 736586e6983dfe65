"""Wire text made safe for a terminal: control characters shown, never obeyed.

A name on the wire is whatever a publisher put there: ``"\\x1b[2J"`` would clear the screen of
everyone running ``matchcast watch``, a right-to-left override (U+202E) would turn the rest of
a line around, a newline would forge a ticker line of its own. Every piece of wire text goes
through :func:`printable` before it reaches a terminal: the consumers' printing edges (ticker,
scoreboard, stats report, the terminal view) call it, so do the log renderer, what ``clear``
and ``control`` print (topics, replayer ids, replies, reasons) and every ``error:`` line
(``matchcast.cli.common.fail``), and nothing else prints wire text.
"""

from __future__ import annotations

__all__ = ["printable"]

#: C0 controls and DEL, C1 controls, the line and paragraph separators, and the bidirectional
#: marks, embeddings, overrides and isolates.
_UNSAFE = [
    *range(0x20),
    0x7F,
    *range(0x80, 0xA0),
    0x061C,  # arabic letter mark
    0x200E,  # left-to-right mark
    0x200F,  # right-to-left mark
    0x2028,  # line separator
    0x2029,  # paragraph separator
    *range(0x202A, 0x202F),  # embeddings, pop, overrides
    *range(0x2066, 0x206A),  # isolates
]
_ESCAPES = {c: (f"\\x{c:02x}" if c <= 0xFF else f"\\u{c:04x}") for c in _UNSAFE}


def printable(text: str) -> str:
    r"""``text`` with every control and bidi character written as a visible escape.

    >>> printable("Messi\x1b[2J\u202e")
    'Messi\\x1b[2J\\u202e'
    """
    return text.translate(_ESCAPES)
