"""Shards of one run merge into the report one process would have written."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from events import Topics
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
from matchcast.load import failures as _failures
from matchcast.testing import Mosquitto
from matchcast.transport.connection import BrokerURL
from matchcast.transport.mqtt import MqttClient
from simulator import resolve_matches
from tests._cli import run_cli
from tests._factories import SEMIFINAL_LEAN_EVENTS

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
                           start_at=start_at, drain_idle_s=3)  # fmt: skip
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
    r = matchcast("--workers", "2", "--matches", "3", "--speed", "max", "--subscribers", "2", "--qos", "1",
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
    r = matchcast("--workers", "2", "--probe-workers", "1", "--matches", "3", "--speed", "max", "--subscribers",
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
#: Events per match of the committed reports' runs: the semi-final's lean feed (they were made
#: before the full feed).
RECORDED_N = SEMIFINAL_LEAN_EVENTS


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
    assert merged["delivery"]["expected"] == merged["delivery"]["received"] == 2 * RECORDED_N * 2
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
    assert json.loads(out.read_text())["delivery"]["received"] == 2 * RECORDED_N * 2


def _fixtures(fmt: int) -> list[dict[str, Any]]:
    paths = sorted(FIXTURES.glob(f"format-{fmt}-shard-*.json"))
    assert len(paths) == 2
    return [json.loads(p.read_text()) for p in paths]


def _received_and_lost(report: dict[str, Any]) -> dict[str, tuple[int, int]]:
    return {c["consumer"]: (c["received"], c["lost"]) for c in report["delivery"]["consumers"]}


def test_real_format_3_shards_merge_with_exact_figures_per_node() -> None:
    """Two shards over two independent mosquittos (the fixtures' own run, see format 2):
    shard 0 sent matches 0 and 2 on A and probed A, shard 1 sent match 1 on B and probed B.
    Each shard's report counts its probe's loss against its own matches only; merged, each
    node's loss is its consumer's loss against all three."""
    shards = _fixtures(3)
    a, b = shards[0]["parameters"]["broker"].split(",")
    merged = merge_reports(shards)
    na, nb = merged["nodes"][a], merged["nodes"][b]
    assert (na["connections"], nb["connections"]) == ({"probe": 1, "pub": 1},) * 2
    assert (na["events_published"], na["events_acknowledged"]) == (2 * RECORDED_N, 2 * RECORDED_N)
    assert (nb["events_published"], nb["events_acknowledged"]) == (RECORDED_N, RECORDED_N)
    figures = ("received", "unique", "lost", "duplicates", "reordered")
    assert [na[k] for k in figures] == [2 * RECORDED_N, 2 * RECORDED_N, RECORDED_N, 0, 0]
    assert [nb[k] for k in figures] == [RECORDED_N, RECORDED_N, 2 * RECORDED_N, 0, 0]
    assert (na["consumers"], nb["consumers"]) == (["probe-0-0"], ["probe-1-0"])
    assert (na["latency_ms"]["count"], nb["latency_ms"]["count"]) == (2 * RECORDED_N, RECORDED_N)
    assert _received_and_lost(merged) == {
        "probe-0-0": (2 * RECORDED_N, RECORDED_N),
        "probe-1-0": (RECORDED_N, 2 * RECORDED_N),
    }


def test_real_format_2_shards_merge_with_connections_per_node_only() -> None:
    """Format 2 counted connections per node and nothing else: merged, the deliveries per
    node are unknown (None), never zero."""
    shards = _fixtures(2)
    assert {r["format"] for r in shards} == {2}
    a, b = shards[0]["parameters"]["broker"].split(",")
    merged = merge_reports(shards)
    assert merged["format"] == REPORT_FORMAT
    assert merged["nodes"][a]["connections"] == merged["nodes"][b]["connections"]
    assert merged["nodes"][a]["connections"] == {"probe": 1, "pub": 1}
    assert {merged["nodes"][a][k] for k in ("received", "lost", "events_published")} == {None}
    assert _received_and_lost(merged) == {
        "probe-0-0": (2 * RECORDED_N, RECORDED_N),
        "probe-1-0": (RECORDED_N, 2 * RECORDED_N),
    }
    assert "n/a" in _text(render_table(merged))


def test_reports_of_formats_1_2_and_3_merge_together(tmp_path: Path) -> None:
    """Three runs' shard reports, one of each format, merge into one format-3 report (the
    consumers of one name add up across them): nothing of an older report is lost, and the
    per-node deliveries, which formats 1 and 2 lack, are unknown rather than partial."""
    old = _fixtures(1) + _fixtures(2)
    new = _fixtures(3)
    merged = merge_reports(old + new)
    assert merged["format"] == REPORT_FORMAT
    assert len(merged["expected_last_seq"]) == 2 + 3 + 3
    # Format 1 ran on one mosquitto (each probe heard both matches); 2 and 3 on two.
    assert _received_and_lost(merged) == {
        "probe-0-0": (2 * RECORDED_N + 2 * RECORDED_N + 2 * RECORDED_N, 2 * RECORDED_N),
        "probe-1-0": (2 * RECORDED_N + RECORDED_N + RECORDED_N, 4 * RECORDED_N),
    }
    assert merged["sender"]["events_published"] == 8 * RECORDED_N
    nodes = {url for r in old + new for url in (r.get("nodes") or {})}
    assert set(merged["nodes"]) == nodes and len(nodes) == 4
    for url, node in merged["nodes"].items():
        assert node["received"] is None
        assert node["connections"] == {"probe": 1, "pub": 1}, url
    out = tmp_path / "all.json"
    paths = [str(p) for p in sorted(FIXTURES.glob("format-*-shard-*.json"))]
    r = subprocess.run(
        [sys.executable, "-m", "matchcast", "load", "merge", *paths, "--report", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(out.read_text())["delivery"]["received"] == 10 * RECORDED_N
    assert "node mqtt://" in r.stdout


def _text(table: Any) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(table)
    return console.export_text()


def _bomb() -> str:
    """A histogram's 8-byte hdrh header and a zlib stream of 300 MB of zeros, in base64."""
    import base64
    import zlib

    inflate_to = 300 * 1024 * 1024
    squeeze = zlib.compressobj(9)
    body = b"".join(squeeze.compress(b"\0" * (1 << 20)) for _ in range(inflate_to >> 20))
    body += squeeze.flush()
    return base64.b64encode(bytes.fromhex("1c84931400000022") + body).decode()


def _damaged(how: str) -> dict[str, Any]:
    report = _fixtures(3)[0]
    node = next(iter(report["nodes"].values()))
    if how == "infinity":
        node["received"] = float("inf")
    elif how == "bad histogram":
        node["latency_hdr"] = "HISTFAAAAB14nJNpmSzMwMDAxQABzFCaEUzO"
    elif how == "bomb":
        report["per_second_hdr"][0] = _bomb()
    elif how == "far apart":
        report["started_at_epoch"] += 10**9
    return report


@pytest.mark.parametrize("how", ["infinity", "bad histogram", "bomb", "far apart"])
def test_a_damaged_report_is_a_merge_error_not_a_crash(how: str) -> None:
    """Hostile or damaged shard reports end the merge with a MergeError saying so: no
    traceback, no hang, no memory blow-up (a 285 kB histogram once inflated to 300 MB)."""
    import tracemalloc

    from matchcast.load import MergeError

    reports = [_damaged(how), _fixtures(3)[1]]
    tracemalloc.start()
    try:
        with pytest.raises(MergeError):
            merge_reports(reports)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 100 * 1024 * 1024


STREAM = "wc2026-sf-arg-eng-fo-00000"
NODE = "mqtt://127.0.0.1:43783"


def _set(report: dict[str, Any], path: tuple[str | int, ...], value: object) -> None:
    *parents, last = path
    into: Any = report
    for key in parents:
        into = into[key]
    into[last] = value


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("sender", "events_published"), -5, "sender.events_published"),
        (("per_second", 0, "delivered"), float("nan"), "per_second[0].delivered"),
        (("streams", "probe-0-0", STREAM, 0), -1, f"streams.probe-0-0.{STREAM}[0]"),
        (("delivery", "consumers", 0, "members"), 1.5, "delivery.consumers[0].members"),
        (("connections", "probes", "connected"), float("inf"), "connections.probes.connected"),
        (("expected_last_seq", STREAM), -106, f"expected_last_seq.{STREAM}"),
        (("nodes", NODE, "received"), True, f'nodes["{NODE}"].received'),
        (("latency_ms", "p50"), float("-inf"), "latency_ms.p50"),
    ],
)
def test_a_count_that_is_no_count_is_a_merge_error_naming_the_file_and_field(
    tmp_path: Path, path: tuple[str | int, ...], value: object, field: str
) -> None:
    """Negative, NaN, infinite or fractional counts (and any figure that is not finite) in a
    shard report are refused, as damage is: one error naming the file and the field, exit 2."""
    report, other = _fixtures(3)
    _set(report, path, value)
    damaged, good = tmp_path / "damaged.json", tmp_path / "good.json"
    damaged.write_text(json.dumps(report))
    good.write_text(json.dumps(other))
    with pytest.raises(MergeError) as info:
        merge_reports([report, other])
    assert field in str(info.value)
    result = run_cli("load", "merge", str(good), str(damaged))
    assert result.code == 2, result.stdout
    error = " ".join(result.stderr.split())
    assert f"cannot merge: {damaged}: {field} is " in error
