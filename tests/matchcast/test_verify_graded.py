"""matchcast verify grades real consumers through mosquitto: docs/chaos.md's naive score keeper
fails exactly where counting goals goes wrong, the fixed one passes everything; a consumer that
never reports fails saying so; the command takes a broker list and writes JUnit and JSON."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from events import Topics
from matchcast.transport.broker import free_port
from matchcast.transport.connection import BrokerURL
from matchcast.transport.fastmqtt import FastClient
from matchcast.verify import Verdict, VerifyOptions, run_verify
from tests._cli import run_cli

sys.path.insert(0, str(Path(__file__).parents[2] / "examples" / "chaos"))
from fixed import FixedScore
from naive import NaiveScore

pytestmark = pytest.mark.mosquitto

#: Where counting goals goes wrong, and the fault verify names for it (a chaos fault's kind,
#: or ``step`` for what the scenario did: start mid-match, seek, send a goal again).
NAIVE_FAILS = {
    "duplicates": "duplicate",
    "gap": "drop",
    "late-join": "step",
    "restart": "restart",
    "goal-ruled-out": "correction",
    "seek-back": "step",
    "straggler": "step",
}


class Keeper(Protocol):
    def feed(self, topic: str, payload: bytes) -> None: ...

    def scores(self) -> dict[str, dict[str, int]]: ...


async def _report(keeper: Keeper, url: BrokerURL, topics: Topics, consumer_id: str,
                  ready: asyncio.Event) -> None:  # fmt: skip
    """The reporter docs/verify.md asks of a consumer, around a score keeper of docs/chaos.md:
    its score of each match and ``finished`` once a full time came, published retained after
    every change."""
    finished: set[str] = set()
    said: dict[str, dict[str, Any]] = {}
    async with FastClient(url) as conn:
        await conn.subscribe(topics.events(), qos=1)
        await conn.subscribe(topics.state(), qos=1)
        ready.set()
        async for message in conn.messages():
            if not message.payload:
                continue  # a retained state cleared
            keeper.feed(message.topic, message.payload)
            body = json.loads(message.payload)
            match_id = body["match_id"]
            if body.get("type") == "full_time":
                finished.add(match_id)
            score = keeper.scores().get(match_id)
            if score is None:
                continue
            report = {"score": score, "status": "finished" if match_id in finished else "live"}
            if said.get(match_id) != report:
                said[match_id] = report
                topic = topics.consumer_state(consumer_id, match_id)
                await conn.publish(topic, json.dumps(report).encode(), qos=1, retain=True)


@contextlib.asynccontextmanager
async def _consumer(keeper: Keeper, url: BrokerURL, topics: Topics, consumer_id: str
                    ) -> AsyncIterator[None]:  # fmt: skip
    ready = asyncio.Event()
    task = asyncio.ensure_future(_report(keeper, url, topics, consumer_id, ready))
    try:
        async with asyncio.timeout(10):
            await ready.wait()
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _grade(keeper: Keeper, url: BrokerURL, topics: Topics, name: str) -> Verdict:
    async with _consumer(keeper, url, topics, name), FastClient(url) as conn:
        return await run_verify(conn, VerifyOptions(name, topics, speed=None))


def _kind(cause: dict[str, Any] | None) -> str | None:
    return None if cause is None else "step" if "step" in cause else cause["fault"]


async def test_the_naive_keeper_fails_exactly_where_counting_goals_goes_wrong(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    verdict = await _grade(NaiveScore(), mosquitto_url, topics, "naive")
    failed = {r.scenario.name: r for r in verdict.results if not r.passed}
    assert set(failed) == set(NAIVE_FAILS), {n: r.reason for n, r in failed.items()}
    assert not verdict.ok
    for name, result in failed.items():
        assert result.divergence is not None and result.divergence.field == "score", name
        assert _kind(result.cause) == NAIVE_FAILS[name], (name, result.cause)
        assert result.reason.startswith(("score: expected ", "score: ended ")), result.reason
        if result.reason.startswith("score: ended "):  # how it ended, then where it parted
            assert "; first parted expected " in result.reason, result.reason
    gap = failed["gap"]
    assert gap.divergence is not None and gap.cause is not None
    assert (gap.divergence.how, gap.divergence.seq) == ("missed", gap.cause["seq"]), (
        "the lost goal is where they part"
    )


async def test_the_fixed_keeper_passes_every_scenario(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    verdict = await _grade(FixedScore(), mosquitto_url, topics, "fixed")
    assert [r.reason for r in verdict.results if not r.passed] == []
    assert verdict.ok
    assert all(r.reports for r in verdict.results)


class Mirror:
    """Not a consumer of the events: the score of the last snapshot that came, whatever it is."""

    def __init__(self) -> None:
        self.score: dict[str, dict[str, int]] = {}

    def feed(self, topic: str, payload: bytes) -> None:
        if topic.endswith("/state"):
            state = json.loads(payload)
            self.score[state["match_id"]] = state["score"]

    def scores(self) -> dict[str, dict[str, int]]:
        return self.score


async def test_a_consumer_that_only_mirrors_the_snapshots_fails_on_a_stale_one_at_the_end(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    options = VerifyOptions(
        "mirror", topics, scenarios=("clean", "stale-snapshot", "straggler"), speed=None
    )
    async with _consumer(Mirror(), mosquitto_url, topics, "mirror"), FastClient(mosquitto_url) as c:
        verdict = await run_verify(c, options)
    failed = {r.scenario.name: r for r in verdict.results if not r.passed}
    assert set(failed) == {"straggler"}, {n: r.reason for n, r in failed.items()}
    assert _kind(failed["straggler"].cause) == "step"


async def test_a_consumer_that_never_reports_fails_saying_so_without_waiting_twice(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    options = VerifyOptions(
        "nobody", topics, scenarios=("clean", "gap", "straggler"), speed=None, timeout_s=0.3
    )
    async with FastClient(mosquitto_url) as conn:
        verdict = await run_verify(conn, options)
    first, *rest = verdict.results
    assert not first.passed and first.played is not None
    assert first.reason.startswith(
        f"no report on {topics.root}/consumers/nobody/state/verify-clean within 0.3 s"
    )
    assert [r.played for r in rest] == [None, None]
    assert all(r.reason.startswith("not played: consumer 'nobody' sent no report") for r in rest)


async def test_the_command_takes_a_broker_list_and_writes_junit_and_json(
    mosquitto_url: BrokerURL, topics: Topics, tmp_path: Path
) -> None:
    """The first node of the list is down: verify uses the next; exit 3 for a failure."""
    brokers = f"mqtt://127.0.0.1:{free_port()},{mosquitto_url}"
    junit, report = tmp_path / "verify.xml", tmp_path / "verify.json"
    async with _consumer(NaiveScore(), mosquitto_url, topics, "naive"):
        result = await asyncio.to_thread(
            run_cli, "verify", "--consumer", "naive", "--broker", brokers, "--root", topics.root,
            "--speed", "max", "--scenario", "clean", "--scenario", "straggler",
            "--junit", str(junit), "--report", str(report),
        )  # fmt: skip
    assert result.code == 3, result.stdout + result.stderr
    assert "1/2 scenarios passed" in result.stdout
    assert "FAIL" in result.stdout and "straggler" in result.stdout
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    assert set(cases) == {"clean", "straggler"}
    assert cases["clean"].find("failure") is None
    assert cases["straggler"].find("failure") is not None
    data = json.loads(report.read_text())
    assert [s["passed"] for s in data["scenarios"]] == [True, False]
    assert data["scenarios"][1]["divergence"]["reported"] == {"NED": 4, "JPN": 2}


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--scenario", "nope", "--consumer", "x"], "--scenario: no scenario named 'nope'"),
        ([], "matchcast verify needs --consumer ID"),
        (["--consumer", "a/b"], "--consumer 'a/b' must be a consumer id, without / + #"),
        (["--consumer", "x", "--speed", "fast"], "--speed must be 'max' or a number"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], needle: str) -> None:
    result = run_cli("verify", *args)
    assert result.code == 2
    assert needle in result.stderr, result.stderr


def test_list_names_each_scenario_with_its_description() -> None:
    result = run_cli("verify", "--list")
    assert result.code == 0
    lines = result.stdout.splitlines()
    assert len(lines) == 11
    assert lines[0].split()[0] == "clean"
    assert any(line.startswith("straggler ") for line in lines)
