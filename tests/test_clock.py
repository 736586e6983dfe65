"""The match clock writes minutes as football does and refuses impossible ones."""

import pytest
from pydantic import ValidationError

from events import MatchClock, Period


@pytest.mark.parametrize(
    ("minute", "added", "period", "label"),
    [
        (1, 0, Period.FIRST_HALF, "1'"),
        (45, 3, Period.FIRST_HALF, "45+3'"),
        (46, 0, Period.SECOND_HALF, "46'"),
        (55, 0, Period.SECOND_HALF, "55'"),
        (90, 2, Period.SECOND_HALF, "90+2'"),
        (105, 1, Period.EXTRA_TIME_FIRST, "105+1'"),
        (120, 0, Period.EXTRA_TIME_SECOND, "120'"),
    ],
)
def test_label_and_period_are_inferred_from_the_minute(
    minute: int, added: int, period: Period, label: str
) -> None:
    clock = MatchClock.at(minute, added)
    assert clock.period is period
    assert clock.label == label
    assert str(clock) == label


def test_a_wrong_label_is_refused() -> None:
    with pytest.raises(ValidationError, match='expected "90\\+2\'"'):
        MatchClock(period=Period.SECOND_HALF, minute=90, added=2, label="92'")


@pytest.mark.parametrize(
    ("period", "minute", "added", "reason"),
    [
        (Period.FIRST_HALF, 50, 0, "outside 1H"),
        (Period.SECOND_HALF, 60, 2, "added minutes only follow"),
        (Period.SECOND_HALF, 121, 0, "less than or equal to 120"),
    ],
)
def test_impossible_clocks_are_refused(
    period: Period, minute: int, added: int, reason: str
) -> None:
    with pytest.raises(ValidationError, match=reason):
        MatchClock(period=period, minute=minute, added=added)


def test_clocks_sort_by_period_then_minute_then_added() -> None:
    clocks = [MatchClock.at(90, 2), MatchClock.at(45, 3), MatchClock.at(46), MatchClock.at(90)]
    assert [c.label for c in sorted(clocks, key=lambda c: c.sort_key)] == [
        "45+3'",
        "46'",
        "90'",
        "90+2'",
    ]


def test_penalties_read_pen() -> None:
    assert MatchClock(period=Period.PENALTIES, minute=120).label == "PEN"
