"""``matchcast load --dask ADDR --shards N`` and ``--workers N``: shards as tasks on a Dask
cluster, one a worker, started together; their rows streamed back each second; a worker lost
mid-run fails its shard, and the report and the exit say so."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from matchcast.load import LoadArgs, LoadError
from matchcast.load._dask import _Rows, need_distributed
from matchcast.testing import Mosquitto
from tests._factories import SEMIFINAL_EVENTS

N = SEMIFINAL_EVENTS  # events of one semi-final (the full feed, load's default)


def test_without_distributed_dask_and_workers_exit_2_naming_the_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(LoadError, match=r"pip install 'matchcast\[dask\]'") as caught:
        need_distributed("--workers")
    assert caught.value.code == 2
    assert caught.value.message.startswith("--workers runs on Dask")


@pytest.mark.parametrize(
    ("given", "needle"),
    [
        ({"dask": "tcp://127.0.0.1:8786"}, "go together"),
        ({"shards": 2}, "go together"),
        ({"dask": "tcp://127.0.0.1:8786", "shards": 2, "workers": 2}, "drop --workers"),
        ({"workers": 2, "subscriber_stages": "1s:2"}, "runs in one process"),
    ],
)
def test_dask_options_that_do_not_go_together_exit_2(given: dict[str, object], needle: str) -> None:
    with pytest.raises(LoadError, match=needle) as caught:
        LoadArgs(**given).honest()  # type: ignore[arg-type]
    assert caught.value.code == 2


def test_a_second_is_handed_on_once_every_running_shard_gave_it_or_one_is_well_ahead() -> None:
    rows = _Rows(2)
    row = {"t": 0, "offered": 5, "sent": 5, "delivered": 10, "latency_p99": 2.0, "live_matches": 1}
    rows.add(0, row)
    assert rows.ready() == []  # shard 1 has not said second 0 yet
    rows.add(1, {**row, "latency_p99": 3.0})
    [both] = rows.ready()
    assert (both["sent"], both["delivered"], both["latency_p99"], both["live_matches"]) == (
        10, 20, 3.0, 2,
    )  # fmt: skip
    for t in (1, 2, 3):  # shard 1 went quiet: shard 0 two seconds ahead hands second 1 on
        rows.add(0, {**row, "t": t})
    assert [r["t"] for r in rows.ready()] == [1]
    rows.running.discard(1)  # shard 1 failed: the rest go at once
    assert [r["t"] for r in rows.ready()] == [2, 3]


def _load(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "matchcast", "load", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "MATCHCAST_BROKER": "", **(env or {})},
    )


@pytest.mark.mosquitto
@pytest.mark.slow
def test_workers_run_on_a_local_cluster_and_stream_their_seconds(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    out = tmp_path / "w.json"
    proc = _load("--broker", mosquitto.url, "--workers", "2", "--matches", "4", "--speed", "max",
                 "--subscribers", "2", "--root", f"mct-dw-{tmp_path.name}", "--live", "json",
                 "--report", str(out))  # fmt: skip
    stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 0, stderr
    lines = [json.loads(line) for line in stdout.splitlines()]
    assert lines[-1]["kind"] == "matchcast-load-end"
    assert sum(line["delivered"] for line in lines[:-1]) == 4 * N * 2
    report = json.loads(out.read_text())
    assert [s["status"] for s in report["shards"]] == ["ok", "ok"]
    assert report["delivery"]["expected"] == report["delivery"]["received"] == 4 * N * 2
    assert report["parameters"]["workers"] == 2


@pytest.mark.mosquitto
@pytest.mark.slow
def test_a_worker_killed_mid_run_fails_its_shard_and_the_run_says_so(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    dask = pytest.importorskip("dask")
    distributed = pytest.importorskip("distributed")
    out = tmp_path / "k.json"
    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0"
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        pids = client.run(os.getpid)
        proc = _load("--broker", mosquitto.url, "--dask", cluster.scheduler_address,
                     "--shards", "2", "--matches", "4", "--speed", "60", "--duration", "8",
                     "--root", f"mct-dk-{tmp_path.name}", "--live", "json",
                     "--report", str(out))  # fmt: skip
        try:
            assert proc.stdout is not None
            first = json.loads(proc.stdout.readline())  # a second streamed from both shards
            assert first["kind"] == "matchcast-load-second"
            victim = sorted(pids)[1]  # shard 1 runs on the second worker
            os.kill(pids[victim], signal.SIGKILL)
            stdout, stderr = proc.communicate(timeout=120)
        finally:
            proc.kill()
    assert proc.returncode == 3, stderr
    assert "shard 1/2 failed" in stderr
    report = json.loads(out.read_text())
    [ok, lost] = report["shards"]
    assert ok["status"] == "ok" and lost["status"] == "failed"
    assert victim in lost["worker"]
    assert report["per_second_streamed"][0]["live_matches"] == 4  # both shards had streamed
    assert report["sender"]["events_published"] > 0  # shard 0's report, merged


@pytest.mark.mosquitto
@pytest.mark.slow
def test_a_shard_that_fails_a_check_with_abort_on_fail_stops_every_shard(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    out = tmp_path / "a.json"
    proc = _load("--broker", mosquitto.url, "--workers", "2", "--matches", "4", "--duration", "60",
                 "--root", f"mct-da-{tmp_path.name}", "--live", "none", "--check",
                 "received > 1000000", "--abort-on-fail", "--check-delay", "1",
                 "--report", str(out))  # fmt: skip
    _, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 3, stderr
    report = json.loads(out.read_text())
    assert report["aborted"]["check"] == "received > 1000000"
    assert report["sender"]["send_seconds"] < 60  # both shards stopped long before the end
    assert [s["status"] for s in report["shards"]] == ["ok", "ok"]


@pytest.mark.mosquitto
@pytest.mark.slow
def test_stages_on_workers_split_each_target_and_every_stop_is_counted(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    out = tmp_path / "s.json"
    proc = _load("--broker", mosquitto.url, "--workers", "2", "--stages", "2s:4,2s:4,1s:0",
                 "--speed", "600", "--subscribers", "2", "--root", f"mct-ds-{tmp_path.name}",
                 "--live", "none", "--check", "lost == 0", "--report", str(out))  # fmt: skip
    _, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 0, stderr
    report = json.loads(out.read_text())
    assert [p["matches"] for p in report["parameters"]["merged_from"]] == [2, 2]
    assert report["sender"]["matches_stopped"] == 4
    assert max(row["live_matches"] for row in report["per_second"]) == 4
