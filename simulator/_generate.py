"""A seeded match simulator: plausible matches for demos and load tests.

The same seed and teams give the same match, byte for byte, on any machine (one
``random.Random`` seeded with a string, drawn from in a fixed order). What it models:

- goals: a Poisson process per team, its rate the team's expected goals over 90 minutes
  (added time included), 45% of it in the first half and 55% in the second; extra time at
  80% of the regulation rate per minute. The rate comes from ``xg`` when given, else from the
  teams' 2022 World Cup records (:data:`~simulator._teams` codes; an unknown team is average),
  around :data:`BASE_RATE` goals per team and match;
- added time: first half ``1 + Poisson(2.5)`` minutes (at most 10), second half
  ``3 + Poisson(3.5)`` (at most 15), extra time ``Poisson(0.8)`` and ``1 + Poisson(1)``;
- about 1.9 yellow cards per team, a second yellow when a booked player is booked again, a
  straight red about once in ten matches; three to five substitutions per team in at most
  three windows plus half time, and one more in extra time;
- a goal ruled out after review in about one match in ten;
- knockout matches level after 90 minutes go to extra time, and level after 120 to a
  shoot-out (each kick scored with probability 0.75, five each then sudden death);
- the full feed (:data:`FEED_RATES`, per match of two average teams): about 25 shots, 8-9 of
  them on target, 10 corners, 23 fouls and 4 offsides. Every goal but an own goal is a shot
  (outcome goal, with its expected goals: a penalty 0.76); the other shots are saved, off
  target, blocked or hit the woodwork; every card punishes a foul, which it names; a penalty
  scored follows a foul and a ``penalty_awarded``. The team with the higher expected goals
  takes the larger share of the shots, corners and offsides. These are drawn from a random
  stream of their own, so the goals, cards, substitutions and timings of a seed are those of
  its lean feed (``--feed lean``).

The full feed's rates are those typical of top-level men's football. Shots and shots on target:
the Premier League's 2015-16 season averaged 25.8 shots a match, 8.4 on target (5.8 of them
saved) and 2.7 goals (Opta's figures, as the Press Association reported them: "Here's what the
average Premier League game looked like this season", aol.co.uk, 18 May 2016). Corners (10),
fouls (23) and offsides (4) are the rates the project's issue gives for top-level football,
unchecked against a published table here; StatsBomb match 15986 (Barcelona 2-2 Girona, La Liga
2018-19: 10 corners, 28 fouls, 2 offsides) lies within the simulator's spread, which
``tests/test_generate.py`` checks.

Players are squad numbers (``ARG #9``): 1-11 start, 12-26 are the bench, 1, 12 and 23 keep goal.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from events import PERIOD_BOUNDS, GoalMethod, MatchFileError, Period
from simulator._matchfile import Match, parse_match
from simulator._shootout import is_decided
from simulator._teams import team_name, worldcup_2022_record

__all__ = ["BASE_RATE", "FEED_RATES", "SIM_DATE", "expected_goals", "simulate_match"]

#: Goals per team and match (90 minutes and added time) for two average teams: 2.6 a match,
#: close to the World Cups of 2014-2022 (2.67, 2.64, 2.69) and Europe's big leagues.
BASE_RATE = 1.3
#: Kickoff date of simulated matches unless told otherwise (the 2026 World Cup's first day).
SIM_DATE = dt.date(2026, 6, 11)
#: Matches of average scoring a team's record is shrunk towards (it played 3 to 7).
_PRIOR_MATCHES = 4.0
_SHOOTOUT_SCORED = 0.75
_DISALLOWED_SHARE = 0.1
_METHODS: tuple[tuple[GoalMethod, float], ...] = (
    ("penalty", 0.10),
    ("header", 0.17),
    ("free_kick", 0.03),
    ("own_goal", 0.03),
    ("open_play", 0.67),
)
_REVIEW_REASONS = (
    "offside in the build-up, after a VAR review",
    "handball by the scorer, after a VAR review",
    "foul in the build-up, after a VAR review",
)
_KEEPERS = frozenset({1, 12, 23})
#: How likely a squad number is to score (position by number, roughly).
_SCORER_WEIGHT = {9: 6.0, 10: 4.0, 7: 4.0, 11: 4.0, 8: 2.0, 6: 1.5, 4: 1.0, 5: 1.0, 2: 0.7, 3: 0.7}
_TAKER_ORDER = (10, 9, 7, 11, 8, 6, 14, 19, 20, 21, 17, 18, 4, 5, 3, 2)

#: The full feed per match of two average teams, both teams together (sources: the module's
#: docstring). ``shots`` excludes the goals' shots (2.6 a match), so all shots come to 25;
#: ``fouls`` excludes those a card or a penalty follows (about 4), so all fouls come to 23.
FEED_RATES = {"shots": 22.4, "corners": 10.0, "fouls": 19.2, "offsides": 4.0}
#: Minutes of a match those rates are spread over: 90 and the added time drawn above (3.5 in
#: the first half, 6.5 in the second, on average).
_FEED_MINUTES = 100.0
#: How a shot that does not go in ends: 27% saved makes 8-9 on target with the goals.
_MISSES = (("saved", 0.27), ("off_target", 0.41), ("blocked", 0.29), ("woodwork", 0.03))
#: Mean expected goals of a shot that does not go in, and of a goal's shot by method (a
#: penalty's is the usual 0.76; a direct free kick's about 0.06).
_MISS_XG = 0.07
_GOAL_XG = {"open_play": 0.3, "header": 0.2, "free_kick": 0.06, "penalty": 0.76}
_SHOT_WEIGHT = {9: 6.0, 10: 5.0, 7: 4.0, 11: 4.0, 8: 3.0, 6: 2.0, 4: 1.0, 5: 1.0, 2: 1.0, 3: 1.0}


def expected_goals(home: str, away: str) -> tuple[float, float]:
    """Expected goals of ``home`` and ``away`` against each other, from 2022 records.

    Attack and defence strengths are goals scored and conceded per match relative to the
    tournament average, each shrunk towards average by :data:`_PRIOR_MATCHES` matches.
    """
    records = worldcup_2022_record()
    played = sum(r[0] for r in records.values())
    average = sum(r[1] for r in records.values()) / played

    def strength(code: str, column: int) -> float:
        games, scored, conceded = records.get(code, (0, 0, 0))
        goals = (scored, conceded)[column - 1]
        return (goals + _PRIOR_MATCHES * average) / (games + _PRIOR_MATCHES) / average

    return (
        round(BASE_RATE * strength(home, 1) * strength(away, 2), 3),
        round(BASE_RATE * strength(away, 1) * strength(home, 2), 3),
    )


def _poisson(rng: random.Random, mean: float) -> int:
    """A Poisson draw (Knuth's method; the means here are small)."""
    limit, k, p = math.exp(-mean), 0, rng.random()
    while p > limit:
        k += 1
        p *= rng.random()
    return k


@dataclass(order=True, slots=True)
class _Moment:
    """Something that happens, before players are put to it."""

    period: int
    elapsed: int  # seconds into the period
    order: int  # ties: the order drawn
    kind: str = field(compare=False)
    side: int = field(compare=False)  # 0 home, 1 away
    detail: Any = field(compare=False, default=None)


@dataclass(slots=True)
class _Squad:
    code: str
    on_pitch: list[int] = field(default_factory=lambda: list(range(1, 12)))
    bench: list[int] = field(default_factory=list)
    booked: set[int] = field(default_factory=set)
    came_on: set[int] = field(default_factory=set)

    def name(self, number: int) -> str:
        return f"{self.code} #{number}"

    def outfield(self) -> list[int]:
        return [n for n in self.on_pitch if n not in _KEEPERS]


class _Simulation:
    """One simulated match, drawn from ``rng`` in a fixed order."""

    def __init__(
        self,
        rng: random.Random,
        codes: tuple[str, str],
        xg: tuple[float, float],
        knockout: bool,
        feed_rng: random.Random,
    ) -> None:
        self.rng = rng
        self.codes = codes
        self.xg = xg
        self.knockout = knockout
        self.added: dict[int, int] = {}
        self.moments: list[_Moment] = []
        #: The full feed's own stream: what it draws changes nothing else of the match.
        self.feed_rng = feed_rng

    def length(self, period: int) -> int:
        return Period(period).length + self.added[period]

    def moment(self, period: int, kind: str, side: int, detail: Any = None) -> _Moment:
        elapsed = self.rng.randrange(self.length(period) * 60)
        m = _Moment(period, elapsed, len(self.moments), kind, side, detail)
        self.moments.append(m)
        return m

    def goals(self, period: int, share: float) -> list[int]:
        per_side = []
        for side in (0, 1):
            n = _poisson(self.rng, self.xg[side] * share)
            for _ in range(n):
                self.moment(period, "goal", side, _pick(self.rng, _METHODS))
            per_side.append(n)
        return per_side

    def run(self) -> list[int]:
        rng = self.rng
        self.added[1] = min(10, 1 + _poisson(rng, 2.5))
        self.added[2] = min(15, 3 + _poisson(rng, 3.5))
        score = [0, 0]
        for period, share in ((1, 0.45), (2, 0.55)):
            for side, n in enumerate(self.goals(period, share)):
                score[side] += n
        periods = [1, 2]
        if self.knockout and score[0] == score[1]:
            self.added[3] = min(3, _poisson(rng, 0.8))
            self.added[4] = min(4, 1 + _poisson(rng, 1.0))
            for period in (3, 4):
                share = 0.8 * self.length(period) / 90
                for side, n in enumerate(self.goals(period, share)):
                    score[side] += n
            periods += [3, 4]
        for side in (0, 1):
            self._cards(side, periods)
            self._substitutions(side, periods)
        if rng.random() < _DISALLOWED_SHARE:
            side = 0 if rng.random() < self.xg[0] / (sum(self.xg) or 1) else 1
            goal = self.moment(rng.choice(periods[:2]), "goal", side, "open_play")
            review = min(goal.elapsed + rng.randrange(60, 181), self.length(goal.period) * 60 - 1)
            reason = rng.choice(_REVIEW_REASONS)
            later = _Moment(goal.period, review, len(self.moments), "disallowed", side, reason)
            self.moments.append(later)
            goal.detail = ("open_play", later)
        for period in (1, 2):
            self.moments.append(
                _Moment(period, self.length(period) * 60 - 1, len(self.moments), "possession", 0)
            )
        self._feed(periods)
        return periods

    def _feed(self, periods: list[int]) -> None:
        """The full feed's shots, corners, fouls and offsides, and the penalty awarded before
        each penalty goal, from :attr:`feed_rng` alone."""
        rng = self.feed_rng
        home = min(0.75, max(0.25, self.xg[0] / (sum(self.xg) or 1)))
        attack = (home, 1 - home)
        for period in periods:
            minutes = self.length(period) / _FEED_MINUTES
            for kind, rate in FEED_RATES.items():
                for side in (0, 1):
                    share = 0.5 if kind == "fouls" else attack[side]
                    for _ in range(_poisson(rng, rate * share * minutes)):
                        elapsed = rng.randrange(self.length(period) * 60)
                        self.moments.append(_Moment(period, elapsed, len(self.moments), kind, side))
        for goal in [m for m in self.moments if m.kind == "goal" and m.detail == "penalty"]:
            elapsed = max(0, goal.elapsed - rng.randrange(45, 121))
            self.moments.append(
                _Moment(goal.period, elapsed, len(self.moments), "penalty", goal.side)
            )

    def _cards(self, side: int, periods: list[int]) -> None:
        weights = {1: 0.8, 2: 1.2, 3: 1.2, 4: 1.2}
        total = sum(self.length(p) * weights[p] for p in periods)
        for kind, mean in (("yellow", 1.9), ("red", 0.05)):
            for _ in range(_poisson(self.rng, mean * total / 90)):
                period = _pick(self.rng, [(p, self.length(p) * weights[p]) for p in periods])
                self.moment(period, "card", side, kind)

    def _substitutions(self, side: int, periods: list[int]) -> None:
        rng = self.rng
        count = _pick(rng, [(2, 0.05), (3, 0.15), (4, 0.30), (5, 0.50)])
        at_half_time = min(count, _pick(rng, [(0, 0.65), (1, 0.27), (2, 0.08)]))
        for _ in range(at_half_time):
            self.moments.append(_Moment(2, 0, len(self.moments), "sub", side))
        rest = count - at_half_time
        windows = sorted(
            {max(0, int(rng.triangular(55, 89, 72)) - 46) for _ in range(min(3, rest))}
        )
        for i in range(rest):
            minute = windows[i % len(windows)] if windows else 0
            second = rng.randrange(60)
            self.moments.append(_Moment(2, minute * 60 + second, len(self.moments), "sub", side))
        if 3 in periods and rng.random() < 0.6:
            period = rng.choice((3, 4))
            self.moments.append(_Moment(period, 0, len(self.moments), "sub", side))


def _pick(rng: random.Random, weighted: Sequence[tuple[Any, float]]) -> Any:
    """One value of ``(value, weight)`` pairs."""
    point = rng.random() * sum(w for _, w in weighted)
    for value, weight in weighted:
        point -= weight
        if point < 0:
            return value
    return weighted[-1][0]


def _clock(period: int, elapsed: int) -> dict[str, int]:
    first, last = PERIOD_BOUNDS[Period(period)]
    index, second = divmod(elapsed, 60)
    regulation = Period(period).length
    if index < regulation:
        return {"minute": first + index, "added": 0, "second": second}
    return {"minute": last, "added": index - regulation + 1, "second": second}


def _choose(rng: random.Random, players: list[int], weights: dict[int, float]) -> int | None:
    if not players:
        return None
    return int(_pick(rng, [(n, weights.get(n, 2.0)) for n in players]))


class _Cast:
    """Puts players to the moments, in time order, and writes them as timeline incidents."""

    def __init__(self, sim: _Simulation, squads: tuple[_Squad, _Squad]) -> None:
        self.sim = sim
        self.rng = sim.rng
        self.squads = squads
        self.goal_ids: dict[int, str] = {}
        self.feed = sim.feed_rng
        self.fouls = 0

    def incidents(self) -> list[dict[str, Any]]:
        for squad in self.squads:
            squad.bench = [n for n in range(12, 27) if n not in _KEEPERS]
            self.rng.shuffle(squad.bench)
        timeline = []
        handlers = {
            "goal": self.goal,
            "disallowed": self.disallowed,
            "card": self.card,
            "sub": self.substitution,
            "possession": self.possession,
            "shots": self.shot,
            "corners": self.corner,
            "fouls": self.foul,
            "offsides": self.offside,
            "penalty": self.penalty,
        }
        for m in sorted(self.sim.moments):
            base: dict[str, Any] = {**_clock(m.period, m.elapsed), "source": "simulated"}
            drawn = handlers[m.kind](m, self.squads[m.side], self.squads[1 - m.side])
            for incident in [drawn] if isinstance(drawn, dict) else drawn or []:
                timeline.append({"type": incident.pop("type"), **base, **incident})
        return timeline

    # ------------------------------------------------------------ the full feed (feed_rng)

    def goal_shot(self, method: str) -> dict[str, Any]:
        """The shot a goal came from: its expected goals, body part, and where it was taken."""
        rng = self.feed
        if method == "penalty":
            return {"xg": 0.76, "body_part": "right_foot", "inside_box": True}
        mean = _GOAL_XG.get(method, _GOAL_XG["open_play"])
        xg = mean if method == "free_kick" else min(0.95, max(0.03, rng.expovariate(1 / mean)))
        foot = "right_foot" if rng.random() < 0.7 else "left_foot"
        inside = method == "header" or (method == "open_play" and rng.random() < 0.85)
        body = "head" if method == "header" else foot
        return {"xg": round(xg, 2), "body_part": body, "inside_box": inside}

    def shot(self, m: _Moment, own: _Squad, other: _Squad) -> dict[str, Any] | None:
        rng = self.feed
        player = _choose(rng, own.outfield(), _SHOT_WEIGHT)
        if player is None:
            return None
        outcome = _pick(rng, _MISSES)
        head = rng.random() < 0.15
        inside = head or rng.random() < 0.6
        xg = min(0.9, max(0.01, rng.expovariate(1 / _MISS_XG) * (1.4 if inside else 0.5)))
        incident = {"type": "shot", "team": own.code, "player": own.name(player)} | {
            "outcome": outcome,
            "xg": round(xg, 2),
            "body_part": "head" if head else ("right_foot" if rng.random() < 0.7 else "left_foot"),
            "inside_box": inside,
        }
        keeper = next((n for n in other.on_pitch if n in _KEEPERS), None)
        if outcome == "saved" and keeper is not None:
            incident["keeper"] = other.name(keeper)
        return incident

    def corner(self, m: _Moment, own: _Squad, other: _Squad) -> dict[str, Any] | None:
        return {"type": "corner", "team": own.code}

    def offside(self, m: _Moment, own: _Squad, other: _Squad) -> dict[str, Any] | None:
        player = _choose(self.feed, own.outfield(), _SCORER_WEIGHT)
        named = {"player": own.name(player)} if player is not None else {}
        return {"type": "offside", "team": own.code} | named

    def foul(
        self, m: _Moment, own: _Squad, other: _Squad, player: int | None = None
    ) -> dict[str, Any]:
        """A foul by ``own`` (by ``player``, or one drawn), with its id for a card to name."""
        if player is None:
            player = _choose(self.feed, own.outfield(), {})
        self.fouls += 1
        named = {"player": own.name(player)} if player is not None else {}
        return {"type": "foul", "id": f"f{self.fouls}", "team": own.code} | named

    def penalty(self, m: _Moment, own: _Squad, other: _Squad) -> list[dict[str, Any]]:
        """A foul in the box by the other side, and the penalty it gives ``own``."""
        foul = self.foul(m, other, own)
        return [foul, {"type": "penalty_awarded", "team": own.code, "foul": foul["id"]}]

    def goal(self, m: _Moment, own: _Squad, other: _Squad) -> dict[str, Any] | None:
        method, review = m.detail if isinstance(m.detail, tuple) else (m.detail, None)
        if method == "own_goal":
            player = _choose(self.rng, other.outfield(), {2: 3.0, 3: 3.0, 4: 3.0, 5: 3.0})
            name = other.name(player) if player is not None else None
        elif method == "penalty":
            player = next((n for n in _TAKER_ORDER if n in own.on_pitch), None)
            name = own.name(player) if player is not None else None
        else:
            player = _choose(self.rng, own.outfield(), _SCORER_WEIGHT)
            name = own.name(player) if player is not None else None
        if name is None:
            return None
        goal_id = f"g{len(self.goal_ids) + 1}"
        self.goal_ids[id(m)] = goal_id
        if review is not None:
            self.goal_ids[id(review)] = goal_id
        incident: dict[str, Any] = {"type": "goal", "id": goal_id, "team": own.code}
        incident["scorer"] = name
        if method != "own_goal":
            incident["shot"] = self.goal_shot(method)
        return incident | {"method": method}

    def disallowed(self, m: _Moment, own: _Squad, other: _Squad) -> dict[str, Any] | None:
        if id(m) not in self.goal_ids:
            return None  # the goal found no scorer
        return {"type": "goal_disallowed", "goal": self.goal_ids[id(m)], "reason": m.detail}

    def card(self, m: _Moment, own: _Squad, other: _Squad) -> list[dict[str, Any]] | None:
        # A booked player takes care: a second booking is rare, as on real pitches.
        player = _choose(self.rng, own.outfield(), dict.fromkeys(own.booked, 0.1))
        if player is None:
            return None
        card = m.detail
        if card == "yellow" and player in own.booked:
            card = "second_yellow"
        own.booked.add(player)
        if card != "yellow":
            own.on_pitch.remove(player)
        foul = self.foul(m, own, other, player)
        booked = {"type": "card", "team": own.code, "player": own.name(player), "card": card}
        return [foul, booked | {"foul": foul["id"]}]

    def substitution(self, m: _Moment, own: _Squad, other: _Squad) -> dict[str, Any] | None:
        starters = [n for n in own.outfield() if n not in own.came_on]
        off = _choose(self.rng, starters, {9: 3.0, 10: 3.0, 11: 3.0, 7: 3.0, 8: 2.5})
        if off is None or not own.bench:
            return None
        on = own.bench.pop()
        own.came_on.add(on)
        own.on_pitch[own.on_pitch.index(off)] = on
        return {"type": "substitution", "team": own.code} | {
            "player_off": own.name(off),
            "player_on": own.name(on),
        }

    def possession(self, m: _Moment, own: _Squad, other: _Squad) -> dict[str, Any] | None:
        xg = self.sim.xg
        lean = 30 * (xg[0] - xg[1]) / (sum(xg) or 1)
        home = round(min(75.0, max(25.0, 50 + lean + self.rng.gauss(0, 5))))
        codes = self.sim.codes
        since = PERIOD_BOUNDS[Period(m.period)][0]
        share = {codes[0]: home, codes[1]: 100 - home}
        return {"type": "possession", "share": share, "since_minute": since}


def _shootout(rng: random.Random, squads: tuple[_Squad, _Squad]) -> list[dict[str, Any]]:
    first = rng.randrange(2)
    order = (first, 1 - first)
    takers = [
        sorted(s.on_pitch, key=lambda n: (n in _KEEPERS, _order_of(n))) or [1] for s in squads
    ]
    kicks: list[dict[str, Any]] = []
    taken, scored = [0, 0], [0, 0]
    while not is_decided((taken[0], taken[1]), (scored[0], scored[1])):
        side = order[sum(taken) % 2]
        goal = rng.random() < _SHOOTOUT_SCORED
        taker = takers[side][taken[side] % len(takers[side])]
        taken[side] += 1
        scored[side] += goal
        kicks.append(
            {"team": squads[side].code, "taker": squads[side].name(taker), "scored": goal}
            | {"source": "simulated"}
        )
    return kicks


def _order_of(number: int) -> int:
    return _TAKER_ORDER.index(number) if number in _TAKER_ORDER else len(_TAKER_ORDER) + number


def simulate_match(
    seed: int,
    home: str = "ARG",
    away: str = "ENG",
    *,
    xg: tuple[float, float] | None = None,
    knockout: bool = False,
    date: dt.date = SIM_DATE,
) -> Match:
    """A plausible match between ``home`` and ``away`` (FIFA codes), the same for a seed.

    Args:
        seed: any non-negative integer; the match id is ``sim-{seed}-{home}-{away}``.
        home: home team code.
        away: away team code.
        xg: expected goals of home and away over 90 minutes; default from 2022 records.
        knockout: level after 90 minutes goes to extra time, then penalties.
        date: the kickoff date written into the file (kickoff at 19:00 UTC).

    Raises:
        MatchFileError: bad arguments (a negative seed or expected goals, equal teams, a
            team code that is not 2-5 capitals or digits).
    """
    where = f"sim:{seed}"
    if seed < 0:
        raise MatchFileError(where, [f"seed: must be 0 or more, not {seed}"])
    bad = [code for code in (home, away) if not re.fullmatch(r"[A-Z0-9]{2,5}", code)]
    if bad:
        raise MatchFileError(where, [f"team {bad[0]!r}: expected a FIFA code such as ARG"])
    if home == away:
        raise MatchFileError(where, [f"home and away are both {home}; a team cannot play itself"])
    rates = xg if xg is not None else expected_goals(home, away)
    if not all(0 <= r <= 10 for r in rates):
        raise MatchFileError(where, [f"xg: expected goals must be 0-10, not {rates}"])
    drawn = f"{seed}:{home}:{away}:{rates}:{knockout}"
    rng = random.Random(f"matchcast-sim:{drawn}")
    sim = _Simulation(rng, (home, away), rates, knockout, random.Random(f"matchcast-feed:{drawn}"))
    periods = sim.run()
    squads = (_Squad(home), _Squad(away))
    timeline = _Cast(sim, squads).incidents()
    score = {home: 0, away: 0}
    ruled_out = {i["goal"] for i in timeline if i["type"] == "goal_disallowed"}
    for inc in timeline:
        if inc["type"] == "goal" and inc["id"] not in ruled_out:
            score[inc["team"]] += 1
    shootout = []
    if knockout and score[home] == score[away]:
        shootout = _shootout(rng, squads)
        periods.append(5)
    result: dict[str, Any] = {"score": score, "source": "simulated"}
    if shootout:
        result["shootout"] = {
            code: sum(k["scored"] for k in shootout if k["team"] == code) for code in (home, away)
        }
    note = "simulated by matchcast; players are squad numbers"
    how = f"xg {rates[0]:g} v {rates[1]:g}" + (" (given)" if xg is not None else " (2022 records)")
    data = {
        "match_id": f"sim-{seed}-{home}-{away}".lower(),
        "title": f"{team_name(home)} v {team_name(away)} (simulated, seed {seed})",
        "competition": {
            "name": "Simulated match",
            "stage": "Knockout" if knockout else None,
            "knockout": knockout,
            "source": "simulated",
        },
        "kickoff": {"date": date, "time": "19:00", "utc_offset": "+00:00", "source": "simulated"},
        "home": {"code": home, "name": team_name(home), "source": "simulated", "note": note},
        "away": {"code": away, "name": team_name(away), "source": "simulated", "note": note},
        "periods": [
            {"period": p, "added_minutes": sim.added.get(p, 0), "source": "simulated"}
            for p in periods
        ],
        "timeline": timeline,
        "shootout": shootout,
        "result": result,
        "sources": {
            "simulator": f"matchcast simulate --seed {seed} --home {home} --away {away}"
            + (" --knockout" if knockout else ""),
            "rates": how,
        },
    }
    return parse_match(data, path=where)
