"""The match clock as football writes it.

A minute label names the minute being played: ``55'`` is the 55th minute (54:00-54:59
of play), ``45+2'`` the second added minute of the first half. Each period has a nominal
length; minutes played beyond it are *added* minutes and count from the period's end.
"""

from __future__ import annotations

import functools
from enum import IntEnum
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["PERIOD_BOUNDS", "MatchClock", "Period"]


class Period(IntEnum):
    """Periods of a football match, numbered in the order they are played."""

    FIRST_HALF = 1
    SECOND_HALF = 2
    EXTRA_TIME_FIRST = 3
    EXTRA_TIME_SECOND = 4
    PENALTIES = 5

    @property
    def short(self) -> str:
        """The label people use: ``1H``, ``2H``, ``ET1``, ``ET2``, ``PEN``."""
        return _SHORT[self]


_SHORT = {
    Period.FIRST_HALF: "1H",
    Period.SECOND_HALF: "2H",
    Period.EXTRA_TIME_FIRST: "ET1",
    Period.EXTRA_TIME_SECOND: "ET2",
    Period.PENALTIES: "PEN",
}

#: First and last regulation minute of each period (labels, inclusive).
PERIOD_BOUNDS: dict[Period, tuple[int, int]] = {
    Period.FIRST_HALF: (1, 45),
    Period.SECOND_HALF: (46, 90),
    Period.EXTRA_TIME_FIRST: (91, 105),
    Period.EXTRA_TIME_SECOND: (106, 120),
    Period.PENALTIES: (120, 120),
}


def _label(period: Period, minute: int, added: int) -> str:
    if period is Period.PENALTIES:
        return "PEN"
    return f"{minute}+{added}'" if added else f"{minute}'"


@functools.lru_cache(maxsize=4096)
def _clock_label(period: Period, minute: int, added: int, label: str) -> str:
    """``label`` when it is right for the clock, the label to fill in when
    it is empty; raises ValueError naming the problem otherwise."""
    first, last = PERIOD_BOUNDS[period]
    if period is not Period.PENALTIES and minute != 0:
        if not first <= minute <= last:
            raise ValueError(f"minute {minute} is outside {period.short} ({first}-{last})")
        if added and minute != last:
            raise ValueError(
                f"added minutes only follow the period's last minute ({last}), not minute {minute}"
            )
    expected = _label(period, minute, added)
    if not label:
        return expected
    if label != expected:
        raise ValueError(f"label {label!r} does not match the clock, expected {expected!r}")
    return label


class MatchClock(BaseModel):
    """A point on the match clock.

    ``minute`` is the regulation minute (1-120); ``added`` counts added minutes past the end
    of the period (``90+2'`` is ``minute=90, added=2``). ``label`` is derived and checked.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    period: Period = Field(description="1 first half, 2 second half, 3-4 extra time, 5 shoot-out")
    minute: int = Field(ge=0, le=120, description="Regulation minute; 0 before kickoff")
    added: int = Field(default=0, ge=0, le=30, description="Added minutes past the period end")
    label: str = Field(default="", description="As football writes it: 55', 90+2', PEN")

    @model_validator(mode="after")
    def _check(self) -> Self:
        # Called for every event decoded, so the verdict on each (period, minute, added,
        # label) is computed once and remembered: there are a few hundred valid clocks.
        label = _clock_label(self.period, self.minute, self.added, self.label)
        if label != self.label:  # the label was left out: fill it in
            object.__setattr__(self, "label", label)
        return self

    @classmethod
    def at(cls, minute: int, added: int = 0, period: Period | None = None) -> MatchClock:
        """The clock at a minute label, inferring the period from the minute.

        ``MatchClock.at(90, 2)`` is ``90+2'`` in the second half; minute 45 with added time is
        the first half, minute 46-90 the second, and so on.
        """
        if period is None:
            period = next(p for p, (lo, hi) in PERIOD_BOUNDS.items() if lo <= minute <= hi)
        return cls(period=period, minute=minute, added=added)

    @property
    def sort_key(self) -> tuple[int, int, int]:
        """Orders clocks chronologically: by period, then minute, then added minute."""
        return (int(self.period), self.minute, self.added)

    def __str__(self) -> str:
        return self.label
