"""Expand a match file into the full, numbered event stream.

The file lists the periods and the incidents; the stream adds what every match has: a kickoff
for each period, a clock tick at the start of every minute played (added minutes included),
the end of each period, the shoot-out kicks, and full time. Events are numbered 1, 2, 3, ...
in the order they happen, and each carries the score after it where it has one. What an
incident becomes is its own (``Incident.events``, simulator/_matchfile.py): this module only
places its events on the clock.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Iterator
from dataclasses import dataclass

from events import (
    PERIOD_BOUNDS,
    ClockTick,
    Event,
    FullTime,
    KickOff,
    MatchClock,
    MatchInfo,
    MatchState,
    Period,
    PeriodEnd,
    ShootoutKick,
    apply,
)
from simulator._matchfile import Expansion, Incident, Match, ShootoutKickSpec

__all__ = ["Scheduled", "expand", "state_before"]

#: Seconds between two shoot-out kicks, in match time.
SHOOTOUT_KICK_SECONDS = 60


@dataclass(frozen=True, slots=True)
class Scheduled:
    """One event of the stream and its place in match time.

    Attributes:
        play_s: seconds of play from kickoff to this event, breaks excluded.
        breaks: number of breaks (half time, ...) before it; the scheduler decides how long
            each break lasts on the wall clock.
        event: the event, its ``emitted_at`` set to the nominal real-world time.
    """

    play_s: float
    breaks: int
    event: Event


def _kickoff_at(match: Match) -> dt.datetime:
    return match.kickoff.utc()


def match_info(match: Match) -> MatchInfo:
    """What the match file says about the match, as kick_off and the state carry it."""
    kickoff = match.kickoff
    local = None
    if kickoff.time is not None:  # the venue's local time, with its UTC offset (UTC if unknown)
        offset = dt.timedelta(0)
        if kickoff.utc_offset is not None:
            sign = -1 if kickoff.utc_offset[0] == "-" else 1
            hours, minutes = int(kickoff.utc_offset[1:3]), int(kickoff.utc_offset[4:6])
            offset = sign * dt.timedelta(hours=hours, minutes=minutes)
        local = dt.datetime.combine(kickoff.date, kickoff.time, dt.timezone(offset))
    return MatchInfo(
        competition=match.competition.name,
        stage=match.competition.stage,
        venue=match.venue.name if match.venue else None,
        city=match.venue.city if match.venue else None,
        date=kickoff.date,
        kickoff=local,
    )


def _minute_index(period: Period, clock: MatchClock) -> int:
    first, last = PERIOD_BOUNDS[period]
    return (last - first + 1) + clock.added - 1 if clock.added else clock.minute - first


def expand(match: Match) -> list[Scheduled]:
    """The whole event stream of ``match``, numbered from seq 1."""
    return list(_generate(match))


def _generate(match: Match) -> Iterator[Scheduled]:
    kickoff_wall = _kickoff_at(match)
    home, away = match.home.ref(), match.away.ref()
    info = match_info(match)
    score = {home.code: 0, away.code: 0}
    play = Expansion(score=score, goals={}, envelope=dict)  # envelope: set per incident
    seq = 0
    play_s = 0.0
    breaks = 0

    by_minute: dict[tuple[int, int, int], list[tuple[int, Incident]]] = {}
    for idx, inc in enumerate(match.timeline):
        by_minute.setdefault(inc.clock.sort_key, []).append((idx, inc))

    def stamp(offset_s: float) -> dt.datetime:
        return kickoff_wall + dt.timedelta(seconds=offset_s + breaks * match.break_minutes * 60)

    def common(clock: MatchClock, at: float) -> dict[str, object]:
        nonlocal seq
        seq += 1
        return {"match_id": match.match_id, "seq": seq, "clock": clock, "emitted_at": stamp(at)}

    regulation = [p for p in match.periods if p.period is not Period.PENALTIES]
    last_period = regulation[-1].period
    for spec in regulation:
        period = spec.period
        first, last = PERIOD_BOUNDS[period]
        start = play_s
        yield Scheduled(
            start,
            breaks,
            KickOff(
                **common(MatchClock.at(first, 0, period), start), home=home, away=away, info=info
            ),
        )
        minutes = [MatchClock.at(m, 0, period) for m in range(first, last + 1)]
        minutes += [MatchClock.at(last, a, period) for a in range(1, spec.added_minutes + 1)]
        for clock in minutes:
            tick_at = start + _minute_index(period, clock) * 60
            yield Scheduled(tick_at, breaks, ClockTick(**common(clock, tick_at)))
            incidents = sorted(by_minute.get(clock.sort_key, []), key=lambda p: (p[1].second, p[0]))
            for _, inc in incidents:
                at = tick_at + inc.second
                play.envelope = functools.partial(common, clock, at)
                for event in inc.events(play):
                    yield Scheduled(at, breaks, event)
        play_s = start + len(minutes) * 60
        end_clock = minutes[-1]
        if period is not last_period or any(p.period is Period.PENALTIES for p in match.periods):
            yield Scheduled(
                play_s, breaks, PeriodEnd(**common(end_clock, play_s), score=dict(score))
            )
            breaks += 1

    shootout: dict[str, int] | None = None
    final_clock = MatchClock.at(
        PERIOD_BOUNDS[last_period][1], regulation[-1].added_minutes, last_period
    )
    if match.shootout:
        shootout = {home.code: 0, away.code: 0}
        final_clock = MatchClock(period=Period.PENALTIES, minute=120)
        for kick in match.shootout:
            shootout[kick.team] += kick.scored
            yield Scheduled(play_s, breaks, _kick(kick, common(final_clock, play_s), shootout))
            play_s += SHOOTOUT_KICK_SECONDS
    yield Scheduled(
        play_s,
        breaks,
        FullTime(
            **common(final_clock, play_s),
            score=dict(score),
            shootout=shootout,
            winner=match.winner,
        ),
    )


def _kick(
    kick: ShootoutKickSpec, envelope: dict[str, object], shootout: dict[str, int]
) -> ShootoutKick:
    """One kick of the shoot-out, with the shoot-out's score after it."""
    return ShootoutKick(
        **envelope,
        team=kick.team,
        taker=kick.taker,
        scored=kick.scored,
        shootout=dict(shootout),
    )


def state_before(match: Match, stream: list[Scheduled], index: int) -> MatchState:
    """The state after every event before ``stream[index]``: what a mid-match start publishes."""
    state = MatchState.new(
        match.match_id, match.home.ref(), match.away.ref(), info=match_info(match)
    )
    for item in stream[:index]:
        state = apply(state, item.event)
    return state
