"""--verify-state catches a consumer that lost a goal; the runner's metrics are exposed."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

from consumers import Runner, Subscriber
from events import BaseEvent, Event, Goal, MatchState, Message, Topics, decode_state, encode_state
from matchcast.load import (
    LoadOptions,
    LoadRun,
    LoadShape,
    MatchTemplate,
    RunnerMetrics,
    StateReporter,
    build_report,
    collect_reported_states,
    run_consumer,
    verify_states,
)
from matchcast.testing import Mosquitto
from matchcast.transport.broker import free_port
from matchcast.transport.connection import BrokerURL
from matchcast.transport.mqtt import MqttClient
from simulator import expand, resolve_matches

SEMI = resolve_matches("semifinal")[0]
TEMPLATE = MatchTemplate.build(SEMI)


def test_verify_flags_wrong_score_missing_goal_and_missing_match() -> None:
    truth = {m: TEMPLATE.final_state(m) for m in ("a", "b", "c")}
    bad = truth["b"].model_copy(update={"goals": truth["b"].goals[1:]})
    report = verify_states({"good": truth, "bad": {"a": truth["a"], "b": bad}}, truth)
    assert not report["ok"]
    by_name = {c["consumer"]: c for c in report["consumers"]}
    assert by_name["good"]["right"] == 3
    assert (by_name["bad"]["right"], by_name["bad"]["wrong"], by_name["bad"]["missing"]) == (
        1,
        1,
        1,
    )
    [wrong] = by_name["bad"]["wrong_sample"]
    assert wrong["match_id"] == "b"
    assert wrong["missing_goals"] == [truth["b"].goals[0].goal_id]
    assert verify_states({"good": truth}, truth)["ok"]
    assert not verify_states({}, truth)["ok"], "no consumer reporting is not a pass"


def _goal_dropper(reporter: StateReporter) -> Subscriber:
    """A faulty consumer: it loses the first goal of every match."""
    sub = Subscriber("drops-a-goal")
    dropped: set[str] = set()

    @sub.on(BaseEvent)
    async def handle(event: Event, _state: MatchState) -> None:
        if isinstance(event, Goal) and event.match_id not in dropped:
            dropped.add(event.match_id)
            return
        await reporter.handle(event)

    return sub


@pytest.mark.mosquitto
async def test_verify_state_catches_the_consumer_that_dropped_a_goal(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    k = 3
    async with MqttClient(mosquitto_url) as good_conn, MqttClient(mosquitto_url) as bad_conn:
        metrics = RunnerMetrics()
        good_ready = asyncio.Event()
        good = asyncio.ensure_future(
            run_consumer(good_conn, topics, "good", metrics=metrics, ready=good_ready)
        )
        bad_runner = Runner([_goal_dropper(StateReporter(bad_conn, topics, "bad"))], topics=topics)
        bad = asyncio.ensure_future(bad_runner.run(bad_conn))
        await good_ready.wait()
        await bad_runner.subscribed.wait()
        options = LoadOptions(
            shape=LoadShape(matches=k, qos=1, states=True),
            topics=topics,
            subscribers=1,
            verify_state=True,
            expect_consumers=("good", "bad"),
        )
        run = LoadRun(
            options, [TEMPLATE], lambda cid, role: MqttClient(mosquitto_url, client_id=cid)
        )
        await run.run()
        good.cancel()
        bad_runner.stop()
        await bad
        summary: dict[str, Any] | None = None
        with pytest.raises(asyncio.CancelledError):
            summary = await good
        assert summary is None
    report = build_report(run, {})
    v = report["verification"]
    assert v is not None
    assert not v["ok"]
    by_name = {c["consumer"]: c for c in v["consumers"]}
    assert by_name["good"] == {**by_name["good"], "right": k, "wrong": 0, "missing": 0}
    assert by_name["bad"]["wrong"] == k
    assert all(w["missing_goals"] for w in by_name["bad"]["wrong_sample"])
    text = generate_latest(metrics.registry).decode()
    assert 'matchcast_consumer_events_handled_total{subscriber="state-reporter-good"} ' in text
    assert "matchcast_consumer_handler_seconds_bucket" in text
    assert "matchcast_consumer_lag_seconds_count" in text
    assert "matchcast_consumer_runner_handled_total" in text
    assert "matchcast_consumer_queue_depth" in text
    assert metrics.summary()["handled"] >= k * len(TEMPLATE)


async def test_metrics_are_served_over_http_to_the_names_it_is_bound_to() -> None:
    """load-consumer's /metrics has the guard of every matchcast HTTP server: a foreign Host
    (DNS rebinding) gets 403."""
    metrics = RunnerMetrics()
    metrics.watch(Runner([]))
    port = free_port()
    server = await metrics.serve(port)
    try:
        url = f"http://127.0.0.1:{port}/metrics"

        def get(host: str) -> tuple[int, str]:
            request = urllib.request.Request(url, headers={"Host": host})
            try:
                with urllib.request.urlopen(request, timeout=5) as resp:
                    return resp.status, resp.read().decode()
            except urllib.error.HTTPError as err:
                return err.code, ""

        status, body = await asyncio.to_thread(get, f"127.0.0.1:{port}")
        assert status == 200 and "matchcast_consumer_queue_depth 0.0" in body
        assert (await asyncio.to_thread(get, f"rebind.attacker.example:{port}"))[0] == 403
    finally:
        await server.cleanup()


@pytest.mark.mosquitto
def test_consume_and_load_verify_state_from_the_command_line(
    mosquitto: Mosquitto, tmp_path: Path
) -> None:
    """`matchcast load-consumer` reports its states and serves metrics; `load --verify-state` passes."""
    root = f"mctest-consume-{tmp_path.name}"
    port = free_port()
    env = {**os.environ, "MATCHCAST_BROKER": mosquitto.url}
    consumer = subprocess.Popen(
        [sys.executable, "-m", "matchcast", "load-consumer", "--consumer-id", "c1", "--root", root,
         "--idle-exit", "3", "--metrics-port", str(port), "--log-format", "json"],
        stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert consumer.stderr is not None
        for line in consumer.stderr:
            if "consumer.started" in line:
                break
        out = tmp_path / "r.json"
        load = subprocess.run(
            [sys.executable, "-m", "matchcast", "load", "--matches", "2", "--speed", "max", "--qos", "1",
             "--root", root, "--verify-state", "--expect-consumer", "c1", "--no-progress",
             "--report", str(out)],
            capture_output=True, text=True, env=env, timeout=120, check=False,
        )  # fmt: skip
        assert load.returncode == 0, load.stdout + load.stderr
        assert "verify-state" in load.stdout
        v = json.loads(out.read_text())["verification"]
        assert v["ok"]
        assert v["consumers"][0]["right"] == 2
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
        assert b'matchcast_consumer_events_handled_total{subscriber="state-reporter-c1"}' in body
        rest = consumer.communicate(timeout=30)[1]
        assert consumer.returncode == 0
        assert "consumer.finished" in rest
        assert '"handler_ms"' in rest
    finally:
        consumer.kill()
        consumer.wait()


@pytest.mark.mosquitto
async def test_a_shared_group_of_fast_consumers_takes_batches_and_receives_each_event_once(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    """Two runners on fast clients in one `$share` group: batches through SharedBatchSource,
    every event received by exactly one member. mosquitto spreads a match's events over the
    members, so each member's runner sees gaps in every match (what docs/load.md warns of)."""
    from matchcast.load import SharedSource
    from matchcast.transport.fastmqtt import FastClient

    k = 3
    async with FastClient(mosquitto_url) as a, FastClient(mosquitto_url) as b:
        assert type(SharedSource.over(a, "grp")).__name__ == "SharedBatchSource"
        ready = [asyncio.Event(), asyncio.Event()]
        members = [
            asyncio.ensure_future(
                run_consumer(
                    conn,
                    topics,
                    f"m{i}",
                    shared_group="grp",
                    report_state=False,
                    idle_exit_s=1.0,
                    ready=ready[i],
                )
            )
            for i, conn in enumerate((a, b))
        ]
        for r in ready:
            await r.wait()
        options = LoadOptions(
            shape=LoadShape(matches=k, qos=1, states=False), topics=topics, subscribers=1
        )
        await LoadRun(
            options, [TEMPLATE], lambda cid, role: FastClient(mosquitto_url, client_id=cid)
        ).run()
        async with asyncio.timeout(30):
            summaries = await asyncio.gather(*members)
    assert sum(s["received"] for s in summaries) == k * len(TEMPLATE)
    assert all(s["received"] > 0 for s in summaries)  # the group split the work
    assert sum(s["duplicates"] + s["rejected"] for s in summaries) == 0
    assert all(s["gaps"] > 0 for s in summaries)


class _Publisher:
    """Keeps each report; a publish takes one turn of the loop, as a broker's round trip."""

    def __init__(self) -> None:
        self.reports: list[MatchState] = []

    async def publish(
        self, topic: str, payload: bytes, *, qos: int = 1, retain: bool = False, props: Any = None
    ) -> None:
        assert retain and qos == 1
        await asyncio.sleep(0)
        self.reports.append(decode_state(payload, topic=topic))


async def test_the_reporter_reports_after_every_change_not_only_at_full_time() -> None:
    """What `matchcast verify` waits for: a report per change (a repeat changes nothing),
    and the last report of a match is its last state, even sent while reports are in flight."""
    pub = _Publisher()
    reporter = StateReporter(pub, Topics("t"), "c1")
    events = [s.event for s in expand(SEMI)]
    for event in events[:5]:
        await reporter.handle(event)
        await reporter.flush()
    assert [r.last_seq for r in pub.reports] == [1, 2, 3, 4, 5]
    await reporter.handle(events[2])  # a repeat
    await reporter.flush()
    assert len(pub.reports) == 5
    for event in events[5:]:  # no waiting: changes made while a report is out go together
        await reporter.handle(event)
    await reporter.flush()
    assert 5 < len(pub.reports) < len(events)
    assert pub.reports[-1].last_seq == events[-1].seq
    assert pub.reports[-1].status == "finished"


async def test_load_verify_state_waits_for_a_report_that_says_the_match_is_over() -> None:
    """A consumer reports after every change: a live report is not its final word."""
    topics = Topics("t")
    final = TEMPLATE.final_state("m1")
    live = final.model_copy(update={"status": "live", "score": {}})

    class Source:
        async def subscribe(self, topic_filter: str, *, qos: int = 1) -> None:
            pass

        async def messages(self) -> AsyncIterator[Message]:
            topic = topics.consumer_state("c1", "m1")
            yield Message(topic, encode_state(live))
            await asyncio.sleep(0.05)
            yield Message(topic, encode_state(final))
            await asyncio.Event().wait()

    got = await collect_reported_states(Source(), topics, ["m1"], consumers=["c1"], timeout_s=5)
    assert got["c1"]["m1"].status == "finished"
