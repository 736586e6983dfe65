"""The command line: the demo, replay and watch, and one clear line for every mistake."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from matchcast.testbroker import Mosquitto
from matchcast.transport.broker import free_port
from tests._cli import matchcast, one_clear_line


def test_demo_plays_the_semifinal_and_prints_the_final_score() -> None:
    result = matchcast("demo", "--speed", "max")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "55'    GOAL  Anthony Gordon (ENG)  0-1" in out
    assert "86'    GOAL  Enzo Fernández (ARG)  1-1" in out
    assert "90+2'  GOAL  Lautaro Martínez (ARG)  2-1" in out
    assert out.strip().splitlines()[-1].startswith("Full time: ARG 2-1 ENG")


def test_replay_without_a_broker_uses_the_embedded_one() -> None:
    result = matchcast(
        "replay", "--speed", "max", "--port", str(free_port()), "--log-format", "json"
    )
    assert result.returncode == 0, result.stderr
    assert "wc2026-sf-arg-eng: ARG 2-1 ENG (191 events, seq 1-191)" in result.stdout
    logs = [json.loads(line) for line in result.stderr.splitlines()]
    assert {"replay.started", "replay.finished", "broker.started"} <= {
        entry["event"] for entry in logs
    }
    goal_lines = [
        entry for entry in logs if entry["event"] == "event.published" and entry["type"] == "goal"
    ]
    assert next((g["seq"], g["match_id"]) for g in goal_lines) == (96, "wc2026-sf-arg-eng")


def test_a_bad_match_file_is_one_line_naming_file_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("match_id: Not A Slug\n")
    result = matchcast("replay", str(bad), "--broker", "mqtt://127.0.0.1:1")
    one_clear_line(
        result,
        2,
        str(bad),
        "match_id (line 1, column 11): String should match pattern",
        "home: Field required",
    )


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["replay", "--speed", "fast"], "--speed must be 'max' or a number from 0.01 to"),
        (["replay", "--speed", "-3"], "--speed must be 'max' or a number from 0.01 to"),
        (["replay", "--from", "ninety"], "--from must be a minute"),
        (["replay", "--broker", "http://x"], "scheme must be mqtt://"),
        (["replay", "--broker", "mqtt://host:notaport"], "port must be a number"),
        (["replay", "--root", "a/#"], "--root"),
        (["replay", "no-such-match"], "not a bundled match"),
    ],
)
def test_bad_arguments_get_one_line_and_exit_2(args: list[str], needle: str) -> None:
    one_clear_line(matchcast(*args), 2, needle)


def test_an_unreachable_broker_is_one_line_and_exit_1() -> None:
    port = free_port()
    result = matchcast(
        "replay", "--broker", f"mqtt://user:secret@127.0.0.1:{port}", "--speed", "max"
    )
    # A password in the arguments is visible in ps: a warning (JSON, off a terminal) says so.
    *warnings, last = result.stderr.strip().splitlines()
    assert [json.loads(w)["event"] for w in warnings] == ["credentials.in_arguments"]
    assert result.returncode == 1
    assert last.startswith("error: ")
    assert f"127.0.0.1:{port}" in last and "cannot connect" in last
    assert "secret" not in result.stderr + result.stdout


def test_the_broker_comes_from_the_environment_too() -> None:
    port = free_port()
    result = matchcast(
        "replay", "--speed", "max", env={"MATCHCAST_BROKER": f"mqtt://127.0.0.1:{port}"}
    )
    one_clear_line(result, 1, f"127.0.0.1:{port}")


def test_schema_prints_the_event_union() -> None:
    result = matchcast("schema")
    assert result.returncode == 0
    schema = json.loads(result.stdout)
    assert schema["discriminator"]["propertyName"] == "type"
    assert set(schema["discriminator"]["mapping"]) >= {
        "kick_off",
        "clock",
        "goal",
        "period_end",
        "full_time",
    }
    state = json.loads(matchcast("schema", "--state").stdout)
    assert state["title"] == "MatchState"


@pytest.mark.mosquitto
def test_watch_and_replay_against_mosquitto(mosquitto: Mosquitto, client_kind: str) -> None:
    root = f"cli{time.monotonic_ns()}"
    watch = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "matchcast",
            "watch",
            "--broker",
            mosquitto.url,
            "--root",
            root,
            "--match",
            "wc2026-sf-arg-eng",
            "--exit-at-full-time",
            "--client",
            client_kind,
            "--log-format",
            "json",
            "-v",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # wait until the watcher has subscribed (it logs consumer.started)
        assert watch.stderr is not None
        for line in watch.stderr:
            if "consumer.started" in line:
                break
        replay = matchcast("replay", "--broker", mosquitto.url, "--root", root, "--speed", "max")
        assert replay.returncode == 0, replay.stderr
        out, _ = watch.communicate(timeout=30)
    finally:
        watch.kill()
    assert watch.returncode == 0
    assert "90+2'  GOAL  Lautaro Martínez (ARG)  2-1" in out
    assert "FULL TIME  ARG 2-1 ENG" in out


def _running_replay(mosquitto: Mosquitto, root: str, replayer_id: str) -> subprocess.Popen[str]:
    """A real-time replay in its own process, returned once its kickoff is published."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "matchcast",
            "replay",
            "--broker",
            mosquitto.url,
            "--root",
            root,
            "--speed",
            "1",
            "--replayer",
            replayer_id,
            "--log-format",
            "json",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        if "event.published" in line:  # the kickoff is out
            break
    return proc


def _status(mosquitto: Mosquitto, root: str, replayer_id: str, wait_s: int = 5) -> str:
    """The replayer's retained status ("gone" when none is retained)."""
    out = subprocess.run(
        [
            "mosquitto_sub",
            "-h",
            "127.0.0.1",
            "-p",
            str(mosquitto.port),
            "-t",
            f"{root}/replayers/{replayer_id}/status",
            "-C",
            "1",
            "-W",
            str(wait_s),
        ],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    ).stdout
    return str(json.loads(out)["status"]) if out.strip() else "gone"


@pytest.mark.mosquitto
def test_ctrl_c_stops_a_replay_cleanly_and_removes_its_status(mosquitto: Mosquitto) -> None:
    import signal

    root = f"int{time.monotonic_ns()}"
    proc = _running_replay(mosquitto, root, "ctrlc")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130
    assert "Traceback" not in err
    assert '"replay.interrupted"' in err
    assert _status(mosquitto, root, "ctrlc", wait_s=1) == "gone"


@pytest.mark.mosquitto
def test_a_killed_replayer_is_reported_offline_by_its_last_will(mosquitto: Mosquitto) -> None:
    root = f"will{time.monotonic_ns()}"
    proc = _running_replay(mosquitto, root, "doomed")
    assert _status(mosquitto, root, "doomed") == "online"
    proc.kill()  # no DISCONNECT: the broker publishes the will
    proc.wait(10)
    assert proc.stderr is not None
    proc.stderr.close()
    assert _status(mosquitto, root, "doomed") == "offline"
