"""matchcast load against a real mosquitto: injected loss, duplicates and reordering are counted
exactly; shared groups act as one consumer; the command prints its table and writes a report."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from events import Topics
from matchcast.cli import app
from matchcast.load import (
    LoadOptions,
    LoadRun,
    LoadShape,
    MatchTemplate,
    build_report,
)
from matchcast.logs import configure_logging
from matchcast.testing import Mosquitto
from matchcast.transport.connection import BrokerURL
from matchcast.transport.mqtt import MqttClient
from simulator import resolve_matches
from tests._misbehaving import Misbehaving

pytestmark = pytest.mark.mosquitto

TEMPLATE = MatchTemplate.build(resolve_matches("semifinal")[0])
N = len(TEMPLATE)


def _factory(url: BrokerURL) -> Any:
    return lambda cid, role: MqttClient(url, client_id=cid)


async def test_injected_loss_duplicates_and_reordering_are_counted_exactly(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    skip, repeat, swap = {5, 40, N}, {10, 77}, {20, 60}
    k, m = 4, 2
    shape = LoadShape(matches=k, qos=1, states=False)
    # One publish in flight at a time, so the wrapper's order is the wire order.
    options = LoadOptions(shape=shape, topics=topics, subscribers=m, max_inflight=1, drain_idle_s=1)
    run = LoadRun(
        options,
        [TEMPLATE],
        _factory(mosquitto_url),
        wrap_publisher=lambda p: Misbehaving(p, skip=skip, repeat=repeat, swap=swap),
    )
    await run.run()
    report = build_report(run, {})
    d = report["delivery"]
    assert d["expected"] == k * N * m
    assert d["lost"] == len(skip) * k * m
    assert d["duplicates"] == len(repeat) * k * m
    assert d["reordered"] == len(swap) * k * m
    assert d["max_displacement"] == 1
    assert d["unexpected"] == d["malformed"] == 0
    for consumer in d["consumers"]:
        assert consumer["streams_with_loss"] == k
        assert sorted(next(iter(consumer["lost_seqs_sample"].values()))) == sorted(skip)
    assert report["sender"]["publish_failures"] == 0
    assert report["latency_ms"]["count"] == d["received"]


async def test_a_shared_group_receives_each_event_once_across_its_members(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    shape = LoadShape(matches=3, qos=1)
    options = LoadOptions(shape=shape, topics=topics, subscribers=3, shared_group="g1")
    run = LoadRun(options, [TEMPLATE], _factory(mosquitto_url))
    await run.run()
    d = build_report(run, {})["delivery"]
    glance = run.progress()
    assert glance.matches_started == 3
    assert glance.matches_active == 0
    assert len(d["consumers"]) == 1
    assert d["consumers"][0]["members"] == 3
    assert d["expected"] == d["received"] == d["unique"] == 3 * N
    assert d["lost"] == d["duplicates"] == 0


async def test_a_scheduled_run_reports_offered_rate_and_lateness(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    shape = LoadShape(matches=2, rate=400, qos=0, states=False, ramp_s=0.2)
    options = LoadOptions(shape=shape, topics=topics, subscribers=1)
    run = LoadRun(options, [TEMPLATE], _factory(mosquitto_url))
    await run.run()
    report = build_report(run, {})
    s = report["sender"]
    assert s["events_published"] == 2 * N
    # The offered rate comes from the schedule, not from how fast this machine sent: a
    # factor of two either way is a bug in the schedule, never load.
    assert 200 < s["offered_events_per_s"] < 800
    assert s["lateness_ms"]["count"] == 2 * N
    assert report["delivery"]["lost"] == 0


async def test_duration_replaces_finished_matches_until_time_is_up(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    # Two matches are 212 events; 2,000 events/s for 3 s is 6,000. Even a machine so loaded
    # that the sender keeps a tenth of its rate starts more than two (no race with 0.5 s).
    shape = LoadShape(matches=2, rate=2000, duration_s=3.0, qos=1, states=False)
    options = LoadOptions(shape=shape, topics=topics, subscribers=1)
    run = LoadRun(options, [TEMPLATE], _factory(mosquitto_url))
    await run.run()
    report = build_report(run, {})
    assert report["sender"]["matches_started"] > 2
    assert report["delivery"]["lost"] == 0
    assert report["delivery"]["expected"] == report["sender"]["events_published"]


def test_the_command_prints_the_table_and_writes_report_and_csv(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    out, series = tmp_path / "r.json", tmp_path / "r.csv"
    result = CliRunner().invoke(
        app,
        [
            "load",
            "--broker",
            mosquitto.url,
            "--matches",
            "5",
            "--subscribers",
            "2",
            "--speed",
            "max",
            "--qos",
            "1",
            "--report",
            str(out),
            "--csv",
            str(series),
            "--root",
            f"mctest-load-{tmp_path.name}",
            "--no-progress",
        ],
    )
    configure_logging("console", "DEBUG")  # the command configured it onto the runner's stream
    assert result.exit_code == 0, result.output
    assert "latency ms" in result.output
    report = json.loads(out.read_text())
    assert report["parameters"]["matches"] == 5
    assert report["delivery"]["expected"] == report["delivery"]["received"] == 5 * N * 2
    assert report["delivery"]["lost"] == report["delivery"]["duplicates"] == 0
    assert series.read_text().startswith("t,offered,sent,delivered,")


def test_the_command_refuses_to_run_without_a_broker() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "matchcast", "load", "--no-progress"],
        capture_output=True,
        text=True,
        env={**os.environ, "MATCHCAST_BROKER": ""},
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "needs --broker" in result.stderr


async def test_a_dropped_probe_reconnects_and_the_gap_is_loss(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    """Another client taking over a probe's client id drops it: counted, reconnected, and
    every event is either received or counted lost."""
    shape = LoadShape(matches=2, rate=400, qos=1, states=False, tag="rc01")
    options = LoadOptions(shape=shape, topics=topics, subscribers=1, drain_idle_s=0.5)
    run = LoadRun(options, [TEMPLATE], _factory(mosquitto_url))

    async def intrude() -> None:
        await asyncio.sleep(0.25)
        async with MqttClient(mosquitto_url, client_id="mc-load-rc01-probe-0-0"):
            await asyncio.sleep(0.05)

    await asyncio.gather(run.run(), intrude())
    report = build_report(run, {})
    probes = report["connections"]["probes"]
    assert probes["disconnects"] >= 1
    assert probes["reconnects"] == probes["disconnects"]
    d = report["delivery"]
    assert d["unique"] + d["lost"] == d["expected"] == 2 * N


@pytest.mark.parametrize("client", ["fast", "aiomqtt"])
async def test_qos2_through_either_client_loses_and_repeats_nothing(
    mosquitto_url: BrokerURL, topics: Topics, client: str
) -> None:
    from matchcast.cli.load import make_factory
    from matchcast.transport.clients import ClientKind

    shape = LoadShape(matches=2, qos=2, payload_size=400)
    options = LoadOptions(shape=shape, topics=topics, subscribers=2, max_inflight=50)
    run = LoadRun(options, [TEMPLATE], make_factory(ClientKind(client), mosquitto_url))
    await run.run()
    d = build_report(run, {})["delivery"]
    assert d["expected"] == d["received"] == d["unique"] == 2 * N * 2
    assert d["lost"] == d["duplicates"] == d["reordered"] == 0
