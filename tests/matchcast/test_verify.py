"""matchcast verify without a broker: the scenarios, the comparison, the first divergence, the
reports' boundary and the JUnit and JSON outputs."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

import pytest

import matchcast.verify
from events import MatchState, Topics
from matchcast.verify import (
    IGNORED_FIELDS,
    SCENARIOS,
    Difference,
    Divergence,
    Played,
    Report,
    ScenarioResult,
    Verdict,
    VerifyOptions,
    agree,
    arrived,
    chaos_seed,
    differences,
    first_divergence,
    junit_xml,
    read_report,
    report_json,
    scenario_match,
    select_scenarios,
    state_fields,
)
from matchcast.verify._compare import Point
from simulator import apply_chaos, expand, state_before


def _truth() -> MatchState:
    match = scenario_match(SCENARIOS[0])
    stream = expand(match)
    state = state_before(match, stream, 0)
    from events import apply

    for item in stream:
        state = apply(state, item.event)
    return state


def test_the_package_exports_a_sorted_public_api() -> None:
    def kind(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    names = matchcast.verify.__all__
    assert names == sorted(names, key=kind)
    assert all(hasattr(matchcast.verify, n) for n in names)


def test_the_scenarios_are_the_battery_the_issue_names_each_in_one_line() -> None:
    assert [s.name for s in SCENARIOS] == [
        "clean", "duplicates", "reorder", "gap", "late-join", "restart", "goal-ruled-out",
        "seek-back", "stale-snapshot", "burst", "straggler",
    ]  # fmt: skip
    width = max(len(s.name) for s in SCENARIOS)
    assert all(width + 2 + len(s.description) <= 80 for s in SCENARIOS), "--list fits 80 columns"
    assert len({s.match_id for s in SCENARIOS}) == len(SCENARIOS)


def test_scenarios_are_selected_by_name_in_the_battery_s_order() -> None:
    assert [s.name for s in select_scenarios(["straggler", "clean"])] == ["clean", "straggler"]
    assert select_scenarios([]) == SCENARIOS
    with pytest.raises(ValueError, match="no scenario named 'nope'; the scenarios are clean"):
        select_scenarios(["nope"])


@pytest.mark.parametrize("name", ["duplicates", "reorder", "gap", "stale-snapshot"])
def test_the_seed_found_makes_the_fault_touch_the_score(name: str) -> None:
    """Whatever --seed, the scenario's fault hits a goal (or a snapshot with another score)."""
    (scenario,) = select_scenarios([name])
    spec = scenario.spec(None)
    assert spec is not None
    match = scenario_match(scenario)
    stream = expand(match)
    events = [s.event for s in stream]
    goals = {e.seq for e in events if e.type == "goal"}
    for seed in (0, 1, 2, 17):
        used = chaos_seed(scenario, spec, seed)
        assert used >= seed
        out = apply_chaos(
            events, [0.0] * len(events), state_before(match, stream, 0), spec,
            seed=used, key=match.match_id, run=1,
        )  # fmt: skip
        faults = [f for f in out.faults if f.fault == str(spec).split("=")[0]]
        if name == "stale-snapshot":
            states = {e.state.last_seq: e.state for e in out.emissions if e.state and e.retain}
            assert any(states[f.detail["state_seq"]].score != states[f.seq].score for f in faults)
        else:
            touched = {f.seq for f in faults} | {f.detail.get("with_seq") for f in faults}
            assert touched & goals


def test_a_burst_holds_ten_match_minutes_at_the_speed_given() -> None:
    (burst,) = select_scenarios(["burst"])
    assert str(burst.spec(3000)) == "burst=60:0.2"
    assert str(burst.spec(600)) == "burst=60:1"
    assert str(burst.spec(None)) == "burst=60:0.2"


# ---------------------------------------------------------------- the comparison


def test_agree_follows_the_state_s_types() -> None:
    goal = MatchState.model_fields["goals"].annotation
    score = MatchState.model_fields["score"].annotation
    truth = [{"goal_id": "a", "seq": 3, "team": "NED", "scorer": "X"}]
    assert agree(truth, [{"goal_id": "a", "team": "NED"}], goal), "a record: the keys given"
    assert not agree(truth, [{"goal_id": "b"}], goal)
    assert not agree(truth, [], goal), "a sequence: its length"
    assert agree({"NED": 1, "JPN": 0}, {"JPN": 0, "NED": 1}, score)
    assert not agree({"NED": 1, "JPN": 0}, {"NED": 1}, score), "a mapping: every key"
    assert agree(88, 88.0, float)
    assert not agree(1, True, int), "true is no number"


def test_every_field_of_the_state_is_compared_when_the_report_carries_it() -> None:
    """Generic: a field added to MatchState is compared with no change to verify."""
    truth = state_fields(_truth())
    assert differences(truth, truth) == []
    for name in MatchState.model_fields:
        wrong = {**truth, name: "not what the truth says"}
        found = [d.field for d in differences(truth, wrong)]
        assert found == ([] if name in IGNORED_FIELDS else [name]), name


def test_a_report_of_score_and_status_alone_is_enough() -> None:
    truth = _truth()
    report = {"score": {"NED": 3, "JPN": 2}, "status": "finished"}
    assert differences(state_fields(truth), report) == []
    assert arrived(report, truth)
    assert not arrived({**report, "last_seq": truth.last_seq - 1}, truth)
    assert not arrived({**report, "status": "live"}, truth)
    assert differences(state_fields(truth), {**report, "score": {"NED": 4, "JPN": 2}}) == [
        Difference("score", {"NED": 3, "JPN": 2}, {"NED": 4, "JPN": 2})
    ]


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        (b"{", "not JSON"),
        (b"[" * 5000 + b"]" * 5000, "not JSON"),
        (b"[1]", "a JSON list, not an object"),
        (b'{"score": {}}', "no status"),
        (b'{"status": "live"}', "no score"),
        (b'{"score": 3, "status": "live"}', "score is not an object"),
        (b'{"score": {}, "status": 1}', "status is not a string"),
        (b" " * (256 * 1024 + 1), "more than the 262144 a report may have"),
    ],
)
def test_a_report_that_cannot_be_read_says_why(payload: bytes, problem: str) -> None:
    fields, why = read_report(payload)
    assert fields is None
    assert why is not None and problem in why


# ---------------------------------------------------------------- the first divergence


def _point(index: int, seq: int, score: dict[str, int], run: int = 1) -> Point:
    label = f"{seq}'"
    return Point(index, {"run": run, "last_seq": seq, "score": score, "clock": {"label": label}})


#: A truth of five states: 0-0, a goal at seq 2, a goal at seq 4 (published at 2, 4, ... 10).
TRUTH = [
    _point(2, 1, {"A": 0, "B": 0}),
    _point(4, 2, {"A": 1, "B": 0}),
    _point(6, 3, {"A": 1, "B": 0}),
    _point(8, 4, {"A": 1, "B": 1}),
    _point(10, 5, {"A": 1, "B": 1}),
]


def test_a_consumer_that_moves_on_its_own_parts_where_its_report_came() -> None:
    """A repeated goal counted twice: the truth did not move, the consumer did."""
    reports = [(3, {"score": {"A": 0, "B": 0}}), (5, {"score": {"A": 1, "B": 0}}),
               (7, {"score": {"A": 2, "B": 0}})]  # fmt: skip
    d = first_divergence(TRUTH, reports, ["score"])
    assert d == Divergence("score", {"A": 1, "B": 0}, {"A": 2, "B": 0}, 3, "3'", 1, 6, "moved")


def test_a_consumer_that_misses_a_change_parts_where_the_truth_moved() -> None:
    """A lost goal never counted: the consumer still says what it said before."""
    reports = [(3, {"score": {"A": 0, "B": 0}}), (9, {"score": {"A": 0, "B": 1}})]
    d = first_divergence(TRUTH, reports, ["score"])
    assert d == Divergence("score", {"A": 1, "B": 0}, {"A": 0, "B": 0}, 2, "2'", 1, 4, "missed")


def test_a_lagging_consumer_is_in_step_and_parts_where_the_truth_last_left_it() -> None:
    """Reports that trail the feed are in step; the last one, never updated, parts where
    the truth moved away from it."""
    reports = [(9, {"score": {"A": 0, "B": 0}}), (11, {"score": {"A": 1, "B": 0}})]
    d = first_divergence(TRUTH, reports, ["score"])
    assert d is not None
    assert (d.seq, d.how, d.expected, d.reported) == (
        4,
        "missed",
        {"A": 1, "B": 1},
        {"A": 1, "B": 0},
    )


def test_an_empty_score_before_a_goal_says_no_goals() -> None:
    """A consumer that starts from ``{}`` and counts right is in step from kick-off: the
    first divergence is the goal it missed, not the empty score at the start."""
    reports = [(3, {"score": {}}), (5, {"score": {"A": 1}}),
               (9, {"score": {"A": 1, "B": 0}})]  # fmt: skip
    d = first_divergence(TRUTH, reports, ["score"])
    assert d is not None
    assert (d.seq, d.how, d.expected, d.reported) == (
        4,
        "missed",
        {"A": 1, "B": 1},
        {"A": 1, "B": 0},
    )
    assert differences({"score": {"A": 0, "B": 0}}, {"score": {}}) == []
    assert differences({"score": {"A": 1, "B": 0}}, {"score": {"A": 1, "B": 0, "C": 0}}) == []
    assert differences({"score": {"A": 1, "B": 0}}, {"score": {"B": 0}}) != []


def test_a_failure_line_says_how_the_consumer_ended_and_where_it_first_went_wrong() -> None:
    from matchcast.verify._run import _say

    d = Divergence("score", {"A": 1, "B": 0}, {"A": 0, "B": 0}, 2, "2'", 1, 4, "missed")
    end = differences({"score": {"A": 1, "B": 1}}, {"score": {"A": 0, "B": 1}})
    line = _say(d, end)
    assert line.startswith('score: ended {"A": 0, "B": 1}, expected {"A": 1, "B": 1}; ')
    assert line.endswith(
        'first parted expected {"A": 1, "B": 0}, reported {"A": 0, "B": 0} at seq 2 (2\')'
    )
    same = differences({"score": {"A": 1, "B": 0}}, {"score": {"A": 0, "B": 0}})
    assert (
        _say(d, same)
        == 'score: expected {"A": 1, "B": 0}, reported {"A": 0, "B": 0} at seq 2 (2\')'
    )


def test_a_report_with_run_and_last_seq_is_held_to_that_very_state() -> None:
    reports = [(11, {"run": 1, "last_seq": 2, "score": {"A": 0, "B": 0}})]
    d = first_divergence(TRUTH, reports, ["score"])
    assert d is not None
    assert (d.seq, d.expected) == (2, {"A": 1, "B": 0})


# ---------------------------------------------------------------- the outputs


def _verdict() -> Verdict:
    truth = _truth()
    ok, bad = SCENARIOS[0], SCENARIOS[1]
    played = Played(bad.match_id, 3, "duplicate=0.1", truth, first=0, end=10)
    fields: dict[str, Any] = {"score": {"NED": 4, "JPN": 2}, "status": "finished"}
    wrong = differences(state_fields(truth), fields)
    divergence = Divergence(
        "score", {"NED": 3, "JPN": 2}, fields["score"], 92, "81'", 1, 9, "moved"
    )
    cause = {"fault": "duplicate", "seq": 92, "clock": "81'", "after": 2, "match_id": "x"}
    return Verdict(
        VerifyOptions("my-app", Topics("matchcast-verify"), speed=None),
        [
            ScenarioResult(ok, passed=True, duration_s=0.5),
            ScenarioResult(
                bad,
                passed=False,
                reason="score: expected 3-2",
                played=played,
                reports=[Report(1.0, 5, fields)],
                wrong=wrong,
                divergence=divergence,
                cause=cause,
                duration_s=0.7,
            ),
        ],
        1.2,
    )


def test_junit_has_a_test_case_per_scenario_and_the_failure_s_divergence() -> None:
    root = ET.fromstring(junit_xml(_verdict(), "mqtt://127.0.0.1:1883"))
    (suite,) = root.findall("testsuite")
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert set(cases) == {"clean", "duplicates"}
    assert cases["clean"].find("failure") is None
    failure = cases["duplicates"].find("failure")
    assert failure is not None
    assert failure.get("message") == "score: expected 3-2"
    assert '"fault": "duplicate"' in (failure.text or "")
    assert cases["duplicates"].get("classname") == "matchcast.verify.my-app"


def test_the_json_report_keeps_the_divergence_the_cause_and_every_report() -> None:
    out = report_json(_verdict(), "mqtt://127.0.0.1:1883")
    assert (out["kind"], out["format"], out["ok"], out["passed"], out["failed"]) == (
        "matchcast-verify", 1, False, 1, 1,
    )  # fmt: skip
    bad = out["scenarios"][1]
    assert bad["divergence"]["seq"] == 92
    assert bad["cause"]["fault"] == "duplicate"
    assert bad["every_report"][0]["fields"]["score"] == {"NED": 4, "JPN": 2}
    json.dumps(out)  # all of it JSON


def test_a_report_that_goes_back_to_an_older_state_is_out_of_step() -> None:
    """A consumer that takes a stale snapshot after the end says an old state exactly: it
    moved back on its own, where that report came."""
    reports = [
        (11, {"run": 1, "last_seq": 5, "score": {"A": 1, "B": 1}}),
        (12, {"run": 1, "last_seq": 2, "score": {"A": 1, "B": 0}}),
    ]
    d = first_divergence(TRUTH, reports, ["score"])
    assert d is not None
    assert (d.seq, d.how, d.reported, d.index) == (5, "moved", {"A": 1, "B": 0}, 11)


def test_reports_are_bounded_per_match_and_the_latest_is_always_kept() -> None:
    from events import Message
    from matchcast.verify import MAX_REPORTS, Reports

    topics = Topics("r")
    reports = Reports(topics, "c1", fed=lambda: 0, clock=lambda: 0.0)
    reports.watched.add("m1")
    topic = topics.consumer_state("c1", "m1")
    for n in range(MAX_REPORTS + 5):
        reports.take(Message(topic, json.dumps({"score": {}, "status": "live", "n": n}).encode()))
    reports.take(Message(topics.consumer_state("c1", "other"), b'{"score": {}, "status": "x"}'))
    reports.take(Message(topics.consumer_state("c2", "m1"), b'{"score": {}, "status": "x"}'))
    reports.take(Message(topic, b""))  # a report cleared
    kept = reports.of("m1")
    assert len(kept) == MAX_REPORTS
    assert kept[-1].fields is not None and kept[-1].fields["n"] == MAX_REPORTS + 4
    assert reports.of("other") == []
