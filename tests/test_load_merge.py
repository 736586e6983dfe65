"""Shards of one run merge into the report one process would have written."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from events import Topics
from matchcast.cli.load import _failures
from matchcast.load import (
    REPORT_FORMAT,
    LoadOptions,
    LoadRun,
    LoadShape,
    MatchTemplate,
    MergeError,
    StreamStats,
    build_report,
    merge_reports,
    render_table,
    write_chart,
)
from matchcast.testing import Mosquitto
from matchcast.transport.connection import BrokerURL
from matchcast.transport.mqtt import MqttClient
from simulator import resolve_matches

TEMPLATE = MatchTemplate.build(resolve_matches("semifinal")[0])
N = len(TEMPLATE)


def test_stream_stats_survive_the_wire_and_merge_as_a_union() -> None:
    a, b = StreamStats(), StreamStats()
    for seq in (1, 2, 4):
        a.record(seq)
    for seq in (2, 3, 3):
        b.record(seq)
    back = StreamStats.from_wire(json.loads(json.dumps(a.to_wire())))
    assert (back.received, back.unique, back.max_seq) == (3, 3, 4)
    back.merge(b)
    assert back.received == 6
    assert back.unique == 4
    assert back.duplicates == 2  # 2 seen by both, 3 twice in b
    assert back.missing(5) == [5]


def test_merge_refuses_reports_without_streams() -> None:
    with pytest.raises(MergeError, match="--shard"):
        merge_reports([{"kind": "matchcast-load-report", "format": 1, "streams": None}])
    with pytest.raises(MergeError, match="no reports"):
        merge_reports([])


@pytest.mark.mosquitto
async def test_two_shards_merge_with_exact_counts_and_histograms(
    mosquitto_url: BrokerURL, topics: Topics, tmp_path: Path
) -> None:
    k = 5
    start_at = time.time() + 0.5

    def shard(i: int) -> LoadRun:
        shape = LoadShape(matches=len(range(i, k, 2)), qos=1, states=False, tag="t1",
                          total_matches=k)  # fmt: skip
        opts = LoadOptions(shape=shape, topics=topics, subscribers=1, shard=(i, 2),
                           start_at=start_at, drain_idle_s=0.5)  # fmt: skip
        return LoadRun(opts, [TEMPLATE], lambda cid, role: MqttClient(mosquitto_url, client_id=cid))

    runs = [shard(0), shard(1)]
    await asyncio.gather(*(r.run() for r in runs))
    reports = [build_report(r, {"matches": r.options.shape.matches}, streams=True) for r in runs]
    merged = merge_reports(json.loads(json.dumps(reports)))
    d = merged["delivery"]
    assert len(d["consumers"]) == 2  # one probe per shard, each sees every match
    assert d["expected"] == d["received"] == d["unique"] == 2 * k * N
    assert d["lost"] == d["duplicates"] == 0
    assert merged["sender"]["events_published"] == k * N
    assert len(merged["expected_last_seq"]) == k
    assert merged["latency_ms"]["count"] == 2 * k * N
    assert sum(row["delivered"] for row in merged["per_second"]) == 2 * k * N
    assert merged["parameters"]["matches"] == k
    write_chart(merged, tmp_path / "chart.png")
    assert (tmp_path / "chart.png").read_bytes()[:4] == b"\x89PNG"
    # Reports of older versions have no checks, interrupted flag or run parameters: still fine.
    assert "checks" not in merged and "interrupted" not in merged
    assert "matchcast load" in render_table(merged).title
    assert _failures(merged) == []


@pytest.mark.mosquitto
def test_workers_and_merge_from_the_command_line(mosquitto: Mosquitto, tmp_path: Path) -> None:
    def matchcast(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "matchcast", "load", *args],
            capture_output=True,
            text=True,
            env={**os.environ, "MATCHCAST_BROKER": mosquitto.url},
            timeout=120,
            check=False,
        )

    root = f"mctest-workers-{tmp_path.name}"
    out = tmp_path / "w.json"
    r = matchcast("--workers", "2", "--matches", "3", "--subscribers", "2", "--qos", "1",
                  "--root", root, "--no-progress", "--report", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    report = json.loads(out.read_text())
    assert report["parameters"]["workers"] == 2
    assert report["delivery"]["expected"] == report["delivery"]["received"] == 3 * N * 2
    assert report["delivery"]["lost"] == 0
    again = tmp_path / "again.json"
    bad = matchcast("merge", str(out), "--report", str(again))
    assert bad.returncode == 2
    assert "--shard" in bad.stderr

    # Probes in a process of their own, as mosquitto_pub and mosquitto_sub are two processes.
    split = tmp_path / "split.json"
    r = matchcast("--workers", "2", "--probe-workers", "1", "--matches", "3", "--subscribers",
                  "2", "--qos", "1", "--root", root + "-split", "--no-progress", "--report",
                  str(split))  # fmt: skip
    assert r.returncode == 0, r.stderr
    report = json.loads(split.read_text())
    shards = report["parameters"]["merged_from"]
    assert [(p["matches"], p["subscribers"]) for p in shards] == [(2, 0), (1, 0), (0, 2)]
    assert report["parameters"]["probe_workers"] == 1
    assert report["sender"]["events_published"] == 3 * N
    assert report["delivery"]["expected"] == report["delivery"]["received"] == 3 * N * 2
    assert report["delivery"]["lost"] == report["delivery"]["duplicates"] == 0
    assert report["latency_ms"]["count"] == 3 * N * 2
    lonely = matchcast("--probe-only", "--matches", "3", "--root", root, "--no-progress")
    assert lonely.returncode == 2
    assert "--shard" in lonely.stderr
    mixed = matchcast("--probe-workers", "1", "--shard", "0/2", "--root", root, "--no-progress")
    assert mixed.returncode == 2
    assert "do not mix" in mixed.stderr


@pytest.mark.slow
@pytest.mark.mosquitto
def test_workers_start_together_however_slowly_one_of_them_starts(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    """A worker that takes long to start (a loaded machine) still hears every shard's matches.

    Two shards, each sending one match and probing with one subscriber. The workers used to start at a fixed time a few seconds ahead; one that was not connected
    by then lost the other shards' events. A ``sitecustomize`` holds shard 1 for 5 s.
    """
    (tmp_path / "sitecustomize.py").write_text(
        "import sys, time\nif '1/2' in sys.orig_argv:\n    time.sleep(5)\n"
    )
    out = tmp_path / "slow.json"
    args = ["load", "--workers", "2", "--matches", "2", "--subscribers", "2", "--speed", "max"]
    args += ["--qos", "1", "--no-progress", "--root", f"mctest-slow-{tmp_path.name}"]
    r = subprocess.run(
        [sys.executable, "-m", "matchcast", *args, "--report", str(out)],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "MATCHCAST_BROKER": mosquitto.url,
            "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]),
        },
        timeout=120,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    delivery = json.loads(out.read_text())["delivery"]
    assert delivery["expected"] == delivery["received"] == 2 * N * 2
    assert delivery["lost"] == 0


FIXTURES = Path(__file__).parent / "fixtures" / "load"


def test_real_format_1_shard_reports_still_merge_and_render(tmp_path: Path) -> None:
    """Reports written by the release before --check and --chaos (format 1) merge as before.

    The two files are the very reports of a 2-shard run (both shards at once, one
    ``--start-at``) made with that release's ``matchcast load --shard i/2`` against mosquitto,
    not hand-written.
    """
    paths = sorted(FIXTURES.glob("format-1-shard-*.json"))
    assert len(paths) == 2
    old = [json.loads(p.read_text()) for p in paths]
    assert {r["format"] for r in old} == {1}
    merged = merge_reports(old)
    assert merged["format"] == REPORT_FORMAT
    assert merged["delivery"]["expected"] == merged["delivery"]["received"] == 2 * N * 2
    assert merged["delivery"]["lost"] == 0
    out = tmp_path / "merged.json"
    merge = ["load", "merge", *map(str, paths), "--report", str(out), "--check", "lost == 0"]
    r = subprocess.run(
        [sys.executable, "-m", "matchcast", *merge],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["delivery"]["received"] == 2 * N * 2
