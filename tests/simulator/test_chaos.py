"""The seeded chaos transform, offline: spec, determinism, each fault, truth, and rates."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from events import Event, MatchState, apply
from simulator import (
    FAULTS,
    ChaosSpec,
    ChaosSpecError,
    ChaosStream,
    ReplayOptions,
    apply_chaos,
    expand,
    resolve_matches,
    simulate_match,
    state_before,
    wall_offsets,
)

SEMI = resolve_matches("semifinal")[0]
STREAM = expand(SEMI)
EVENTS = [s.event for s in STREAM]
OFFSETS = wall_offsets(STREAM, ReplayOptions(speed=60), SEMI.break_minutes)
INITIAL = state_before(SEMI, STREAM, 0)
CLEAN_FINAL = state_before(SEMI, STREAM, len(STREAM))
RUN = 1_784_141_998_412


def chaos(spec: str, seed: int = 1, offsets: list[float] | None = None) -> ChaosStream:
    return apply_chaos(
        EVENTS,
        OFFSETS if offsets is None else offsets,
        INITIAL,
        ChaosSpec.parse(spec),
        seed=seed,
        key=SEMI.match_id,
        run=RUN,
    )


def sent_events(stream: ChaosStream) -> list[Event]:
    return [e.event for e in stream.emissions if e.event is not None]


def payload_view(stream: ChaosStream) -> list[tuple[str, str, bool]]:
    """What goes on the wire, in order: the JSON of each message and whether it is retained."""
    out = []
    for e in stream.emissions:
        body = e.event if e.event is not None else e.state
        assert body is not None
        out.append((e.kind, body.model_dump_json(), e.retain))
    return out


# ------------------------------------------------------------------------------------ spec


def test_a_spec_reads_back_as_written() -> None:
    text = (
        "duplicate=0.05,reorder=0.1:4,drop=0.02,delay=0.1:250,stale-state=0.03,"
        "restart=30,correction=0.5,burst=60:2"
    )
    assert str(ChaosSpec.parse(text)) == text
    assert ChaosSpec.parse("reorder=0.1").reorder_window == 3


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("dup=0.1", "unknown chaos fault 'dup'"),
        ("duplicate=1.5", "expected duplicate=P"),
        ("duplicate", "needs a value; expected duplicate=P"),
        (
            "reorder=0.1:0",
            "WINDOW '0' is not a whole number from 1 to 100; expected reorder=P[:WINDOW]",
        ),
        ("delay=0.1", "needs MS after the probability; expected delay=P:MS"),
        ("delay=0.1:-3", "expected delay=P:MS"),
        ("restart=x", "expected restart=MINUTE"),
        ("restart=200", "MINUTE '200' is not a whole number from 1 to 120"),
        ("burst=60", "expected burst=MINUTE:SECONDS"),
        ("drop=0.1,drop=0.2", "'drop' is given twice"),
        ("", "empty chaos spec"),
    ],
)
def test_a_bad_spec_names_the_fault_and_the_form(spec: str, needle: str) -> None:
    with pytest.raises(ChaosSpecError, match=None) as err:
        ChaosSpec.parse(spec)
    assert needle in str(err.value)


#: Values past a parameter's range, not finite, subnormal-looking but fine, or in digits that
#: are not ASCII: each refused with the parameter and its range named.
OUT_OF_RANGE = [
    ("delay=1:1e308", "MS '1e308' is not a number from 0 to 60,000"),
    ("delay=0.01:1e12", "MS '1e12' is not a number from 0 to 60,000"),
    ("burst=1:1e308", "SECONDS '1e308' is not a number from 0 to 600"),
    ("delay=1:nan", "MS 'nan' is not a number from 0 to 60,000"),
    ("burst=1:nan", "SECONDS 'nan' is not a number from 0 to 600"),
    ("delay=1:inf", "MS 'inf' is not a number"),
    ("delay=1:-inf", "MS '-inf' is not a number"),
    ("burst=1:infinity", "SECONDS 'infinity' is not a number"),
    ("delay=1:1e309", "MS '1e309' is not a number"),
    ("delay=nan:5", "P 'nan' is not a number from 0 to 1"),
    ("duplicate=-0.0001", "P '-0.0001' is not a number from 0 to 1"),
    ("reorder=0.1:101", "WINDOW '101' is not a whole number from 1 to 100"),
    ("reorder=0.1:1e3", "WINDOW '1e3' is not a whole number"),
    ("reorder=0.1:9" + "9" * 5000, "WINDOW '99999"),
    ("restart=0", "MINUTE '0' is not a whole number from 1 to 120"),
    ("burst=121:1", "MINUTE '121' is not a whole number from 1 to 120"),
    ("burst=1.5:1", "MINUTE '1.5' is not a whole number"),
    ("delay=\uff11:5", "P '\uff11' is not a number"),  # fullwidth 1
    ("burst=\u0665:1", "MINUTE '\u0665' is not a whole number"),  # Arabic-Indic 5
    ("delay=1:1_000", "MS '1_000' is not a number"),
    ("delay=1: 5 0", "MS ' 5 0' is not a number"),
]


@pytest.mark.parametrize(("spec", "needle"), OUT_OF_RANGE)
def test_a_value_out_of_its_range_is_refused_naming_it(spec: str, needle: str) -> None:
    with pytest.raises(ChaosSpecError) as err:
        ChaosSpec.parse(spec)
    assert needle in str(err.value)
    assert len(str(err.value)) < 400  # a long value is quoted cut


def test_the_edges_of_each_range_are_taken() -> None:
    spec = ChaosSpec.parse("duplicate=1,reorder=0:100,delay=0:60000,restart=120,burst=1:600")
    assert (spec.reorder_window, spec.delay_ms, spec.restart, spec.burst) == (
        100,
        60_000.0,
        120,
        (1, 600.0),
    )
    assert ChaosSpec.parse("delay=1:5e-324").delay_ms == 5e-324  # tiny, finite: no wait


def test_docs_chaos_lists_each_range_as_the_code_has_it() -> None:
    from pathlib import Path

    from events import shown
    from simulator._chaos_spec import RANGES

    doc = (Path(__file__).resolve().parents[2] / "docs" / "chaos.md").read_text()
    for name, (low, high) in RANGES.items():
        assert f"| `{name}` | {shown(low)} to {shown(high)} |" in doc, name


# ------------------------------------------------------------------------------- determinism

ALL = "duplicate=0.1,reorder=0.1,drop=0.05,delay=0.05:300,stale-state=0.05,restart=30,correction=1,burst=60:2"


def test_the_same_seed_makes_the_same_faults_and_payloads() -> None:
    a, b = chaos(ALL, seed=7), chaos(ALL, seed=7)
    assert [f.to_json() for f in a.faults] == [f.to_json() for f in b.faults]
    assert payload_view(a) == payload_view(b)
    assert [f.to_json() for f in chaos(ALL, seed=8).faults] != [f.to_json() for f in a.faults]


def test_one_fault_never_changes_the_decisions_of_another() -> None:
    alone = [f.seq for f in chaos("duplicate=0.2", seed=3).faults]
    mixed = [
        f.seq
        for f in chaos("duplicate=0.2,stale-state=0.3", seed=3).faults
        if f.fault == "duplicate"
    ]
    assert alone == mixed


def test_no_fault_is_the_clean_stream() -> None:
    stream = chaos("drop=0")
    assert stream.faults == ()
    assert [e.seq for e in sent_events(stream)] == [e.seq for e in EVENTS]
    assert stream.truth.model_copy(update={"run": 0}) == CLEAN_FINAL


# ------------------------------------------------------------------------------- each fault


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("spec", [ALL, "correction=1", "restart=60,correction=0.5"])
def test_the_truth_is_the_true_final_score_and_goals(spec: str, seed: int) -> None:
    stream = chaos(spec, seed=seed)
    assert stream.truth.score == CLEAN_FINAL.score
    assert [g.goal_id for g in stream.truth.goals] == [g.goal_id for g in CLEAN_FINAL.goals]
    assert stream.truth.status == "finished"
    # The truth is the fold of the true stream: the last run's events, each once, in seq order.
    last = stream.runs[-1]
    true_events = {e.seq: e for e in sent_events(stream) if e.run == last}
    state = INITIAL.model_copy(update={"run": last})
    for seq in sorted(true_events):
        state = apply(state, true_events[seq])
    if not any(f.fault == "drop" for f in stream.faults):
        assert state == stream.truth


def test_duplicates_are_the_same_event_again_after_one_to_ten_later_events() -> None:
    stream = chaos("duplicate=0.2", seed=2)
    seqs = [e.seq for e in sent_events(stream)]
    dups = [f for f in stream.faults if f.fault == "duplicate"]
    assert dups
    assert sum(n - 1 for n in Counter(seqs).values()) == len(dups)
    for f in dups:
        first = seqs.index(f.seq)
        later = [i for i, s in enumerate(seqs) if s == f.seq][1]
        passed = {s for i, s in enumerate(seqs[first + 1 : later], first + 1) if seqs.index(s) == i}
        assert len(passed) == f.detail["after"] <= 10
        assert f.detail["after"] >= 1 or f.seq == len(EVENTS)


def test_a_drop_leaves_a_gap_on_the_events_topic_but_the_state_moves_on() -> None:
    stream = chaos("drop=0.1", seed=4)
    dropped = {f.seq for f in stream.faults if f.fault == "drop"}
    assert dropped
    sent = {e.seq for e in sent_events(stream)}
    assert dropped.isdisjoint(sent)
    assert sent | dropped == set(range(1, len(EVENTS) + 1))
    states = [e.state.last_seq for e in stream.emissions if e.state is not None]
    assert states == list(range(1, len(EVENTS) + 1))


def test_a_reorder_swaps_an_event_with_one_at_most_window_later() -> None:
    stream = chaos("reorder=0.2:2", seed=5)
    swaps = [f for f in stream.faults if f.fault == "reorder"]
    assert swaps
    seqs = [e.seq for e in sent_events(stream)]
    assert sorted(seqs) == list(range(1, len(EVENTS) + 1))
    for f in swaps:
        assert 1 <= f.detail["with_seq"] - f.seq <= 2
        assert seqs.index(f.detail["with_seq"]) < seqs.index(f.seq)


def test_a_delay_holds_the_event_back_and_later_ones_overtake_it() -> None:
    stream = chaos("delay=0.1:3000", seed=6)
    delays = [f for f in stream.faults if f.fault == "delay"]
    assert delays
    for f in delays:
        [emission] = [e for e in stream.emissions if e.event is not None and e.seq == f.seq]
        assert emission.due == pytest.approx(emission.scheduled + 3.0)
    dues = [e.due for e in stream.emissions]
    assert dues == sorted(dues)
    seqs = [e.seq for e in sent_events(stream)]
    assert seqs != sorted(seqs)


def test_a_stale_state_is_an_older_snapshot_not_retained() -> None:
    stream = chaos("stale-state=0.2", seed=7)
    stale = [f for f in stream.faults if f.fault == "stale-state"]
    assert stale
    for f in stale:
        e = stream.emissions[f.index]
        assert e.kind == "state" and not e.retain
        assert e.seq == f.detail["state_seq"] < f.seq
    retained = [e for e in stream.emissions if e.kind == "state" and e.retain]
    assert [e.seq for e in retained] == list(range(1, len(EVENTS) + 1))


def test_a_restart_starts_the_match_again_as_a_larger_run() -> None:
    stream = chaos("restart=30")
    [restart] = stream.faults
    first, second = stream.runs
    assert restart.fault == "restart" and restart.run == second > first == RUN
    assert restart.seq == 1 and restart.detail["previous_run"] == RUN
    snapshot = stream.emissions[restart.index]
    assert snapshot.kind == "state" and snapshot.retain and snapshot.state is not None
    assert snapshot.state.run == second and snapshot.state.last_seq == 0
    old = [e for e in sent_events(stream) if e.run == first]
    new = [e for e in sent_events(stream) if e.run == second]
    assert [e.seq for e in old] == list(range(1, restart.detail["previous_last_seq"] + 1))
    assert old[-1].clock.minute < 30
    assert [e.seq for e in new] == list(range(1, len(EVENTS) + 1))
    assert stream.truth.run == second


def test_a_correction_is_a_fake_goal_disallowed_a_few_events_later() -> None:
    stream = chaos("correction=1")
    fixes = [f for f in stream.faults if f.fault == "correction"]
    assert len(fixes) == 3  # one per goal of the semi-final
    events = sent_events(stream)
    assert [e.seq for e in events] == list(range(1, len(EVENTS) + 7))
    by_seq = {e.seq: e for e in events}
    for f in fixes:
        fake, retraction = by_seq[f.seq], by_seq[f.detail["disallowed_seq"]]
        assert fake.type == "goal" and retraction.type == "goal_disallowed"
        assert fake.goal_id == retraction.goal_id == f.detail["goal_id"]
        assert 1 <= retraction.seq - fake.seq <= 4
        assert by_seq[f.seq - 1].type == "goal"  # it follows a real goal
        between = [by_seq[s] for s in range(fake.seq + 1, retraction.seq)]
        assert not any(e.type in ("goal", "period_end", "full_time") for e in between)
    assert stream.truth.score == CLEAN_FINAL.score


def test_a_burst_holds_events_then_releases_them_at_once() -> None:
    stream = chaos("burst=60:5")
    [burst] = stream.faults
    held = [e for e in stream.emissions if e.due == burst.at_s and e.scheduled < e.due]
    assert burst.detail["held_events"] == sum(e.kind == "event" for e in held) >= 3
    first = stream.emissions[burst.index]
    assert first.scheduled == burst.at_s - 5
    assert all(e.due == e.scheduled for e in stream.emissions if e not in held)


def test_at_max_speed_a_delayed_event_goes_out_after_the_rest() -> None:
    stream = chaos("delay=0.05:200", seed=3, offsets=[0.0] * len(EVENTS))
    delayed = {f.seq for f in stream.faults if f.fault == "delay"}
    assert delayed
    tail = [e.seq for e in sent_events(stream)][-len(delayed) :]
    assert set(tail) == delayed


# ------------------------------------------------------------------------------- statistics


def binomial_bounds(n: int, p: float, z: float = 5.0) -> tuple[float, float]:
    """A z-sigma interval of Binomial(n, p): outside it by chance about once in 3.5 million."""
    sd = math.sqrt(n * p * (1 - p))
    return n * p - z * sd, n * p + z * sd


def observe(stream: ChaosStream) -> dict[str, int]:
    """An independent subscriber's view of the events topic: no fault log, just seqs."""
    seen: set[int] = set()
    duplicates = descents = 0
    previous = 0
    for event in sent_events(stream):
        if event.seq in seen:
            duplicates += 1
            continue
        seen.add(event.seq)
        descents += event.seq < previous
        previous = event.seq
    last = max(seen)
    return {"duplicates": duplicates, "reordered": descents, "gaps": last - len(seen), "last": last}


SEEDS = range(300)
P = 0.05


def test_duplicates_arrive_at_the_stated_rate_over_many_seeds() -> None:
    n = seen = 0
    for seed in SEEDS:
        stream = chaos(f"duplicate={P}", seed=seed, offsets=[0.0] * len(EVENTS))
        n += len(EVENTS)
        seen += observe(stream)["duplicates"]
    low, high = binomial_bounds(n, P)
    assert low <= seen <= high, (seen, n * P)


def test_gaps_arrive_at_the_stated_rate_over_many_seeds() -> None:
    n = gaps = 0
    for seed in SEEDS:
        stream = chaos(f"drop={P}", seed=seed, offsets=[0.0] * len(EVENTS))
        observed = observe(stream)
        drops = [f.seq for f in stream.faults if f.fault == "drop"]
        # A dropped last event is not a gap a subscriber can see; the rest are.
        assert observed["gaps"] == sum(seq < observed["last"] for seq in drops)
        n += len(EVENTS)
        gaps += len(drops)
    low, high = binomial_bounds(n, P)
    assert low <= gaps <= high, (gaps, n * P)


def test_reorderings_arrive_at_the_stated_rate_over_many_seeds() -> None:
    """With WINDOW 1 each swap is one descent a subscriber sees; eligible events (not already
    swapped, with a successor) start a swap with probability P."""
    eligible = swaps = 0
    for seed in SEEDS:
        stream = chaos(f"reorder={P}:1", seed=seed, offsets=[0.0] * len(EVENTS))
        observed = observe(stream)
        logged = [f for f in stream.faults if f.fault == "reorder"]
        assert observed["reordered"] == len(logged)
        # An event swapped as the partner of the one before it cannot start a swap.
        eligible += len(EVENTS) - 1 - len(logged)
        swaps += len(logged)
    low, high = binomial_bounds(eligible, P)
    assert low <= swaps <= high, (swaps, eligible * P)


def test_corrections_come_at_the_stated_rate_per_goal() -> None:
    goals = fixes = 0
    for seed in range(40):
        match = simulate_match(seed=seed)
        stream_ = expand(match)
        events = [s.event for s in stream_]
        out = apply_chaos(
            events,
            [0.0] * len(events),
            state_before(match, stream_, 0),
            ChaosSpec.parse("correction=0.3"),
            seed=seed,
            key=match.match_id,
            run=1,
        )
        goals += sum(e.type == "goal" for e in events)
        fixes += sum(f.fault == "correction" for f in out.faults)
        final = state_before(match, stream_, len(stream_))
        assert out.truth.score == final.score
    low, high = binomial_bounds(goals, 0.3)
    assert low <= fixes <= high, (fixes, goals)


def test_the_fault_kinds_are_declared_once() -> None:
    assert set(FAULTS) == {
        "duplicate",
        "reorder",
        "drop",
        "delay",
        "stale-state",
        "restart",
        "correction",
        "burst",
    }
    assert isinstance(random.Random(0).random(), float)
    assert isinstance(INITIAL, MatchState)
