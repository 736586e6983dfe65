"""``matchcast load`` as k6 and Locust users expect it: honest defaults, stages of live
matches and subscribers, figures each second to every sink (``--live json`` among them),
thresholds that end a failed run, and the end summary."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from events import Topics, decode_event
from matchcast.load import (
    ROW_KIND,
    ConsumerAccount,
    JsonLines,
    LiveOptions,
    LoadArgs,
    LoadError,
    LoadShape,
    MatchTemplate,
    Runtime,
    Sender,
    StageError,
    StreamStats,
    execute,
    parse_duration,
    parse_stages,
    plan,
    render_summary,
)
from matchcast.load._live import lost_so_far
from matchcast.testing import Mosquitto
from matchcast.transport.connection import BrokerURL
from simulator import resolve_matches
from tests._cli import run_cli

SOURCES = resolve_matches("semifinal")
TEMPLATE = MatchTemplate.build(SOURCES[0])
#: The keys of a per-second row, as LIVE.md sets them.
ROW_KEYS = {
    "kind", "t", "offered", "sent", "delivered", "latency_p50", "latency_p99", "latency_max",
    "sender_lag_ms", "lost", "duplicates", "reordered", "live_matches", "subscribers",
    "connections", "nodes",
}  # fmt: skip


# ---------------------------------------------------------------- options


def test_a_run_given_no_shape_lasts_30_s_at_speed_60_and_max_is_asked_for_by_name() -> None:
    bare = LoadArgs().honest()
    assert (bare.speed, bare.duration, bare.matches) == ("60", 30.0, 10)
    timed = LoadArgs(duration=5).honest()
    assert (timed.speed, timed.duration) == ("60", 5)
    flat_out = LoadArgs(speed="max").honest()
    assert (flat_out.speed, flat_out.duration) == ("max", None)
    rated = LoadArgs(rate=500.0).honest()
    assert rated.duration is None  # --rate shapes the run: no default duration


@pytest.mark.parametrize("given", [{"matches": 5}, {"ramp": 2.0}, {"duration": 10.0}])
def test_stages_replace_matches_ramp_and_duration(given: dict[str, Any]) -> None:
    with pytest.raises(LoadError, match="--stages sets the matches over time") as caught:
        LoadArgs(stages="1s:2", **given).honest()
    assert caught.value.code == 2


def test_stages_and_matches_together_exit_2_before_anything_connects() -> None:
    result = run_cli("load", "--stages", "1s:2", "--matches", "3", "--broker", "mqtt://127.0.0.1:1")
    assert result.code == 2, result.stderr
    assert "drop --matches" in result.stderr
    bad = run_cli("load", "--stages", "30s:many", "--broker", "mqtt://127.0.0.1:1")
    assert bad.code == 2
    assert "DURATION:TARGET" in bad.stderr


def test_stages_read_as_k6_writes_them() -> None:
    stages = parse_stages("30s:100,5m:1000,30s:0")
    assert stages.points == ((30.0, 100), (330.0, 1000), (360.0, 0))
    assert stages.duration_s == 360.0
    assert stages.peak == 1000
    assert [stages.target(t) for t in (0, 15, 30, 180, 345, 360, 400)] == [
        0, 50, 100, 550, 500, 0, 0,
    ]  # fmt: skip
    assert parse_duration("1m30s") == 90.0
    assert parse_duration("250ms") == 0.25
    assert parse_duration("45") == 45.0


@pytest.mark.parametrize(
    "text", ["", "30s", "30s:-1", "xs:3", "1m:3,,", "0s:3", "30s:0", "2w:4", "30s:1e9"]
)
def test_stages_that_cannot_be_read_are_refused(text: str) -> None:
    with pytest.raises(StageError):
        parse_stages(text)


# ---------------------------------------------------------------- the sender under stages


class Recorder:
    """A publisher that keeps what it was given."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes]] = []

    async def publish(
        self, topic: str, payload: bytes, *, qos: int = 0, retain: bool = False, props: Any = None
    ) -> None:
        self.sent.append((topic, payload))


async def test_stages_start_matches_then_stop_the_newest_first_each_with_replay_stopped() -> None:
    recorder = Recorder()
    stages = parse_stages("0.3s:4,0.3s:4,0.3s:0")
    shape = LoadShape(matches=4, speed=600, stages=stages, tag="st", total_matches=4)
    sender = Sender([TEMPLATE], shape, [recorder], topics=Topics("mct-stages"))
    seen_running: list[int] = []

    async def watch() -> None:
        while True:
            seen_running.append(sender.stats.matches_running)
            await asyncio.sleep(0.02)

    watcher = asyncio.ensure_future(watch())
    await sender.run()
    watcher.cancel()
    stats = sender.stats
    assert stats.matches_started == stats.matches_stopped == 4
    assert max(seen_running) == 4 and stats.matches_running == 0
    events = [decode_event(p) for t, p in recorder.sent if t.endswith("/events")]
    stops = [e for e in events if e.type == "replay_stopped"]
    assert [e.match_id[-5:] for e in stops] == ["00003", "00002", "00001", "00000"]
    for stop in stops:
        mine = [e.seq for e in events if e.match_id == stop.match_id]
        assert mine == list(range(1, len(mine) + 1))  # contiguous, the stop last
        assert stop.seq == mine[-1] == stats.expected[stop.match_id]
    states = [json.loads(p) for t, p in recorder.sent if t.endswith("/state")]
    assert sum(s["status"] == "stopped" for s in states) == 4


# ---------------------------------------------------------------- accounting mid-run


def test_a_probe_that_joined_late_and_left_early_owes_only_what_was_sent_meanwhile() -> None:
    stream = StreamStats()
    for seq in (4, 5, 7):
        stream.record(seq)
    account = ConsumerAccount("probe-0", streams={"m": stream}, since={"m": 3})
    assert account.owed({"m": 8}) == 2  # 6 and 8
    account.until = {"m": 7}
    assert account.owed({"m": 8}) == 1  # 6 only: it left before 8 went
    assert account.totals({"m": 8})["lost"] == 1
    assert account.totals({"m": 8})["expected"] == 4
    assert lost_so_far([account, ConsumerAccount("probe-1")], {"m": 2}) == 2


# ---------------------------------------------------------------- the end summary


def test_the_end_summary_marks_thresholds_and_says_the_sender_fell_behind() -> None:
    report = {
        "sender": {
            "send_seconds": 2.0, "events_published": 100, "scheduled": True, "overruns": 7,
            "overrun_threshold_ms": 10.0, "lag_max_ms": 120.5,
        },
        "delivery": {"received": 100, "delivered_events_per_s": 50.0, "lost": 0,
                     "duplicates": 0, "reordered": 0},
        "latency_ms": {"mean": 1.0, "min": 0.5, "p50": 1.0, "p90": 2.0, "p99": 3.0, "max": 4.0},
        "per_second": [{"offered": 60, "live_matches": 3, "subscribers": 1},
                       {"offered": 40, "live_matches": 5, "subscribers": 2}],
        "checks": [{"check": "p99 < 50ms", "passed": True, "actual": 3.0},
                   {"check": "lost == 0", "passed": True, "actual": 0.0}],
    }  # fmt: skip
    text = render_summary(report)
    assert "✓ p99 < 50ms" in text
    assert "late=7" in text and "SENDER FELL BEHIND" in text
    assert "live_matches" in text and "max=5" in text
    report["sender"]["scheduled"] = False
    assert "latency includes the sender's backlog" in render_summary(report)


# ---------------------------------------------------------------- whole runs


class ListSink:
    """A sink that keeps what it is given, and says which calls it got."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.rows: list[dict[str, Any]] = []
        self.report: dict[str, Any] | None = None

    async def start(self) -> None:
        self.calls.append("start")

    def second(self, row: dict[str, Any]) -> None:
        self.rows.append(row)

    async def finish(self, report: dict[str, Any]) -> None:
        self.calls.append("finish")
        self.report = report

    async def close(self) -> None:
        self.calls.append("close")


def _execute(url: str, args: LoadArgs, *sinks: Any) -> tuple[dict[str, Any], Any]:
    args = args.honest()
    the_plan = plan(
        args,
        sources=SOURCES,
        topics=Topics(args.root),
        speed=None if args.speed == "max" else float(args.speed or 60),
        chaos=None,
        protocol="auto",
    )
    runtime = Runtime(
        run=lambda fn: asyncio.run(fn()),
        console=Console(file=io.StringIO()),
        brokers=lambda text: (BrokerURL.parse(text or url),),
    )
    return execute(args, the_plan, runtime, LiveOptions(live="none", sinks=tuple(sinks)))


@pytest.mark.mosquitto
def test_every_sink_gets_a_row_each_second_the_report_and_a_close(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    sink, lines = ListSink(), io.StringIO()
    args = LoadArgs(broker=mosquitto.url, matches=3, subscribers=2, speed="max", keep=True,
                    root=f"mct-live-{tmp_path.name}", drain_idle=0.5)  # fmt: skip
    report, _ = _execute(mosquitto.url, args, sink, JsonLines(lines))
    assert sink.calls == ["start", "finish", "close"]
    assert sink.report is report
    assert [r["t"] for r in sink.rows] == list(range(len(sink.rows)))
    assert all(set(r) == ROW_KEYS and r["kind"] == ROW_KIND for r in sink.rows)
    assert sum(r["delivered"] for r in sink.rows) == 2 * 3 * len(TEMPLATE)
    assert max(r["subscribers"] for r in sink.rows) == 2
    assert sink.rows[-1]["lost"] == report["delivery"]["lost"] == 0
    json_lines = [json.loads(line) for line in lines.getvalue().splitlines()]
    assert json_lines[:-1] == sink.rows
    assert json_lines[-1]["kind"] == "matchcast-load-end"
    row = report["per_second"][0]
    assert {"sender_lag_ms", "live_matches", "subscribers", "connections"} <= set(row)
    assert report["sender"]["latency_includes_sender_backlog"] is True


@pytest.mark.mosquitto
def test_subscriber_stages_probes_join_and_leave_and_owe_what_was_sent_meanwhile(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    sink = ListSink()
    args = LoadArgs(broker=mosquitto.url, matches=2, speed="600", duration=2.0, keep=True,
                    subscriber_stages="0.4s:2,0.8s:2,0.4s:0",
                    root=f"mct-sst-{tmp_path.name}", drain_idle=0.5)  # fmt: skip
    report, run = _execute(mosquitto.url, args, sink)
    assert len(run.accounts) == 2
    assert all(a.since is not None and a.until is not None for a in run.accounts)
    assert report["delivery"]["lost"] == 0
    assert 0 < report["delivery"]["expected"] < 2 * report["sender"]["events_published"]
    assert max(r["subscribers"] for r in sink.rows) == 2
    assert sink.rows[-1]["subscribers"] == 0


def _load(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "matchcast", "load", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "MATCHCAST_BROKER": ""},
        timeout=120,
        check=False,
    )


@pytest.mark.mosquitto
def test_abort_on_fail_ends_the_run_at_the_first_failed_check_exit_3(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    out = tmp_path / "r.json"
    result = _load("--broker", mosquitto.url, "--matches", "2", "--duration", "60",
                   "--root", f"mct-abort-{tmp_path.name}", "--check", "lost == 0",
                   "--check", "received > 1000000", "--abort-on-fail", "--check-delay", "1",
                   "--live", "json", "--report", str(out))  # fmt: skip
    assert result.returncode == 3, result.stderr
    assert "aborted at" in result.stderr
    report = json.loads(out.read_text())
    assert report["aborted"]["check"] == "received > 1000000"
    assert report["sender"]["send_seconds"] < 60
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines[-1]["kind"] == "matchcast-load-end" and lines[-1]["aborted"]
    assert all(line["kind"] == ROW_KIND for line in lines[:-1])
    assert "ABORTED" in result.stderr  # the table and summary went to standard error


@pytest.mark.mosquitto
def test_a_staged_run_from_the_command_line_shows_live_matches_rise_and_fall(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    out = tmp_path / "r.json"
    result = _load("--broker", mosquitto.url, "--stages", "2s:4,1s:4,1s:0", "--speed", "600",
                   "--root", f"mct-stcli-{tmp_path.name}", "--live", "none",
                   "--check", "lost == 0", "--report", str(out))  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    live = [row["live_matches"] for row in report["per_second"]]  # the most in each second
    assert live[0] < max(live) == 4  # second 0 ramps to 2
    assert report["sender"]["matches_stopped"] == 4  # the fall: each stopped, none left
    assert report["parameters"]["stages"] == "2s:4,1s:4,1s:0"


async def test_stop_ends_a_sender_waiting_for_its_next_event_at_once() -> None:
    """In real time a semi-final waits a minute between events: a stop (Ctrl-C on a Dask
    shard, an abort) ends the wait rather than the next event."""
    recorder = Recorder()
    sender = Sender([TEMPLATE], LoadShape(matches=1, speed=1, tag="wk"), [recorder],
                    topics=Topics("mct-wake"))  # fmt: skip
    task = asyncio.ensure_future(sender.run())
    while not sender.stats.events:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.1)  # it now waits for an event due 60 s from now
    sender.stop()
    async with asyncio.timeout(30):
        stats = await task
    assert stats.matches_completed == 0 and stats.events < len(TEMPLATE)
