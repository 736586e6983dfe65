"""``--stages 30s:100,5m:1000,30s:0``: a number ramped linearly over time, as k6's stages.

Each stage is ``DURATION:TARGET``: over DURATION the number moves in a straight line from
where the previous stage ended (0 at the start) to TARGET. A duration is a sum of parts with
units ``ms``, ``s``, ``m`` and ``h`` (``90s``, ``1m30s``, ``0.5h``); a bare number is seconds.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

__all__ = ["StageError", "Stages", "parse_duration", "parse_stages"]

_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
#: The longest run stages may describe (a week), and the most stages a list may hold.
_MAX_S, _MAX_STAGES = 7 * 86_400.0, 1000
#: The largest target a stage may name.
MAX_TARGET = 10_000_000


class StageError(ValueError):
    """Stages that cannot be read; the message says what is accepted."""


def parse_duration(text: str) -> float:
    """Seconds of ``90s``, ``1m30s``, ``250ms``, ``2h`` or a bare ``45``.

    Raises:
        StageError: anything else.
    """
    text = text.strip().lower()
    if re.fullmatch(r"[0-9]+(?:\.[0-9]+)?", text):
        return float(text)
    pos, total = 0, 0.0
    for m in _PART.finditer(text):
        if m.start() != pos:
            break
        total += float(m[1]) * _SECONDS[m[2]]
        pos = m.end()
    if pos != len(text) or not text:
        raise StageError(f"{text!r} is not a duration such as 30s, 5m, 1m30s or 250ms")
    return total


@dataclass(frozen=True, slots=True)
class Stages:
    """Stages as ``(end second, target)`` pairs, the first starting from 0 at second 0."""

    text: str
    points: tuple[tuple[float, int], ...]

    @property
    def duration_s(self) -> float:
        """When the last stage ends."""
        return self.points[-1][0]

    @property
    def peak(self) -> int:
        """The largest target of any stage."""
        return max(target for _, target in self.points)

    def target(self, t: float) -> int:
        """The number at second ``t``: on the line between the stages around it, rounded to
        the nearest (a ramp from 0 to 10 over 10 s has 1 from t=0.5), the last target after
        the end."""
        start, level = 0.0, 0
        for end, target in self.points:
            if t < end:
                frac = (t - start) / (end - start)
                return math.floor(level + (target - level) * frac + 0.5)
            start, level = end, target
        return level


def parse_stages(text: str, option: str = "--stages") -> Stages:
    """``30s:100,5m:1000,30s:0`` read as :class:`Stages`.

    Raises:
        StageError: a stage that is not ``DURATION:TARGET``, a negative or huge target, no
            stage, or a total past a week.
    """
    usage = f"{option} {text!r}: expected DURATION:TARGET,... such as 30s:100,5m:1000,30s:0"
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or len(parts) > _MAX_STAGES:
        raise StageError(usage)
    points, end = [], 0.0
    for part in parts:
        length, sep, target = part.partition(":")
        try:
            seconds = parse_duration(length)
            count = int(target)
        except (StageError, ValueError):
            raise StageError(usage) from None
        if not sep or not 0 <= count <= MAX_TARGET:
            raise StageError(f"{usage}; a target is a whole number from 0 to {MAX_TARGET:,}")
        end += seconds
        points.append((end, count))
    if end <= 0 or end > _MAX_S:
        raise StageError(f"{usage}; the stages last more than 0 s and at most a week")
    if not any(target for _, target in points):
        raise StageError(f"{usage}; at least one stage has a target above 0")
    # A stage of no length jumps to its target at once.
    return Stages(text=text.strip(), points=tuple(points))
