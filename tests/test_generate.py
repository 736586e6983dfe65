"""The simulator: reproducible, plausible matches, and the statistics to prove it."""

from __future__ import annotations

import hashlib
import os
import statistics
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from events import (
    Card,
    Foul,
    Goal,
    MatchFileError,
    PenaltyAwarded,
    Period,
    Shot,
    TeamStats,
    replay_state,
)
from simulator import (
    BASE_RATE,
    GoalDisallowedIncident,
    Match,
    dump_match,
    expand,
    expected_goals,
    lean_match,
    load_match,
    resolve_matches,
    simulate_match,
)
from tests._cli import run_cli
from tests._statsbomb import final_state, import_sample

# Two teams the 2022 records do not know play at the average rate, BASE_RATE each.
AVERAGE = ("AAA", "BBB")
SEEDS = range(1500)

# Targets, with the real figures they stand for:
#: goals per match: World Cups 2014-2022 2.67, 2.64, 2.69; big European leagues 2.6-3.0.
GOALS_PER_MATCH = (2.45, 2.75)
#: draws after 90 minutes: about a quarter of matches (World Cups 2014-2022: 14-22%
#: of group matches; leagues 22-28%); two Poisson(1.3) teams draw 26% of the time.
DRAW_SHARE = (0.21, 0.31)
#: added minutes: first half mostly 1-6 with a mean near 3.5, second half 3-12 near 6.5.
FIRST_HALF_ADDED_MEAN = (3.0, 4.0)
SECOND_HALF_ADDED_MEAN = (6.0, 7.2)


@pytest.fixture(scope="module")
def average_matches() -> list[Match]:
    return [simulate_match(seed, *AVERAGE) for seed in SEEDS]


def test_same_seed_same_match_byte_for_byte() -> None:
    """Two runs of one seed give the same file."""
    assert dump_match(simulate_match(7)) == dump_match(simulate_match(7))


def test_same_seed_same_bytes_in_another_process() -> None:
    """The match does not depend on the process (hash seeds, import order)."""
    code = "from simulator import dump_match, simulate_match; print(dump_match(simulate_match(7)))"
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": hashseed},
        ).stdout
        for hashseed in ("1", "2")
    }
    assert outputs == {dump_match(simulate_match(7)) + "\n"}


def test_different_seeds_give_different_matches(average_matches: list[Match]) -> None:
    """Seeds are load-test fodder: each names a distinct match."""
    texts = {dump_match(m) for m in average_matches[:200]}
    assert len(texts) == 200
    assert len({m.match_id for m in average_matches}) == len(SEEDS)


def test_goals_per_match_and_draws_hit_the_targets(average_matches: list[Match]) -> None:
    """Mean goals and the share of draws over many seeds are those of real football."""
    goals = [sum(m.result.score.values()) for m in average_matches]
    draws = sum(len(set(m.result.score.values())) == 1 for m in average_matches)
    mean = statistics.mean(goals)
    assert GOALS_PER_MATCH[0] <= mean <= GOALS_PER_MATCH[1], mean
    assert DRAW_SHARE[0] <= draws / len(SEEDS) <= DRAW_SHARE[1], draws / len(SEEDS)
    # Poisson: the variance is close to the mean, and 0-0 comes up about e^-2.6 = 7%.
    assert 0.8 <= statistics.variance(goals) / mean <= 1.2
    assert 0.05 <= goals.count(0) / len(SEEDS) <= 0.1


def test_added_time_is_distributed_like_real_added_time(average_matches: list[Match]) -> None:
    """First half about 3.5 minutes (1-10), second half about 6.5 (3-15)."""
    first = [m.periods[0].added_minutes for m in average_matches]
    second = [m.periods[1].added_minutes for m in average_matches]
    assert FIRST_HALF_ADDED_MEAN[0] <= statistics.mean(first) <= FIRST_HALF_ADDED_MEAN[1]
    assert SECOND_HALF_ADDED_MEAN[0] <= statistics.mean(second) <= SECOND_HALF_ADDED_MEAN[1]
    assert min(first) >= 1
    assert max(first) <= 10
    assert min(second) >= 3
    assert max(second) <= 15
    assert statistics.mean(second) > statistics.mean(first) + 2
    # Spread, not a constant: most matches fall in a few common values.
    assert len(set(first)) >= 5
    assert len(set(second)) >= 7


def test_cards_substitutions_and_ruled_out_goals_come_at_real_rates(
    average_matches: list[Match],
) -> None:
    """About 4 cards, 8-9 substitutions a match; a red in about one match in eight; a goal
    ruled out in about one in ten."""
    kinds = Counter(i.type for m in average_matches for i in m.timeline)
    n = len(SEEDS)
    assert 3.2 <= kinds["card"] / n <= 4.8
    assert 7.5 <= kinds["substitution"] / n <= 9.5
    reds = sum(
        1 for m in average_matches for i in m.timeline if i.type == "card" and i.card != "yellow"
    )
    assert 0.06 <= reds / n <= 0.2
    ruled_out = sum(any(i.type == "goal_disallowed" for i in m.timeline) for m in average_matches)
    assert 0.06 <= ruled_out / n <= 0.14


def test_players_sent_off_or_substituted_take_no_further_part() -> None:
    """Nobody scores, is booked or is substituted after leaving the pitch."""
    for seed in range(300):
        match = simulate_match(seed, knockout=True)
        gone: set[str] = set()
        for inc in sorted(match.timeline, key=lambda i: (i.clock.sort_key, i.second)):
            names = {
                "goal": [getattr(inc, "scorer", "")] if inc.type == "goal" else [],
                "card": [getattr(inc, "player", "")],
                "substitution": [getattr(inc, "player_off", "")],
            }.get(inc.type, [])
            if inc.type == "goal" and getattr(inc, "method", None) == "own_goal":
                names = []  # an own goal's scorer is an opponent, checked the same way below
            assert not gone & set(names), (seed, inc)
            if inc.type == "card" and inc.card != "yellow":
                gone.add(inc.player)
            if inc.type == "substitution":
                gone.add(inc.player_off)
        takers = {k.taker for k in match.shootout}
        assert not takers & gone, seed


def test_knockout_matches_go_to_extra_time_and_penalties_when_level() -> None:
    """Level after 90 -> extra time; level after 120 -> a shoot-out with a winner."""
    extra_time = shootouts = 0
    for seed in range(400):
        match = simulate_match(seed, *AVERAGE, knockout=True)
        after_90 = match.score_after(Period.SECOND_HALF)
        played = [p.period for p in match.periods]
        assert (len(played) > 2) == (len(set(after_90.values())) == 1)
        extra_time += len(played) > 2
        shootouts += bool(match.shootout)
        assert match.winner is not None
        state = replay_state(match.match_id, [s.event for s in expand(match)])
        assert state.winner == match.winner
    assert 0.2 <= extra_time / 400 <= 0.33
    assert 0.08 <= shootouts / 400 <= 0.2


def test_group_matches_may_end_level() -> None:
    """Without --knockout a level match simply ends."""
    candidates = (simulate_match(s) for s in range(50))
    match = next(m for m in candidates if len(set(m.result.score.values())) == 1)
    assert [p.period for p in match.periods] == [Period.FIRST_HALF, Period.SECOND_HALF]
    assert match.winner is None


def test_expected_goals_drive_the_score() -> None:
    """A side given 3.0 expected goals against 0.4 wins most matches."""
    wins = sum(simulate_match(s, "BRA", "QAT", xg=(3.0, 0.4)).winner == "BRA" for s in range(200))
    assert wins >= 150


def test_rates_come_from_2022_records() -> None:
    """Strong attacks score more; unknown teams are average."""
    assert expected_goals(*AVERAGE) == (BASE_RATE, BASE_RATE)
    fra, qat = expected_goals("FRA", "QAT")
    assert fra > BASE_RATE > qat


def test_a_ruled_out_goal_is_retracted_and_replays_to_the_result() -> None:
    """The disallowed incident names its goal, and the stream folds to the recorded score."""
    candidates = (simulate_match(s) for s in range(100))
    match = next(
        m for m in candidates if any(isinstance(i, GoalDisallowedIncident) for i in m.timeline)
    )
    stream = [s.event for s in expand(match)]
    retracted = next(e for e in stream if e.type == "goal_disallowed")
    assert any(e.type == "goal" and e.goal_id == retracted.goal_id for e in stream)
    state = replay_state(match.match_id, stream)
    assert state.score == match.result.score
    assert retracted.goal_id not in {g.goal_id for g in state.goals}


def test_sim_spec_resolves_to_simulated_matches() -> None:
    """``sim:SEED``, ranges, teams and knockout are addressable for replay and load."""
    assert resolve_matches("sim:7") == [simulate_match(7)]
    assert [m.match_id for m in resolve_matches("sim:3-5")] == [
        "sim-3-arg-eng",
        "sim-4-arg-eng",
        "sim-5-arg-eng",
    ]
    (match,) = resolve_matches("sim:7:bra-ger:knockout")
    assert (match.home.code, match.away.code, match.competition.knockout) == ("BRA", "GER", True)


@pytest.mark.parametrize("spec", ["sim:x", "sim:5-1", "sim:1-20000", "sim:1:ARG-ARG"])
def test_bad_sim_specs_are_refused_clearly(spec: str) -> None:
    with pytest.raises(MatchFileError) as info:
        resolve_matches(spec)
    assert info.value.problems


def test_simulate_cli_writes_the_same_file_twice(tmp_path: Path) -> None:
    for name in ("a.yaml", "b.yaml"):
        result = run_cli("simulate", "--seed", "7", "-o", str(tmp_path / name))
        assert result.code == 0, result.stderr
    assert (tmp_path / "a.yaml").read_bytes() == (tmp_path / "b.yaml").read_bytes()
    assert load_match(tmp_path / "a.yaml") == simulate_match(7)


def test_simulate_cli_count_writes_distinct_matches(tmp_path: Path) -> None:
    result = run_cli("simulate", "--seed", "10", "--count", "4", "--knockout", "-o", str(tmp_path))
    assert result.code == 0, result.stderr
    files = sorted(tmp_path.glob("*.yaml"))
    assert [f.name for f in files] == [f"sim-{s}-arg-eng.yaml" for s in range(10, 14)]
    assert len({f.read_bytes() for f in files}) == 4


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--xg", "1,x"], "--xg must be two numbers"),
        (["--home", "argentina"], "expected a FIFA code"),
        (["--home", "ENG"], "a team cannot play itself"),
        (["--count", "3", "-o", "x.yaml"], "give -o a directory"),
    ],
)
def test_simulate_cli_refuses_bad_options_in_one_line(args: list[str], message: str) -> None:
    result = run_cli("simulate", *args)
    assert result.code == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not result.stdout


def _stats(match: Match) -> dict[str, TeamStats]:
    return replay_state(match.match_id, [s.event for s in expand(match)]).stats


def _per_match(stats: list[dict[str, TeamStats]], stat: str) -> list[float]:
    return [sum(getattr(t, stat) for t in line.values()) for line in stats]


@pytest.fixture(scope="module")
def feed_matches(average_matches: list[Match]) -> list[Match]:
    return average_matches[:400]


@pytest.fixture(scope="module")
def feed_stats(feed_matches: list[Match]) -> list[dict[str, TeamStats]]:
    return [_stats(m) for m in feed_matches]


@pytest.mark.parametrize(
    ("stat", "low", "high"),
    [
        # per match, both teams (FEED_RATES's sources): about 25 shots, 8-9 on target,
        # 10 corners, 22-25 fouls, 4 offsides; expected goals close to the goals scored.
        ("shots", 24.0, 26.5),
        ("on_target", 8.0, 9.5),
        ("corners", 9.3, 10.9),
        ("fouls", 22.0, 25.0),
        ("offsides", 3.5, 4.6),
        ("xg", 2.35, 2.9),
    ],
)
def test_the_full_feed_comes_at_real_rates(
    feed_stats: list[dict[str, TeamStats]], stat: str, low: float, high: float
) -> None:
    mean = statistics.fmean(_per_match(feed_stats, stat))
    assert low <= mean <= high, (stat, mean)


def test_every_simulated_goal_but_an_own_goal_is_a_shot(feed_matches: list[Match]) -> None:
    own = 0
    for match in feed_matches[:150]:
        events = [s.event for s in expand(match)]
        for i, e in enumerate(events):
            if not isinstance(e, Goal):
                continue
            if e.method == "own_goal":
                own += 1
                assert e.shot_id is None
                continue
            shot = events[i - 1]
            assert isinstance(shot, Shot) and shot.outcome == "goal" and shot.shot_id == e.shot_id
            assert shot.team == e.team and shot.player == e.scorer
            if e.method == "penalty":
                given = [p for p in events[:i] if isinstance(p, PenaltyAwarded)]
                assert given and given[-1].team == e.team
        cards = [e for e in events if isinstance(e, Card)]
        fouls = {e.foul_id for e in events if isinstance(e, Foul)}
        assert all(c.foul_id in fouls for c in cards)
    assert own >= 1  # the rule was exercised


def test_statsbomb_match_15986_falls_within_the_simulators_spread(
    feed_stats: list[dict[str, TeamStats]],
) -> None:
    """Barcelona 2-2 Girona's real counts (the importer's test checks them against the raw
    events) lie between the 1st and 99th percentiles of the simulated matches."""
    real = final_state(import_sample()).stats
    for stat in ("shots", "on_target", "corners", "fouls", "offsides"):
        spread = sorted(_per_match(feed_stats, stat))
        low, high = spread[len(spread) // 100], spread[-len(spread) // 100 - 1]
        value = sum(getattr(t, stat) for t in real.values())
        assert low <= value <= high, (stat, value, low, high)


def test_the_feed_draws_leave_the_lean_match_as_it_was() -> None:
    """The full feed has a random stream of its own: a seed's lean match (its goals, cards,
    substitutions, timings) is byte for byte the match the simulator drew before it had a
    full feed (the digests are of those files)."""
    digests = {
        42: "b5e7d20f5f3540f1ff1cbd04edce287d368e59c525877613f133add75e8922b6",
        7: "91e5873d1e4fc0173c4f65d2eca62e02b52de8d07175d9fea07dc78fc57484f2",
    }
    for seed, digest in digests.items():
        lean = lean_match(simulate_match(seed, "AAA", "BBB", knockout=True))
        assert hashlib.sha256(dump_match(lean).encode()).hexdigest() == digest
