"""``load`` over a broker list: connections round-robin per node, what flowed through each
node (counted on the node a client was on when it flowed), and a run whose probes received
nothing never exits 0."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest

from events import ConnectionLostError, Message, MessageProps, Topics
from matchcast.load import (
    LoadOptions,
    LoadRun,
    LoadShape,
    MatchTemplate,
    build_report,
    nothing_delivered,
)
from matchcast.testbroker import Mosquitto, mosquitto_binary
from matchcast.transport.connection import BrokerURL
from simulator import resolve_matches

TEMPLATE = MatchTemplate.build(resolve_matches("semifinal")[0])
N = len(TEMPLATE)
A, B = BrokerURL("a", 1), BrokerURL("b", 2)


class Bus:
    """Two nodes of one cluster, in memory: every event reaches every subscribed client id,
    queued for it while it is away (a persistent session)."""

    def __init__(self, topics: Topics) -> None:
        self.topics = topics
        self.queues: dict[str, asyncio.Queue[Message]] = {}

    def route(self, topic: str, payload: bytes, qos: int) -> None:
        parsed = self.topics.parse(topic)
        if parsed is not None and parsed[0] == "events":
            for queue in self.queues.values():
                queue.put_nowait(Message(topic, payload, qos))


class NodeClient:
    """A client of :class:`Bus` on node ``url``. After ``after`` messages a probe either moves
    to ``fail_over_to`` (as a client's own failover does; the message in flight then is lost)
    or loses its connection (``drop``)."""

    def __init__(
        self,
        bus: Bus,
        url: BrokerURL,
        client_id: str,
        *,
        after: int = 0,
        fail_over_to: BrokerURL | None = None,
        drop: bool = False,
    ) -> None:
        self.bus, self.url, self.client_id = bus, url, client_id
        self.after, self.fail_over_to, self.drop = after, fail_over_to, drop

    async def __aenter__(self) -> NodeClient:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    async def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        props: MessageProps | None = None,
    ) -> None:
        self.bus.route(topic, payload, qos)

    async def subscribe(self, topic_filter: str, *, qos: int = 1) -> None:
        self.bus.queues.setdefault(self.client_id, asyncio.Queue())

    async def messages(self) -> AsyncIterator[Message]:
        queue = self.bus.queues[self.client_id]
        for n in range(1_000_000):
            if n == self.after and self.fail_over_to is not None:
                self.url = self.fail_over_to
                await queue.get()  # in flight when the node went: lost
            if n == self.after and self.drop:
                raise ConnectionLostError(str(self.url), "connection lost")
            yield await queue.get()


def _run(bus: Bus, topics: Topics, probes: list[dict[str, Any]]) -> LoadRun:
    """A run of one match from a publisher on A, each probe connection made as ``probes``
    says, in turn."""
    made: list[str] = []

    def factory(client_id: str, role: str) -> NodeClient:
        if role == "pub":
            return NodeClient(bus, A, client_id)
        made.append(client_id)
        return NodeClient(bus, client_id=client_id, **probes[len(made) - 1])

    shape = LoadShape(matches=1, qos=1, states=False, tag="nf")
    return LoadRun(
        LoadOptions(shape=shape, topics=topics, drain_idle_s=0.5, drain_max_s=30),
        [TEMPLATE],
        factory,
    )


async def test_a_probe_that_fails_over_counts_on_its_new_node_from_then_on(
    topics: Topics,
) -> None:
    """The client moved from A to B after 40 events: 40 count on A, the rest (and the one
    lost in the move) on B, where its consumer ended."""
    bus = Bus(topics)
    run = _run(bus, topics, [{"url": A, "after": 40, "fail_over_to": B}])
    await run.run()
    nodes = build_report(run, {}, nodes=("mqtt://a:1", "mqtt://b:2"))["nodes"]
    a, b = nodes["mqtt://a:1"], nodes["mqtt://b:2"]
    assert a["connections"] == {"probe": 1, "pub": 1}
    assert b["connections"] == {"probe": 1}  # the failover's connection
    assert (a["events_published"], a["events_acknowledged"]) == (N, N)
    assert (b["events_published"], b["events_acknowledged"]) == (0, 0)
    assert (a["received"], a["unique"], a["lost"], a["latency_ms"]["count"]) == (40, 40, 0, 40)
    assert (b["received"], b["unique"], b["lost"]) == (N - 41, N - 41, 1)
    assert b["latency_ms"]["count"] == N - 41
    assert (a["consumers"], b["consumers"]) == ([], ["probe-0"])


async def test_a_probe_that_reconnects_to_another_node_counts_there(topics: Topics) -> None:
    """The connection on A dropped after 25 events; the probe's new connection went to B and
    got the rest from its session there."""
    bus = Bus(topics)
    run = _run(bus, topics, [{"url": A, "after": 25, "drop": True}, {"url": B}])
    await run.run()
    report = build_report(run, {})
    a, b = report["nodes"]["mqtt://a:1"], report["nodes"]["mqtt://b:2"]
    assert (a["connections"], b["connections"]) == ({"probe": 1, "pub": 1}, {"probe": 1})
    assert (a["received"], b["received"]) == (25, N - 25)
    assert (a["lost"], b["lost"], b["consumers"]) == (0, 0, ["probe-0"])
    assert a["latency_ms"]["count"] + b["latency_ms"]["count"] == report["latency_ms"]["count"]


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
        env={
            **{k: v for k, v in os.environ.items() if k != "MATCHCAST_BROKER"},
            "COLUMNS": "200",  # the table's node rows unwrapped
        },
        timeout=120,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.mosquitto
@pytest.mark.parametrize("client", ["aiomqtt", "fast"])
def test_load_over_two_brokers_counts_what_each_node_delivered(
    two_mosquittos: tuple[Mosquitto, Mosquitto], tmp_path: Path, client: str
) -> None:
    """Two brokers that are not a cluster: each probe hears only its own node's publisher, so
    what each node delivered is known exactly. Matches 0 and 2 go to the publisher on A,
    match 1 to the one on B."""
    a, b = two_mosquittos
    out = tmp_path / "r.json"
    r = _load(
        *("--broker", f"{a.url},{b.url}", "--client", client, "--drain-idle", "1"),
        *("--matches", "3", "--publishers", "2", "--subscribers", "2", "--qos", "1"),
        *("--speed", "max", "--root", f"mctest-nodes-{tmp_path.name}", "--no-progress"),
        *("--report", str(out)),
    )
    assert r.returncode == 0, r.stderr
    report = json.loads(out.read_text())
    assert report["format"] == 3
    assert report["parameters"]["broker"] == f"{a.url},{b.url}"
    na, nb = report["nodes"][a.url], report["nodes"][b.url]
    assert na["connections"] == nb["connections"] == {"pub": 1, "probe": 1}
    assert (na["events_published"], na["events_acknowledged"]) == (2 * N, 2 * N)
    assert (nb["events_published"], nb["events_acknowledged"]) == (N, N)
    assert na["publish_failures"] == nb["publish_failures"] == 0
    figures = ("received", "unique", "lost", "duplicates", "reordered")
    assert [na[k] for k in figures] == [2 * N, 2 * N, N, 0, 0]
    assert [nb[k] for k in figures] == [N, N, 2 * N, 0, 0]
    assert (na["consumers"], nb["consumers"]) == (["probe-0"], ["probe-1"])
    assert (na["latency_ms"]["count"], nb["latency_ms"]["count"]) == (2 * N, N)
    assert report["latency_ms"]["count"] == 3 * N
    # The table has a section per node.
    assert f"node {a.url}: connections" in r.stdout
    assert f"node {b.url}: connections" in r.stdout


def test_a_run_whose_probes_got_nothing_fails_and_names_share() -> None:
    result = {"delivery": {"expected": 530, "received": 0}, "parameters": {"shared_group": "g"}}
    reason = nothing_delivered(result)
    assert reason is not None
    assert "530" in reason
    assert "$share/g/" in reason
    assert nothing_delivered({"delivery": {"expected": 530, "received": 1}}) is None
    assert nothing_delivered({"delivery": {"expected": 0, "received": 0}}) is None
    assert nothing_delivered({}) is None  # an old or send-only report
