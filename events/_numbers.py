"""Numbers as people type them: ASCII digits only, finite, checked in one place.

Python's ``int()`` and ``float()`` read far more than a person means by a number: every
Unicode digit set (fullwidth ``"\\uff14\\uff15"`` and Arabic-Indic ``"\\u0664\\u0665"``
are both 45), underscores (``int("4_5")``), ``nan``, ``inf`` and ``infinity`` in any case,
and exponents past the float range (``1e999`` is infinite, ``5e-324`` a subnormal that turns
into NaN in the first division). Every number
matchcast reads from text (a minute, a speed, a chaos parameter, a schema version) goes through
:func:`whole_number` or :func:`decimal_number`, which take only what the docs show:

- a whole number: ASCII digits ``0-9``, nothing else;
- a decimal number: an optional sign, ASCII digits with at most one ``.``, an optional
  exponent (``1e6``), and the value finite.

The caller checks the range it documents (:func:`in_range` for a number given in code); the
text is never quoted here, so a caller's message quotes it cut (:func:`events.quote`).
"""

from __future__ import annotations

import math

from events._quote import quote

__all__ = ["MAX_NUMBER_CHARS", "decimal_number", "in_range", "shown", "whole_number"]

#: Characters a number may have; a longer text is refused before anything reads it.
MAX_NUMBER_CHARS = 32

_DIGITS = frozenset("0123456789")
_DECIMAL = frozenset("0123456789.eE+-")


def whole_number(text: str) -> int:
    """``text`` as a whole number, if it is one in ASCII digits.

    Raises:
        ValueError: empty, too long, or anything but the digits 0-9 in it.
    """
    if not 0 < len(text) <= MAX_NUMBER_CHARS or not _DIGITS.issuperset(text):
        raise ValueError("not a whole number in the digits 0-9")
    return int(text)


def decimal_number(text: str) -> float:
    """``text`` as a finite number written with ASCII digits (``60``, ``0.5``, ``1e6``).

    Raises:
        ValueError: empty, too long, another character (a Unicode digit, ``_``, a letter as
            in ``nan`` or ``inf``), malformed, or past the float range.
    """
    if not 0 < len(text) <= MAX_NUMBER_CHARS or not _DECIMAL.issuperset(text):
        raise ValueError("not a number in the digits 0-9")
    value = float(text)  # ValueError when malformed (``1..2``, ``e5``)
    if not math.isfinite(value):
        raise ValueError("not a finite number")
    return value


def in_range(value: float, low: float, high: float, what: str) -> float:
    """``value`` if it is a finite number from ``low`` to ``high`` (a number handed over in
    code: an option of a library call).

    Raises:
        ValueError: ``what must be a number from low to high``, naming the value.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise ValueError(
            f"{what} must be a number from {shown(low)} to {shown(high)}, not {quote(value)}"
        )
    return value


def shown(value: float) -> str:
    """A bound as the docs write it: ``0.01``, ``3,600``, ``1,000,000``."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"
