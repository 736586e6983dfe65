"""``load`` over a broker list: connections round-robin per node, figures per node, and a run
whose probes received nothing never exits 0."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from matchcast.cli.load import nothing_delivered
from matchcast.testbroker import Mosquitto, mosquitto_binary


@pytest.fixture
def two_mosquittos() -> Iterator[tuple[Mosquitto, Mosquitto]]:
    binary = mosquitto_binary()
    if binary is None:
        pytest.fail("mosquitto is required but not installed")
    a, b = Mosquitto(binary).start(), Mosquitto(binary).start()
    yield a, b
    a.stop()
    b.stop()


def _load(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "matchcast", "load", *args],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "MATCHCAST_BROKER"},
        timeout=120,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.mosquitto
def test_load_spreads_its_connections_over_two_brokers_and_counts_them(
    two_mosquittos: tuple[Mosquitto, Mosquitto], tmp_path: Path
) -> None:
    a, b = two_mosquittos
    out = tmp_path / "r.json"
    # Each probe subscribes on its own node and the publishers publish on theirs: with a
    # publisher and a probe per node, the two brokers (not a cluster) each see half.
    r = _load(
        *("--broker", f"{a.url},{b.url}", "--client", "aiomqtt"),
        *("--matches", "2", "--publishers", "2", "--subscribers", "2", "--qos", "1"),
        *("--speed", "max", "--root", f"mctest-nodes-{tmp_path.name}", "--no-progress"),
        *("--report", str(out)),
    )
    report = json.loads(out.read_text())
    assert report["nodes"] == {a.url: {"pub": 1, "probe": 1}, b.url: {"pub": 1, "probe": 1}}
    assert report["parameters"]["broker"] == f"{a.url},{b.url}"
    assert r.returncode == 0, r.stderr


def test_a_run_whose_probes_got_nothing_fails_and_names_share() -> None:
    result = {"delivery": {"expected": 530, "received": 0}, "parameters": {"shared_group": "g"}}
    reason = nothing_delivered(result)
    assert reason is not None
    assert "530" in reason
    assert "$share/g/" in reason
    assert nothing_delivered({"delivery": {"expected": 530, "received": 1}}) is None
    assert nothing_delivered({"delivery": {"expected": 0, "received": 0}}) is None
    assert nothing_delivered({}) is None  # an old or send-only report
