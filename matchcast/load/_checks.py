"""Pass/fail thresholds on a load report: ``--check 'p99 < 50ms'``, ``--check 'lost == 0'``.

A check is ``FIGURE OP VALUE[UNIT]``. The figures:

- latency, in ms: ``p50``, ``p90``, ``p99``, ``p99.9``, ``max``, ``mean`` (``50ms``, ``0.5s``,
  ``800us`` or a bare number of ms);
- counts over every subscriber: ``lost``, ``duplicates``, ``reordered``, ``received``,
  ``publish_failures``, ``overruns``;
- ``delivered_rate`` (events/s delivered, summed over subscribers) and ``achieved_rate``
  (events/s the sender achieved); ``k`` suffixes read as thousands.

``OP`` is one of ``<``, ``<=``, ``>``, ``>=``, ``==``, ``!=``.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CHECK_FIGURES",
    "LATENCY_FIGURES",
    "Check",
    "CheckError",
    "evaluate_checks",
    "parse_check",
]

_LATENCY = {
    "p50": "p50",
    "p90": "p90",
    "p99": "p99",
    "p99.9": "p99_9",
    "max": "max",
    "mean": "mean",
}
_COUNTS: dict[str, tuple[str, str]] = {
    "lost": ("delivery", "lost"),
    "duplicates": ("delivery", "duplicates"),
    "reordered": ("delivery", "reordered"),
    "received": ("delivery", "received"),
    "publish_failures": ("sender", "publish_failures"),
    "overruns": ("sender", "overruns"),
}
_RATES: dict[str, tuple[str, str]] = {
    "delivered_rate": ("delivery", "delivered_events_per_s"),
    "achieved_rate": ("sender", "achieved_events_per_s"),
}
#: The figures that are latency percentiles (read from the latency histogram).
LATENCY_FIGURES: tuple[str, ...] = tuple(_LATENCY)
#: Every figure a check can name.
CHECK_FIGURES: tuple[str, ...] = (*_LATENCY, *_COUNTS, *_RATES)

_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
}
_MS_PER = {"ms": 1.0, "s": 1000.0, "us": 0.001}
#: Matched on the stripped text: no two ``\s*`` meet (once, ``\s*(?P<unit>[a-z/]*)\s*$``
#: split a run of spaces every way before failing: quadratic).
_PATTERN = re.compile(
    r"(?P<figure>[a-z_]+[0-9.]*)\s*(?P<op><=|>=|==|!=|<|>)\s*"
    r"(?P<value>[0-9]+(?:\.[0-9]+)?)\s*(?P<unit>[a-z/]*)"
)


class CheckError(ValueError):
    """A ``--check`` expression that cannot be read; the message says what is accepted."""


@dataclass(frozen=True, slots=True)
class Check:
    """One threshold: ``figure op value`` (latencies in ms, rates in events/s)."""

    text: str
    figure: str
    op: str
    value: float

    def actual(self, report: dict[str, Any]) -> float:
        """The figure's value in ``report``."""
        if self.figure in _LATENCY:
            return float(report["latency_ms"][_LATENCY[self.figure]])
        section, key = {**_COUNTS, **_RATES}[self.figure]
        return float(report[section][key])

    def passes(self, report: dict[str, Any]) -> bool:
        """True when ``report`` meets the threshold."""
        return _OPS[self.op](self.actual(report), self.value)


def parse_check(text: str) -> Check:
    """Read one ``--check`` expression.

    Raises:
        CheckError: it is not ``FIGURE OP VALUE`` with a known figure and a fitting unit.
    """
    m = _PATTERN.fullmatch(text.lower().strip())
    usage = (
        f"--check {text!r}: expected FIGURE OP VALUE such as 'p99 < 50ms' or 'lost == 0'; "
        f"figures: {', '.join(CHECK_FIGURES)}; operators: < <= > >= == !="
    )
    if m is None:
        raise CheckError(usage)
    figure, op, unit = m["figure"], m["op"], m["unit"]
    value = float(m["value"])
    if figure not in CHECK_FIGURES:
        raise CheckError(f"--check {text!r}: unknown figure {figure!r}; {usage.split('; ', 1)[1]}")
    if figure in _LATENCY:
        if unit not in ("", *_MS_PER):
            raise CheckError(f"--check {text!r}: a latency is in ms, s or us, not {unit!r}")
        value *= _MS_PER.get(unit, 1.0)
    elif figure in _RATES:
        if unit not in ("", "/s", "k", "k/s"):
            raise CheckError(f"--check {text!r}: a rate is in events/s (e.g. 5000 or 5k)")
        value *= 1000 if unit.startswith("k") else 1
    elif unit:
        raise CheckError(f"--check {text!r}: {figure} is a count and takes no unit")
    return Check(text=text.strip(), figure=figure, op=op, value=value)


def evaluate_checks(checks: list[Check], report: dict[str, Any]) -> list[dict[str, Any]]:
    """Each check's result on ``report``, JSON-ready: check, figure, actual, passed."""
    return [
        {
            "check": c.text,
            "figure": c.figure,
            "actual": c.actual(report),
            "passed": c.passes(report),
        }
        for c in checks
    ]
