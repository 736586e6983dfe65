"""``matchcast load`` as CI uses it: --check thresholds and their exit codes, a run that
delivered nothing, Ctrl-C that keeps what was measured, and --chart checked up front."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from events import Topics
from matchcast.app.retained import find_retained
from matchcast.load import CheckError, evaluate_checks, parse_check, render_table
from matchcast.load import failures as _failures
from matchcast.testing import Mosquitto
from matchcast.transport.connection import BrokerURL
from tests._cli import run_cli
from tests._factories import SEMIFINAL_EVENTS, SEMIFINAL_LEAN_EVENTS

N = SEMIFINAL_EVENTS  # events of one semi-final


def _load(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "matchcast", "load", "--no-progress", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "MATCHCAST_BROKER": "", **(env or {})},
        timeout=120,
        check=False,
    )


def _report(**delivery: int) -> dict[str, Any]:
    d = {"expected": 10, "received": 10, "unique": 10, "lost": 0, "duplicates": 0}
    d.update(delivery)
    return {
        "parameters": {"subscribers": 1, "matches": 1, "qos": 0},
        "sender": {"publish_failures": 0, "overruns": 0, "achieved_events_per_s": 900.0},
        "delivery": {**d, "reordered": 0, "delivered_events_per_s": 1200.0, "consumers": [{}]},
        "latency_ms": {"p50": 2.0, "p90": 5.0, "p99": 40.0, "p99_9": 60.0, "max": 70.0},
    }


@pytest.mark.parametrize(
    ("text", "passes"),
    [
        ("p99 < 50ms", True),
        ("p99<30", False),
        ("p99.9 <= 0.06s", True),
        ("max < 70000us", False),
        ("lost == 0", True),
        ("duplicates != 0", False),
        ("delivered_rate >= 1.2k", True),
        ("delivered_rate > 1200/s", False),
    ],
)
def test_a_check_reads_figure_operator_and_unit(text: str, passes: bool) -> None:
    [result] = evaluate_checks([parse_check(text)], _report())
    assert result["passed"] is passes


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("p98 < 50", "unknown figure 'p98'"),
        ("p99 < 50 parsecs", "in ms, s or us"),
        ("lost == 0ms", "takes no unit"),
        ("p99 is small", "FIGURE OP VALUE"),
    ],
)
def test_a_bad_check_is_refused_naming_what_is_accepted(text: str, needle: str) -> None:
    with pytest.raises(CheckError, match=needle):
        parse_check(text)


def test_nothing_delivered_or_everything_lost_fails_without_any_check() -> None:
    assert _failures(_report()) == []
    assert "nothing was delivered" in _failures(_report(received=0, unique=0, lost=10))[0]
    nothing = _report(expected=0, received=0, unique=0)
    assert "nothing was delivered" in _failures(nothing)[0]
    senders_only = _report(received=0, unique=0, lost=10)
    senders_only["parameters"]["subscribers"] = 0
    senders_only["delivery"]["consumers"] = []
    assert _failures(senders_only) == []  # a shard that only sends has nobody to deliver to


def test_the_table_names_the_checks_the_run_and_that_delivered_is_summed() -> None:
    report = _report()
    report["checks"] = evaluate_checks([parse_check("p99 < 30ms")], report)
    report["parameters"].update(speed="max", publishers=1, client="fast", duration_s=5.0)
    report["sender"].update(
        events_published=1, states_published=0, offered_events_per_s=1.0, send_seconds=4.2,
        overrun_threshold_ms=10.0,
        scheduled=False,
    )  # fmt: skip
    report["delivery"].update(max_displacement=0)
    health = {
        "connected": 1, "connect_failures": 0, "disconnects": 0, "reconnects": 0,
        "connect_ms": {"median": 1.0},
    }  # fmt: skip
    report["connections"] = {"publishers": health, "probes": health}
    console = Console(width=200, record=True)
    console.print(render_table(report))
    text = console.export_text()
    assert "check p99 < 30ms  (actual 40)" in text
    assert "FAILED" in text
    assert "4.2 s sending; speed max, duration 5 s" in text
    assert "summed over subscribers" in text


def test_a_bad_check_exits_2_before_anything_runs() -> None:
    result = _load("--spawn-mosquitto", "--check", "p98 < 50")
    assert result.returncode == 2
    assert result.stderr.startswith("error: --check 'p98 < 50': unknown figure")


def test_chart_without_matplotlib_fails_before_the_run(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\n"
        "class _No:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'matplotlib':\n"
        "            raise ModuleNotFoundError(name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, _No())\n"
    )
    path = os.pathsep.join([str(blocker), os.environ.get("PYTHONPATH", "")])
    # A broker nobody listens on: had the run started, it would fail on connecting instead.
    result = _load("--broker", "mqtt://127.0.0.1:9", "--chart", str(tmp_path / "c.png"),
                   env={"PYTHONPATH": path})  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: --chart needs matplotlib"), result.stderr


@pytest.mark.mosquitto
@pytest.mark.slow
def test_a_failed_check_exits_3_and_the_report_holds_every_result(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    out = tmp_path / "r.json"
    result = _load("--broker", mosquitto.url, "--matches", "2", "--speed", "max", "--root", f"mct-{tmp_path.name}",
                   "--check", "lost == 0", "--check", "p50 < 0.001us", "--report", str(out))  # fmt: skip
    assert result.returncode == 3, result.stderr
    assert "failed: --check p50 < 0.001us" in result.stderr
    checks = json.loads(out.read_text())["checks"]
    assert [(c["check"], c["passed"]) for c in checks] == [
        ("lost == 0", True),
        ("p50 < 0.001us", False),
    ]
    passing = _load("--broker", mosquitto.url, "--matches", "2", "--speed", "max", "--root", f"mct2-{tmp_path.name}",
                    "--check", "lost == 0", "--check", f"received == {2 * N}")  # fmt: skip
    assert passing.returncode == 0, passing.stderr


@pytest.mark.mosquitto
@pytest.mark.slow
def test_ctrl_c_prints_and_writes_what_was_measured_marked_interrupted(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    out, series = tmp_path / "r.json", tmp_path / "r.csv"
    args = ["--broker", mosquitto.url, "--matches", "2", "--speed", "60", "--root",
            f"mct-{tmp_path.name}", "--report", str(out), "--csv", str(series)]  # fmt: skip
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "matchcast",
            "load",
            "--no-progress",
            "--log-format",
            "json",
            "-v",
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "MATCHCAST_BROKER": ""},
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:  # wait until it sends: a semi-final at 60x takes 100 s
            if '"load.started"' in line:
                break
        proc.send_signal(signal.SIGINT)
        stdout, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130
    assert "INTERRUPTED" in stdout
    report = json.loads(out.read_text())
    assert report["interrupted"] is True
    assert report["sender"]["events_published"] > 0
    assert report["sender"]["matches_completed"] == 0
    assert series.read_text().startswith("t,offered,sent,delivered,")


def test_a_half_second_run_charts_the_rate_the_table_gives() -> None:
    """One bin of 1,000 events in 0.5 s is 2,000 events/s, as the table says, not 1,000."""
    from matchcast.load import rates

    report = _report(received=900)
    report["sender"]["send_seconds"] = 0.5
    report["delivery"]["delivered_events_per_s"] = 1500.0  # 900 received over 0.6 s
    report["per_second"] = [{"t": 0, "offered": 1000, "sent": 1000, "delivered": 900}]
    series = rates(report)
    assert series["sent"].values == [2000.0]
    assert series["sent"].edges == [0.0, 0.5]
    assert series["delivered"].values == pytest.approx([1500.0])
    longer = [{"t": t, "offered": 10, "sent": 10, "delivered": 10} for t in range(3)]
    report["per_second"] = longer
    report["sender"]["send_seconds"] = 2.25
    assert rates(report)["sent"].values == [10.0, 10.0, 40.0]


def test_the_chart_draws_an_interrupted_short_run(tmp_path: Path) -> None:
    from matchcast.load import write_chart  # matplotlib comes with the dev extra

    report = _report()
    report["sender"]["send_seconds"] = 0.5
    report["per_second"] = [
        {"t": 0, "offered": 5, "sent": 5, "delivered": 5, "latency_p50": 1.0, "latency_p99": 2.0,
         "latency_max": 3.0}
    ]  # fmt: skip
    report["interrupted"] = True
    write_chart(report, tmp_path / "c.png")
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.mosquitto
@pytest.mark.slow
async def test_ctrl_c_with_workers_merges_what_each_measured(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    """Ctrl-C at a terminal reaches every process of the group: the workers report what they
    measured, and the merged report is written, marked interrupted."""
    import asyncio

    from matchcast.transport.connection import BrokerURL
    from matchcast.transport.mqtt import MqttClient

    out, root = tmp_path / "w.json", f"mct-w-{tmp_path.name}"
    args = ["--broker", mosquitto.url, "--workers", "2", "--matches", "2", "--speed", "60",
            "--root", root, "--report", str(out)]  # fmt: skip
    async with MqttClient(BrokerURL.parse(mosquitto.url), client_id=f"t-{root}") as watcher:
        await watcher.subscribe(f"{root}/matches/+/events", qos=0)
        proc = await asyncio.create_subprocess_exec(
            *[sys.executable, "-m", "matchcast", "load", "--no-progress", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group, as a terminal's foreground job
            env={**os.environ, "MATCHCAST_BROKER": ""},
        )
        try:
            async with asyncio.timeout(60):  # until the workers send
                async for _message in watcher.messages():
                    break
            os.killpg(proc.pid, signal.SIGINT)
            async with asyncio.timeout(60):
                out_b, err_b = await proc.communicate()
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    stdout, stderr = out_b.decode(), err_b.decode()
    assert proc.returncode == 130, stderr
    assert "INTERRUPTED" in stdout
    report = json.loads(out.read_text())
    assert report["interrupted"] is True
    assert report["sender"]["events_published"] > 0


def test_a_merged_report_describes_the_shards_run() -> None:
    from matchcast.load._report import _describe_run

    shard = {"speed": "max", "publishers": 1, "client": "fast", "duration_s": None}
    merged = {"merged_from": [shard, shard], "matches": 4, "subscribers": 2, "qos": 1}
    text = _describe_run(merged, {"send_seconds": 3.5})
    assert text == "3.5 s sending; speed max, 1 publisher(s), client fast; 2 shards merged"


@pytest.mark.mosquitto
def test_load_clears_its_retained_states_at_the_end_unless_keep(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    """Four runs left 110 retained states behind; now each clears its own (not others')."""
    url, topics = BrokerURL.parse(mosquitto.url), Topics(f"mct-{tmp_path.name}")

    def states() -> list[str]:
        found = asyncio.run(find_retained(url, topics))
        return sorted(t.match_id or "" for t in found if t.kind == "state")

    kept = _load("--broker", mosquitto.url, "--matches", "2", "--speed", "max", "--root", topics.root,
                 "--tag", "keep", "--keep")  # fmt: skip
    assert kept.returncode == 0, kept.stderr
    assert len(states()) == 2
    cleared = _load("--broker", mosquitto.url, "--matches", "3", "--speed", "max", "--root", topics.root,
                    "--tag", "gone")  # fmt: skip
    assert cleared.returncode == 0, cleared.stderr
    assert "cleared 3 retained topic(s) of this run" in cleared.stderr
    assert all("-keep-" in m for m in states())
    assert len(states()) == 2


@pytest.mark.parametrize("ramp", ["inf", "1e309", "nan", "86401"])
def test_a_ramp_that_is_not_finite_or_past_a_day_is_refused(ramp: str) -> None:
    """``load --ramp inf`` once ended the run with an IndexError traceback."""
    from tests._cli import run_cli

    result = run_cli("load", "--ramp", ramp, "--broker", "mqtt://127.0.0.1:1")
    assert result.code == 2
    assert "--ramp" in result.stderr


@pytest.mark.mosquitto
@pytest.mark.parametrize(
    ("feed", "events"), [("full", SEMIFINAL_EVENTS), ("lean", SEMIFINAL_LEAN_EVENTS)]
)
def test_load_plays_the_feed_asked_for_and_its_report_says_which(
    mosquitto: Mosquitto, tmp_path: Path, feed: str, events: int
) -> None:
    """--feed full (the default) sends every event of wire 1.4, lean those of 1.3; the report
    names the feed, so two runs are compared knowing what each carried."""
    out = tmp_path / "r.json"
    result = run_cli("load", "--broker", mosquitto.url, "--matches", "1", "--speed", "max",
                     "--feed", feed, "--root", f"mcf-{tmp_path.name}", "--live", "none",
                     "--report", str(out))  # fmt: skip
    assert result.code == 0, result.stderr
    report = json.loads(out.read_text())
    assert report["parameters"]["feed"] == feed
    assert report["sender"]["events_published"] == events
    wide = Console(width=300, record=True)
    wide.print(render_table(report))
    assert f"{feed} feed" in wide.export_text()
