"""Chaos through a real broker: same seed, same stream; matchcast's own consumers end right."""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from rich.console import Console
from structlog.testing import capture_logs

from consumers import Runner, Scoreboard, Subscriber
from consumers.terminal import TerminalView
from events import BaseEvent, MatchClock, MatchState, Topics
from matchcast.app import run_replay, run_watch
from matchcast.cli.chaos import read_truth, write_chaos_log, write_truth
from matchcast.testbroker import FaultProxy, Mosquitto
from matchcast.transport.connection import BrokerURL
from matchcast.web._bridge import bridge
from matchcast.web._hub import Hub
from simulator import ChaosSpec, ReplayOptions, ReplayReport, resolve_matches

SEMI = resolve_matches("semifinal")[0]
WALL_FIELDS = ("emitted_at", "scheduled_at")


async def _listen(
    url: BrokerURL,
    topics: Topics,
    ready: asyncio.Event,
    out: list[tuple[str, dict[str, Any], bool]],
) -> None:
    """An independent subscriber (plain aiomqtt): every message, raw, until the end marker."""
    async with aiomqtt.Client(url.host, url.port, protocol=aiomqtt.ProtocolVersion.V5) as client:
        await client.subscribe(f"{topics.root}/matches/#", qos=1)
        ready.set()
        async for message in client.messages:
            assert isinstance(message.payload, bytes)
            if message.topic.value == END.format(root=topics.root):
                return
            kind = message.topic.value.rsplit("/", 1)[1]
            out.append((kind, json.loads(message.payload), message.retain))


END = "{root}/matches/zz-end/events"


async def _mark_end(url: BrokerURL, topics: Topics) -> None:
    """After every message of the replay was acknowledged: the listener's end marker."""
    async with aiomqtt.Client(url.host, url.port) as client:
        await client.publish(END.format(root=topics.root), b"end", qos=1)


async def _replay(
    url: BrokerURL, topics: Topics, spec: str, seed: int
) -> tuple[list[tuple[str, dict[str, Any], bool]], ReplayReport]:
    got: list[tuple[str, dict[str, Any], bool]] = []
    ready = asyncio.Event()
    options = ReplayOptions(speed=None, topics=topics, chaos=ChaosSpec.parse(spec), seed=seed)
    async with asyncio.timeout(60):
        listener = asyncio.create_task(_listen(url, topics, ready, got))
        await ready.wait()
        [report] = await run_replay([SEMI], url, options, replayer_id="chaos")
        await _mark_end(url, topics)
        await listener
    return got, report


def _without_wall_clock(
    messages: list[tuple[str, dict[str, Any], bool]],
) -> list[tuple[str, dict[str, Any], bool]]:
    """The payloads with wall-clock fields taken out and runs made relative to the first."""
    first = next(m["run"] for _, m, _ in messages)
    out = []
    for kind, raw, retain in messages:
        body = {k: v for k, v in raw.items() if k not in WALL_FIELDS}
        body["run"] -= first
        out.append((kind, body, retain))
    return out


ALL = "duplicate=0.1,reorder=0.1,drop=0.05,delay=0.05:30,stale-state=0.05,correction=1"


async def test_the_same_seed_sends_the_same_stream_through_mosquitto(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    a, report_a = await _replay(mosquitto_url, topics, ALL, 11)
    b, report_b = await _replay(mosquitto_url, Topics(root=topics.root + "-b"), ALL, 11)
    assert _without_wall_clock(a) == _without_wall_clock(b)
    log_a = [{**f.to_json(), "run": 0} for f in report_a.faults]
    log_b = [{**f.to_json(), "run": 0} for f in report_b.faults]
    assert log_a == log_b and log_a


async def test_a_subscriber_sees_exactly_the_faults_the_log_says(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    got, report = await _replay(mosquitto_url, topics, "duplicate=0.1,drop=0.05,reorder=0.1:1", 5)
    seqs = [body["seq"] for kind, body, _ in got if kind == "events"]
    counts = Counter(seqs)
    logged = Counter(f.fault for f in report.faults)
    assert sum(n - 1 for n in counts.values()) == logged["duplicate"]
    assert report.truth is not None
    never = set(range(1, report.truth.last_seq + 1)) - set(counts)
    assert never == {f.seq for f in report.faults if f.fault == "drop"}
    firsts = []
    for seq in seqs:
        if seq not in firsts:
            firsts.append(seq)
    descents = sum(b < a for a, b in itertools.pairwise(firsts))
    assert descents == logged["reorder"]


def test_the_truth_and_the_log_files_read_back(tmp_path: Path) -> None:
    from simulator import apply_chaos, expand, state_before

    stream = expand(SEMI)
    out = apply_chaos(
        [s.event for s in stream],
        [0.0] * len(stream),
        state_before(SEMI, stream, 0),
        ChaosSpec.parse("correction=1"),
        seed=1,
        key=SEMI.match_id,
        run=7,
    )
    write_truth(tmp_path / "t.json", {SEMI.match_id: out.truth}, ChaosSpec.parse("correction=1"), 1)
    assert read_truth(tmp_path / "t.json") == {SEMI.match_id: out.truth}
    assert write_chaos_log(tmp_path / "f.jsonl", out.faults) == 3
    lines = [json.loads(x) for x in (tmp_path / "f.jsonl").read_text().splitlines()]
    assert [x["fault"] for x in lines] == ["correction"] * 3
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="not a matchcast truth file"):
        read_truth(tmp_path / "bad.json")


# -------------------------------------------------------------------------------- dogfood

FAULT_CASES = [
    pytest.param("duplicate=0.2", id="duplicate"),
    pytest.param("reorder=0.2", id="reorder"),
    pytest.param("drop=0.05", id="drop"),
    pytest.param("delay=0.1:40", id="delay"),
    pytest.param("stale-state=0.1", id="stale-state"),
    pytest.param("restart=30", id="restart"),
    pytest.param("correction=1", id="correction"),
    pytest.param("burst=60:0.3", id="burst"),
]


@pytest.mark.parametrize("spec", FAULT_CASES)
async def test_consume_watch_and_web_end_at_the_true_score(
    mosquitto_url: BrokerURL, topics: Topics, spec: str
) -> None:
    """The runner of `consume` and `watch` with their subscribers (scoreboard, terminal view)
    and the web page's bridge end at the truth, each handler called at most once per seq of
    a run."""
    handled: Counter[tuple[int, int]] = Counter()
    counter = Subscriber("counter")

    @counter.on(BaseEvent)
    def count(event: BaseEvent, _state: MatchState) -> None:
        handled[(event.run, event.seq)] += 1

    board = Scoreboard(echo=None)
    view = TerminalView(Console(file=io.StringIO(), force_terminal=False))
    hub = Hub()
    runner = Runner([counter, board, view.subscriber, bridge(hub)], topics=topics)
    options = ReplayOptions(speed=None, topics=topics, chaos=ChaosSpec.parse(spec), seed=3)
    async with asyncio.timeout(60):
        watch = asyncio.create_task(
            run_watch(mosquitto_url, [], runner=runner, until_finished={SEMI.match_id})
        )
        await asyncio.wait_for(runner.subscribed.wait(), 10)
        [report] = await run_replay([SEMI], mosquitto_url, options)
        try:
            async with asyncio.timeout(10):
                states = await watch
        except TimeoutError:
            runner.stop()
            states = await watch
    truth = report.truth
    assert truth is not None
    true_goals = [g.goal_id for g in truth.goals]
    for name, state in (
        ("runner", states.get(SEMI.match_id)),
        ("scoreboard", board.states.get(SEMI.match_id)),
        ("terminal", view.board.states.get(SEMI.match_id)),
        ("web", hub.state(SEMI.match_id)),
    ):
        assert state is not None, name
        assert (state.score, state.status) == (truth.score, "finished"), name
        assert [g.goal_id for g in state.goals] == true_goals, name
    assert max(handled.values()) == 1, [k for k, n in handled.items() if n > 1]
    if spec.split("=", maxsplit=1)[0] in EVERY_SEQ_ARRIVES_IN_ORDER:
        # Nothing lost or overtaken: every seq of the true (last) run is handled, once.
        last_run = {k for k in handled if k[0] == truth.run}
        assert last_run == {(truth.run, seq) for seq in range(1, truth.last_seq + 1)}


#: Faults after which every event of the true run still arrives, first copies in seq order.
EVERY_SEQ_ARRIVES_IN_ORDER = {"duplicate", "stale-state", "restart", "correction", "burst"}


async def test_a_chaos_replay_resumes_after_a_dropped_connection(
    mosquitto: Mosquitto, topics: Topics
) -> None:
    """Through a proxy that drops the link mid-replay: it reconnects, and every seq of the
    true stream still arrives (the chaos adds repeats and corrections, never loses one). It
    says so under the clean replay's name, ``replay.resuming`` (docs/chaos.md)."""
    received: list[int] = []
    async with FaultProxy("127.0.0.1", mosquitto.port) as proxy:
        url = BrokerURL("127.0.0.1", proxy.port)
        async with aiomqtt.Client("127.0.0.1", mosquitto.port) as watcher:
            await watcher.subscribe(topics.events("+"), qos=1)

            async def collect() -> None:
                async for m in watcher.messages:
                    assert isinstance(m.payload, bytes)
                    if m.topic.value == END.format(root=topics.root):
                        return
                    received.append(json.loads(m.payload)["seq"])

            async with asyncio.timeout(60):
                collector = asyncio.create_task(collect())
                options = ReplayOptions(
                    speed=600,
                    start=MatchClock.at(70),
                    topics=topics,
                    chaos=ChaosSpec.parse("duplicate=0.2,correction=1"),
                    seed=1,
                )
                with capture_logs() as logs:
                    replay = asyncio.create_task(run_replay([SEMI], url, options))
                    while len(received) < 5:
                        await asyncio.sleep(0.01)
                    proxy.drop()
                    (report,) = await replay
                await _mark_end(BrokerURL("127.0.0.1", mosquitto.port), topics)
                await collector
    assert report.reconnects >= 1
    assert report.truth is not None
    assert set(received) == set(range(received[0], report.truth.last_seq + 1))
    names = [e["event"] for e in logs]
    assert names.count("replay.resuming") == report.reconnects, names
    assert "replay.resumed" not in names  # the one name a clean replay uses too


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("dup=0.1", "unknown chaos fault 'dup'"),
        ("burst=60", "expected burst=MINUTE:SECONDS"),
        ("delay=2:100", "expected delay=P:MS"),
    ],
)
def test_replay_refuses_a_bad_spec_in_one_line_with_exit_2(spec: str, needle: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "matchcast", "replay", "--broker", "mqtt://127.0.0.1:1",
         "--chaos", spec],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert needle in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
