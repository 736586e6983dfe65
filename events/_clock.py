"""The match clock as football writes it: the one vocabulary of periods and minute labels.

A minute label names the minute being played: ``55'`` is the 55th minute (54:00-54:59
of play), ``45+2'`` the second added minute of the first half. Each period has a nominal
length; minutes played beyond it are *added* minutes and count from the period's end.

Everything that reads, writes or counts minutes uses this module: the codec checks labels
(:class:`MatchClock`), the CLI's ``--from``, control commands and the testing kit parse them
(:func:`parse_minute`), the importers turn their sources' minutes into labels
(:func:`minute_of_play`, :data:`ADDED_TIME_AFTER`), and the views name periods
(:attr:`Period.short`, :attr:`Period.long_name`) and show the clock (:attr:`MatchClock.display`).
"""

from __future__ import annotations

import functools
from enum import IntEnum
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from events._numbers import whole_number
from events._quote import quote

__all__ = [
    "ADDED_TIME_AFTER",
    "END_OF_PLAY",
    "LAST_MINUTE",
    "PERIOD_BOUNDS",
    "MatchClock",
    "MinutePastPlayError",
    "Period",
    "format_minute",
    "minute_of_play",
    "parse_minute",
]


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

    @property
    def long_name(self) -> str:
        """The period in words: ``first half``, ..., ``second half of extra time``."""
        return _LONG[self]

    @property
    def first_minute(self) -> int:
        """The first regulation minute label of the period (1, 46, 91, 106; 120 for PEN)."""
        return PERIOD_BOUNDS[self][0]

    @property
    def last_minute(self) -> int:
        """The last regulation minute of the period (45, 90, 105, 120): added minutes follow it."""
        return PERIOD_BOUNDS[self][1]

    @property
    def length(self) -> int:
        """Regulation minutes of the period: 45 a half, 15 a half of extra time, 0 a shoot-out."""
        return 0 if self is Period.PENALTIES else self.last_minute - self.first_minute + 1

    @classmethod
    def of_minute(cls, minute: int) -> Period:
        """The period whose regulation minutes include ``minute`` (45 is the first half).

        Raises:
            ValueError: ``minute`` is in no period (before 1 or past 120).
        """
        for period, (first, last) in PERIOD_BOUNDS.items():
            if first <= minute <= last:
                return period
        raise ValueError(f"minute {minute} is in no period (1-{LAST_MINUTE})")


_SHORT = {
    Period.FIRST_HALF: "1H",
    Period.SECOND_HALF: "2H",
    Period.EXTRA_TIME_FIRST: "ET1",
    Period.EXTRA_TIME_SECOND: "ET2",
    Period.PENALTIES: "PEN",
}
_LONG = {
    Period.FIRST_HALF: "first half",
    Period.SECOND_HALF: "second half",
    Period.EXTRA_TIME_FIRST: "first half of extra time",
    Period.EXTRA_TIME_SECOND: "second half of extra time",
    Period.PENALTIES: "penalty shoot-out",
}

#: First and last regulation minute of each period (labels, inclusive).
PERIOD_BOUNDS: dict[Period, tuple[int, int]] = {
    Period.FIRST_HALF: (1, 45),
    Period.SECOND_HALF: (46, 90),
    Period.EXTRA_TIME_FIRST: (91, 105),
    Period.EXTRA_TIME_SECOND: (106, 120),
    Period.PENALTIES: (120, 120),
}
#: The last minute of play: the end of extra time.
LAST_MINUTE = PERIOD_BOUNDS[Period.EXTRA_TIME_SECOND][1]
#: The minutes added time can follow: each period's last (``45+2'``, ``90+4'``, ``120+1'``).
ADDED_TIME_AFTER: tuple[int, ...] = tuple(
    p.last_minute for p in PERIOD_BOUNDS if p is not Period.PENALTIES
)


def _label(period: Period, minute: int, added: int) -> str:
    if period is Period.PENALTIES:
        return "PEN"
    return f"{minute}+{added}'" if added else f"{minute}'"


def format_minute(minute: int, added: int = 0, period: Period | None = None) -> str:
    """The label of a minute: ``55'``, ``90+2'``; ``PEN`` in the shoot-out.

    The period is inferred from the minute when not given, as :meth:`MatchClock.at` does.

    Raises:
        ValueError: no such minute (see :class:`MatchClock`).
    """
    return MatchClock.at(minute, added, period).label


class MinutePastPlayError(ValueError):
    """A minute written right (``200``, ``120+40``) but past the end of any match.

    Attributes:
        minute: the minute as written, without its ``'``.
    """

    def __init__(self, minute: str) -> None:
        self.minute = minute
        super().__init__(
            f"minute {minute} is past the end of play (the latest a match can go is "
            f"{LAST_MINUTE}+{_MAX_ADDED}')"
        )


#: The most added minutes after a period (``MatchClock.added``).
_MAX_ADDED = 30


def parse_minute(text: str) -> MatchClock:
    """The match clock at a minute as people write it: ``80``, ``90+2``, ``45+1'``.

    The inverse of :func:`format_minute` for every minute of play (not ``PEN``, which has
    no minute to start from).

    Only the ASCII digits 0-9 are read (:mod:`events._numbers`): a fullwidth
    ``\\uff14\\uff15`` is refused.

    Raises:
        MinutePastPlayError: a minute written right but later than any match can last (``200``,
            ``120+40``): who knows the match says which minute was its last.
        ValueError: not such a minute; the message says what is expected.
    """
    problem = f"a minute is written like 60 or 90+2 in the digits 0-9, not {quote(text)}"
    body = text.strip().rstrip("'") if len(text) <= 32 else ""
    minute, _, added = body.partition("+")
    try:
        value, extra = whole_number(minute), whole_number(added) if added else 0
    except ValueError:
        raise ValueError(problem) from None
    if value > LAST_MINUTE or (value == LAST_MINUTE and extra > _MAX_ADDED):
        raise MinutePastPlayError(body)
    if not Period.FIRST_HALF.first_minute <= value <= LAST_MINUTE:
        raise ValueError(problem)
    try:
        return MatchClock.at(value, extra)
    except ValueError:
        raise ValueError(problem) from None


def minute_of_play(period: Period, elapsed: int) -> tuple[int, int] | None:
    """``(minute, added)`` of the minute being played when ``elapsed`` whole minutes of a
    continuous match clock have gone (StatsBomb's ``minute``: 47 in the first half is
    ``45+3'``, 46 in the second ``47'``); None when that is before ``period`` starts."""
    played = elapsed + 1  # 47:30 is in the 48th minute
    if played < period.first_minute:
        return None
    last = period.last_minute
    return (played, 0) if played <= last else (last, played - last)


#: The longest minute label (``120+30'``).
_MAX_LABEL = 8


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
        raise ValueError(f"label {quote(label)} does not match the clock, expected {expected!r}")
    return label


class MatchClock(BaseModel):
    """A point on the match clock.

    ``minute`` is the regulation minute (1-120); ``added`` counts added minutes past the end
    of the period (``90+2'`` is ``minute=90, added=2``). ``label`` is derived and checked.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    period: Period = Field(description="1 first half, 2 second half, 3-4 extra time, 5 shoot-out")
    minute: int = Field(ge=0, le=120, description="Regulation minute; 0 before kickoff")
    added: int = Field(
        default=0, ge=0, le=_MAX_ADDED, description="Added minutes past the period end"
    )
    label: str = Field(default="", description="As football writes it: 55', 90+2', PEN")

    @model_validator(mode="after")
    def _check(self) -> Self:
        # Called for every event decoded, so the verdict on each (period, minute, added,
        # label) is computed once and remembered: there are a few hundred valid clocks.
        if len(self.label) > _MAX_LABEL:  # never a key of the cache below: it is input
            raise ValueError(f"label {quote(self.label)} is not a minute label such as 90+2'")
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
            period = Period.of_minute(minute)
        return cls(period=period, minute=minute, added=added)

    @property
    def display(self) -> str:
        """The clock as a scoreboard shows it while play is on: ``1H 23'``, ``2H 90+2'``."""
        return f"{self.period.short} {self.label}"

    @property
    def sort_key(self) -> tuple[int, int, int]:
        """Orders clocks chronologically: by period, then minute, then added minute."""
        return (int(self.period), self.minute, self.added)

    def __str__(self) -> str:
        return self.label


#: The latest minute of play there can be (``120+30'``): where a minute past the end
#: (:class:`MinutePastPlayError`) stands while its match is not known yet.
END_OF_PLAY = MatchClock.at(LAST_MINUTE, _MAX_ADDED)
