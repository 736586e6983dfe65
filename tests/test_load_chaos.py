"""matchcast load --chaos: injected faults counted beside what the probes saw, network faults
apart; the same seed, the same faults; --verify-state against the truth; reports merge."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from events import Topics
from matchcast.cli import app
from matchcast.cli.chaos import read_truth
from matchcast.load import (
    LoadOptions,
    LoadRun,
    LoadShape,
    MatchTemplate,
    MergeError,
    StateReporter,
    build_report,
    merge_reports,
    run_consumer,
)
from matchcast.load._chaos import build_copy_chaos
from matchcast.load._report import READABLE_FORMATS, REPORT_FORMAT
from matchcast.logs import configure_logging
from matchcast.testing import Mosquitto
from matchcast.transport.connection import BrokerURL
from matchcast.transport.mqtt import MqttClient
from simulator import ChaosSpec, resolve_matches
from tests._misbehaving import Misbehaving

pytestmark = pytest.mark.mosquitto

TEMPLATE = MatchTemplate.build(resolve_matches("semifinal")[0])
SPEC = "duplicate=0.1,reorder=0.1:2,drop=0.05,correction=1"


def _factory(url: BrokerURL) -> Any:
    return lambda cid, role: MqttClient(url, client_id=cid)


async def _load(
    url: BrokerURL, topics: Topics, spec: str, seed: int, *, wrap: Any = None, **kw: Any
) -> LoadRun:
    shape = LoadShape(matches=3, qos=1, states=kw.pop("states", False), tag="c1")
    options = LoadOptions(
        shape=shape,
        topics=topics,
        subscribers=2,
        max_inflight=1,  # one publish in flight: the sender's order is the wire order
        drain_idle_s=1,
        chaos=ChaosSpec.parse(spec),
        seed=seed,
        **kw,
    )
    run = LoadRun(options, [TEMPLATE], _factory(url), wrap_publisher=wrap)
    await run.run()
    return run


async def test_the_report_counts_injected_faults_and_no_network_ones(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    run = await _load(mosquitto_url, topics, SPEC, 2)
    report = build_report(run, {"chaos": SPEC, "seed": 2})
    assert report["format"] == REPORT_FORMAT == 3
    chaos = report["chaos"]
    faults = run.stats.faults
    assert chaos["faults_total"] == len(faults) > 0
    assert chaos["faults"]["correction"] == 3 * 3  # every goal of 3 copies
    d = report["delivery"]
    drops = sum(f.fault == "drop" for f in faults)
    dups = sum(f.fault == "duplicate" for f in faults)
    assert chaos["sent"]["never_sent"] == drops
    assert chaos["sent"]["duplicates"] == dups
    assert d["injected"] == {
        "lost": drops * 2,
        "duplicates": dups * 2,
        "reordered": chaos["sent"]["reordered"] * 2,
    }
    assert d["network"] == {"lost": 0, "duplicates": 0, "reordered": 0}
    assert d["lost"] == d["injected"]["lost"]


async def test_network_faults_are_told_apart_from_injected_ones(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    """A publisher that loses, repeats and swaps seqs on its own plays the network."""
    net = Misbehaving  # skip 3, repeat 9 and swap 30 of every copy, beyond the chaos
    run = await _load(
        mosquitto_url,
        topics,
        "duplicate=0.1,drop=0.05",
        3,
        wrap=lambda p: net(p, skip={3}, repeat={9}, swap={30}),
    )
    report = build_report(run, {"chaos": "duplicate=0.1,drop=0.05", "seed": 3})
    d = report["delivery"]
    faults = run.stats.faults
    dropped = {(f.match_id, f.seq) for f in faults if f.fault == "drop"}
    dup = {(f.match_id, f.seq) for f in faults if f.fault == "duplicate"}
    net_lost = sum((m, 3) not in dropped for m in run.stats.expected)
    net_dup = sum((m, 9) not in dropped for m in run.stats.expected)
    assert d["network"]["lost"] == net_lost * 2
    assert d["network"]["duplicates"] == net_dup * 2
    assert d["network"]["reordered"] >= 1
    assert d["injected"]["lost"] == len(dropped) * 2
    assert d["injected"]["duplicates"] == sum(1 for m, s in dup if (m, s) not in dropped) * 2


async def test_the_same_seed_makes_the_same_faults_in_load(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    a = await _load(mosquitto_url, topics, SPEC, 9)
    b = await _load(mosquitto_url, Topics(root=topics.root + "-b"), SPEC, 9)

    def view(run: LoadRun) -> list[tuple[Any, ...]]:
        return [(f.fault, f.seq, f.index, f.at_s, f.clock, sorted(f.detail.items()))
                for f in run.stats.faults]  # fmt: skip

    assert view(a) == view(b) and view(a)


async def _verify(url: BrokerURL, topics: Topics, spec: str) -> dict[str, Any]:
    async with MqttClient(url) as conn:
        ready = asyncio.Event()
        consumer = asyncio.ensure_future(run_consumer(conn, topics, "dogfood", ready=ready))
        await ready.wait()
        run = await _load(
            url, topics, spec, 4, states=True, verify_state=True, expect_consumers=("dogfood",)
        )
        consumer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await consumer
    v = build_report(run, {})["verification"]
    assert v is not None
    return dict(v)


async def test_verify_state_uses_the_truth_under_chaos(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    """load-consumer (the runner with a StateReporter) against the truth: fake goals that were
    disallowed are not in it, repeats and stale snapshots change nothing."""
    v = await _verify(mosquitto_url, topics, "duplicate=0.2,correction=1,stale-state=0.1")
    assert v["ok"], v["consumers"][0]["wrong_sample"]
    assert v["consumers"][0]["right"] == 3
    assert StateReporter  # what run_consumer reports through


async def test_verify_state_under_reordering(mosquitto_url: BrokerURL, topics: Topics) -> None:
    """The runner holds an event that overtook another until it comes (its reorder window), so
    a StateReporter folding the events it handled sees every goal, in order."""
    v = await _verify(mosquitto_url, topics, "reorder=0.1")
    assert v["ok"], v["consumers"][0]["wrong_sample"]


def test_merge_reads_reports_of_every_readable_format() -> None:
    assert READABLE_FORMATS == (1, 2, 3)
    with pytest.raises(MergeError, match="format 1 or 2 or 3"):
        merge_reports([{"kind": "matchcast-load-report", "format": 4, "streams": {}}])


async def test_shards_under_chaos_merge_with_the_split_intact(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    # drain_idle_s: a subscriber idle that long is done; 1 s lost a late event to a busy
    # machine (counted lost, though the broker delivered it after the subscriber left).
    # start_at: both shards send from one moment, as --shard runs are started, so each
    # shard's probe is subscribed before the other's first event (on a busy machine one
    # shard's sender started before the other's probe had subscribed).
    start_at = time.time() + 1.0

    async def shard(i: int) -> LoadRun:
        shape = LoadShape(matches=1, qos=1, states=False, tag="s1", total_matches=2)
        opts = LoadOptions(shape=shape, topics=topics, subscribers=1, shard=(i, 2),
                           drain_idle_s=3, max_inflight=1, chaos=ChaosSpec.parse(SPEC),
                           seed=5, start_at=start_at)  # fmt: skip
        run = LoadRun(opts, [TEMPLATE], _factory(mosquitto_url))
        await run.run()
        return run

    runs = await asyncio.gather(shard(0), shard(1))
    reports = [build_report(r, {"chaos": SPEC, "seed": 5}, streams=True) for r in runs]
    merged = merge_reports(json.loads(json.dumps(reports)))
    assert merged["chaos"]["faults_total"] == sum(len(r.stats.faults) for r in runs)
    assert merged["delivery"]["network"]["lost"] == 0
    assert merged["delivery"]["injected"]["duplicates"] > 0


def test_an_old_format_1_report_still_merges(tmp_path: Path) -> None:
    """A report written before chaos (format 1, no chaos or injected data) merges as before."""
    old = {
        "format": 1,
        "kind": "matchcast-load-report",
        "created_at": "2026-11-29T00:00:00+00:00",
        "parameters": {"matches": 1, "subscribers": 1, "qos": 1},
        "sender": {
            "events_published": 2, "states_published": 0, "publish_failures": 0,
            "failure_reasons": {}, "matches_started": 1, "matches_completed": 1,
            "send_seconds": 1.0, "offered_events_per_s": 2.0, "achieved_events_per_s": 2.0,
            "scheduled": False, "overruns": 0, "overrun_threshold_ms": 10.0,
            "lateness_ms": {}, "lateness_hdr": "",
        },
        "delivery": {"delivered_events_per_s": 2.0, "consumers": [{"consumer": "p", "members": 1}]},
        "latency_ms": {}, "latency_hdr": "", "per_second": [], "per_second_hdr": [],
        "started_at_epoch": 1.0,
        "connections": {
            k: {"connected": 1, "connect_failures": 0, "failure_reasons": [],
                "connect_ms": {"min": 1.0, "median": 1.0, "max": 1.0},
                "disconnects": 0, "reconnects": 0}
            for k in ("publishers", "probes")
        },
        "verification": None,
        "expected_last_seq": {"m": 2},
        "final_scores": {"m": {}},
        "streams": {"p": {"m": [2, 0, 0, 0, 2, "Aw=="]}},
    }  # fmt: skip
    merged = merge_reports([old])
    assert merged["format"] == 3 and merged["chaos"] is None
    d = merged["delivery"]
    assert (d["expected"], d["received"], d["lost"]) == (2, 2, 0)
    assert d["network"] == {"lost": 0, "duplicates": 0, "reordered": 0}
    assert tmp_path.exists()


def test_the_command_writes_the_chaos_log_truth_and_report(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    out, log, truth = tmp_path / "r.json", tmp_path / "f.jsonl", tmp_path / "t.json"
    result = CliRunner().invoke(
        app,
        ["load", "--broker", mosquitto.url, "--matches", "2", "--speed", "max", "--subscribers", "1",
         "--qos", "1", "--chaos", "duplicate=0.1,correction=1,restart=40", "--seed", "6",
         "--chaos-log", str(log), "--truth", str(truth), "--report", str(out),
         "--root", f"mctest-load-chaos-{tmp_path.name}", "--no-progress"],
    )  # fmt: skip
    configure_logging("console", "DEBUG")  # the command configured it onto the runner's stream
    assert result.exit_code == 0, result.output
    assert "chaos injected" in result.output
    report = json.loads(out.read_text())
    faults = [json.loads(line) for line in log.read_text().splitlines()]
    assert report["chaos"]["faults_total"] == len(faults)
    assert report["chaos"]["faults"]["restart"] == 2
    assert report["delivery"]["network"] == {"lost": 0, "duplicates": 0, "reordered": 0}
    states = read_truth(truth)
    assert sorted(states) == sorted(report["expected_last_seq"])
    assert all(s.score == {"ARG": 2, "ENG": 1} and s.status == "finished" for s in states.values())
    assert all(states[m].last_seq == n for m, n in report["expected_last_seq"].items())


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--chaos", "reorder=0.1:x"], "expected reorder=P[:WINDOW]"),
        (["--chaos", "drop=0.1", "--truth", "t.json", "--workers", "2"], "written by one process"),
    ],
)
def test_bad_chaos_options_of_load_are_one_line_and_exit_2(args: list[str], needle: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "matchcast", "load", "--broker", "mqtt://127.0.0.1:1", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert needle in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_copy_s_faults_follow_the_seed_and_its_index_not_its_match_id() -> None:
    source = resolve_matches("semifinal")[0]
    a = build_copy_chaos(
        source, "semi-t1-00003", None, ChaosSpec.parse(SPEC), seed=2, index=3, run=5
    )
    b = build_copy_chaos(
        source, "semi-t2-00003", None, ChaosSpec.parse(SPEC), seed=2, index=3, run=5
    )
    c = build_copy_chaos(
        source, "semi-t1-00004", None, ChaosSpec.parse(SPEC), seed=2, index=4, run=5
    )

    def view(chaos: Any) -> list[tuple[Any, ...]]:
        return [(e.kind, e.seq, e.retain, e.due) for e in chaos.emissions]

    assert view(a) == view(b) != view(c)
    stamp = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    payloads = [a.payload(i, stamp, stamp) for i in range(len(a))]
    assert [p.replace(b"semi-t1", b"semi-t2") for p in payloads] == [
        b.payload(i, stamp, stamp) for i in range(len(b))
    ]


@pytest.mark.parametrize("speed", [None, 3000.0], ids=["max", "3000x"])
async def test_every_fault_kind_at_once_at_max_speed_and_on_a_schedule(
    mosquitto_url: BrokerURL, topics: Topics, speed: float | None
) -> None:
    """Delays and bursts wait on the schedule even at max speed; every copy completes, every
    fault kind is injected, and the broker adds none of its own."""
    every = (
        "duplicate=0.1,reorder=0.1,drop=0.05,delay=0.05:100,stale-state=0.05,restart=30,"
        "correction=1,burst=60:0.3"
    )
    shape = LoadShape(matches=2, qos=1, speed=speed, states=True, tag="all")
    options = LoadOptions(shape=shape, topics=topics, subscribers=1, drain_idle_s=1,
                          chaos=ChaosSpec.parse(every), seed=1)  # fmt: skip
    run = LoadRun(options, [TEMPLATE], _factory(mosquitto_url))
    await run.run()
    report = build_report(run, {"chaos": every, "seed": 1})
    assert set(report["chaos"]["faults"]) == {
        "burst", "correction", "delay", "drop", "duplicate", "reorder", "restart", "stale-state"
    }  # fmt: skip
    assert report["sender"]["matches_completed"] == 2
    assert report["delivery"]["network"] == {"lost": 0, "duplicates": 0, "reordered": 0}
