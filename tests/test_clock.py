"""The match clock writes minutes as football does and refuses impossible ones."""

import pytest
from pydantic import ValidationError

from events import (
    ADDED_TIME_AFTER,
    LAST_MINUTE,
    MatchClock,
    MinutePastPlayError,
    Period,
    format_minute,
    minute_of_play,
    parse_minute,
)


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


# ---------------------------------------------------------------- the vocabulary


def _every_clock() -> list[MatchClock]:
    """Every clock of play: each regulation minute of each period, and up to 30 added minutes
    after each period's last minute."""
    clocks = []
    for period in Period:
        if period is Period.PENALTIES:
            continue
        last = period.last_minute
        clocks += [
            MatchClock(period=period, minute=m) for m in range(period.first_minute, last + 1)
        ]
        clocks += [MatchClock(period=period, minute=last, added=a) for a in range(1, 31)]
    return clocks


def test_every_minute_label_parses_back_to_its_clock() -> None:
    """format and parse are inverses over all four periods of play, added time included."""
    clocks = _every_clock()
    assert len(clocks) == 120 + 4 * 30
    for clock in clocks:
        label = format_minute(clock.minute, clock.added)
        assert label == clock.label
        assert parse_minute(label) == clock
        assert parse_minute(label.rstrip("'")) == clock  # as typed on a command line
        assert parse_minute(f" {label} ") == clock


@pytest.mark.parametrize(
    ("text", "period", "label"),
    [
        ("1", Period.FIRST_HALF, "1'"),
        ("45+2", Period.FIRST_HALF, "45+2'"),
        ("46", Period.SECOND_HALF, "46'"),
        ("90+4'", Period.SECOND_HALF, "90+4'"),
        ("91", Period.EXTRA_TIME_FIRST, "91'"),
        ("105+1", Period.EXTRA_TIME_FIRST, "105+1'"),
        ("106", Period.EXTRA_TIME_SECOND, "106'"),
        ("120+3", Period.EXTRA_TIME_SECOND, "120+3'"),
    ],
)
def test_parse_minute_infers_the_period(text: str, period: Period, label: str) -> None:
    clock = parse_minute(text)
    assert (clock.period, clock.label) == (period, label)


@pytest.mark.parametrize("text", ["0", "-5", "60+2", "90+31", "PEN", "ninety", "", "9O"])
def test_parse_minute_refuses_what_is_not_a_minute_of_play(text: str) -> None:
    with pytest.raises(ValueError, match="a minute is written like 60 or 90\\+2"):
        parse_minute(text)


@pytest.mark.parametrize(
    ("text", "minute"), [("121", "121"), ("200'", "200"), ("120+31", "120+31")]
)
def test_a_minute_past_any_match_is_told_apart_from_one_written_wrong(
    text: str, minute: str
) -> None:
    with pytest.raises(MinutePastPlayError, match="is past the end of play") as info:
        parse_minute(text)
    assert info.value.minute == minute


def test_periods_know_their_names_bounds_and_lengths() -> None:
    assert [p.short for p in Period] == ["1H", "2H", "ET1", "ET2", "PEN"]
    assert [p.long_name for p in Period] == [
        "first half",
        "second half",
        "first half of extra time",
        "second half of extra time",
        "penalty shoot-out",
    ]
    assert [p.length for p in Period] == [45, 45, 15, 15, 0]
    assert ADDED_TIME_AFTER == (45, 90, 105, 120)
    assert LAST_MINUTE == 120
    assert [Period.of_minute(m) for m in (1, 45, 46, 90, 91, 105, 106, 120)] == [
        Period.FIRST_HALF,
        Period.FIRST_HALF,
        Period.SECOND_HALF,
        Period.SECOND_HALF,
        Period.EXTRA_TIME_FIRST,
        Period.EXTRA_TIME_FIRST,
        Period.EXTRA_TIME_SECOND,
        Period.EXTRA_TIME_SECOND,
    ]
    with pytest.raises(ValueError, match="in no period"):
        Period.of_minute(121)


def test_display_is_the_period_and_the_label() -> None:
    assert MatchClock.at(23).display == "1H 23'"
    assert MatchClock.at(90, 2).display == "2H 90+2'"
    assert MatchClock.at(105, 1).display == "ET1 105+1'"


@pytest.mark.parametrize(
    ("period", "elapsed", "expected"),
    [
        (Period.FIRST_HALF, 0, (1, 0)),
        (Period.FIRST_HALF, 44, (45, 0)),
        (Period.FIRST_HALF, 47, (45, 3)),  # 47:30 in the first half is 45+3'
        (Period.SECOND_HALF, 44, None),  # before the second half starts
        (Period.SECOND_HALF, 45, (46, 0)),
        (Period.SECOND_HALF, 93, (90, 4)),
        (Period.EXTRA_TIME_FIRST, 90, (91, 0)),
        (Period.EXTRA_TIME_FIRST, 105, (105, 1)),
        (Period.EXTRA_TIME_SECOND, 105, (106, 0)),
        (Period.EXTRA_TIME_SECOND, 121, (120, 2)),
    ],
)
def test_minute_of_play_reads_a_continuous_clock(
    period: Period, elapsed: int, expected: tuple[int, int] | None
) -> None:
    assert minute_of_play(period, elapsed) == expected
