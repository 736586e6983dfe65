"""Replay throughput against a raw publish loop, and schedule lateness, side by side.

    python benchmarks/replay_bench.py                 # spawns its own mosquitto
    python benchmarks/replay_bench.py --broker mqtt://127.0.0.1:1883 --reps 20
    python benchmarks/replay_bench.py --clients aiomqtt fast     # the replay on each client

(a) events/s of `matchcast replay --speed max` over REPS back-to-back replays of the
    semi-final, against a raw publish loop of the very same payloads (each event and its
    retained state, pre-encoded) on the same client with the same number of publishes in
    flight; delivered messages are counted by a subscriber, and the ratio is printed per QoS.
    Runs alternate (raw, replay, raw, replay, ...) so machine noise hits both alike. Beside
    the rates, this process's CPU time per event: what the client costs, which other work on
    a shared machine does not change as it changes the rates.
(b) schedule lateness (publish call minus deadline, time.monotonic) at a high speed factor.

--clients runs both on each MQTT client named (aiomqtt: MqttClient, what `matchcast replay`
uses by default; fast: FastClient), the clients taking turns in each round (which goes first
rotates by round), and adds the ratio of each client's replay to aiomqtt's of the same
round. --baseline FILE adds the MqttClient of another version (a copy of its
matchcast/transport/mqtt.py) as the client "baseline".

Targets (issue 2): ratio >= 0.8 at QoS 0 and QoS 1; lateness p99 <= 5 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any, Literal

import aiomqtt
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from events import Topics, encode_event, encode_state, replay_state
from matchcast.logs import configure_logging
from matchcast.testbroker import Mosquitto, mosquitto_binary
from matchcast.transport.connection import BrokerURL
from matchcast.transport.fastmqtt import FastClient
from matchcast.transport.mqtt import MqttClient
from simulator import Match, Replayer, ReplayOptions, expand, resolve_matches

console = Console()
PROTOCOL: Literal["auto", "5", "3.1.1"] = "auto"


@dataclass
class Run:
    client: str
    kind: str
    qos: int
    messages: int
    seconds: float
    cpu_s: float = 0.0

    @property
    def events_per_s(self) -> float:
        return self.messages / 2 / self.seconds

    @property
    def cpu_us_per_event(self) -> float:
        return self.cpu_s / (self.messages / 2) * 1e6


async def _count(
    url: BrokerURL,
    topic_filter: str,
    expected: int,
    ready: asyncio.Event,
    done: asyncio.Future[float],
) -> None:
    n = 0
    async with aiomqtt.Client(url.host, url.port, max_queued_incoming_messages=0) as sub:
        await sub.subscribe(topic_filter, qos=1)
        ready.set()
        async with asyncio.timeout(300):
            async for _ in sub.messages:
                n += 1
                if n == expected:
                    done.set_result(time.perf_counter())
                    return


async def _measure(
    url: BrokerURL, client_name: str, kind: str, qos: int, match: Match, reps: int, inflight: int
) -> Run:
    topics = Topics(f"bench-{uuid.uuid4().hex[:8]}")
    expected = 2 * reps * len(expand(match))
    ready: asyncio.Event = asyncio.Event()
    done: asyncio.Future[float] = asyncio.get_running_loop().create_future()
    counter = asyncio.create_task(_count(url, f"{topics.root}/#", expected, ready, done))
    await ready.wait()
    # the client settings of run_replay: 20 on the wire (the broker's receive maximum)
    async with CLIENTS[client_name](url, max_inflight=20, protocol=PROTOCOL) as client:
        start = time.perf_counter()
        cpu = time.process_time()
        if kind == "replay":
            replayer = Replayer(
                client, ReplayOptions(speed=None, qos=qos, topics=topics, max_inflight=inflight)
            )
            for _ in range(reps):
                await replayer.run(match)
        else:
            # The same payloads, encoded beforehand: only the client's cost remains.
            stream = [s.event for s in expand(match)]
            msgs: list[tuple[str, bytes, bool]] = []
            for i, event in enumerate(stream):
                msgs.append((topics.events(match.match_id), encode_event(event), False))
                msgs.append(
                    (
                        topics.state(match.match_id),
                        encode_state(replay_state(match.match_id, stream[: i + 1])),
                        True,
                    )
                )
            window = asyncio.Semaphore(inflight)

            async def one(topic: str, payload: bytes, retain: bool) -> None:
                try:
                    await client.publish(topic, payload, qos=qos, retain=retain)
                finally:
                    window.release()

            async with asyncio.TaskGroup() as tg:
                for _ in range(reps):
                    for topic, payload, retain in msgs:
                        await window.acquire()
                        tg.create_task(one(topic, payload, retain))
        end = await done
        cpu = time.process_time() - cpu
    await counter
    return Run(client_name, kind, qos, expected, end - start, cpu)


async def _lateness(
    url: BrokerURL, client_name: str, match: Match, speed: float, reps: int
) -> list[float]:
    topics = Topics(f"bench-{uuid.uuid4().hex[:8]}")
    late: list[float] = []
    async with CLIENTS[client_name](url) as client:
        replayer = Replayer(client, ReplayOptions(speed=speed, topics=topics, break_seconds=0.5))
        for _ in range(reps):
            late += (await replayer.run(match)).lateness_s
    return late


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def main(args: argparse.Namespace) -> int:
    broker: Mosquitto | None = None
    if args.broker:
        url = BrokerURL.parse(args.broker)
    else:
        binary = mosquitto_binary()
        if binary is None:
            console.print("mosquitto is not installed: pass --broker URL")
            return 2
        broker = Mosquitto(binary).start()
        url = BrokerURL.parse(broker.url)
    match = resolve_matches("semifinal")[0]
    runs: list[Run] = []
    late: dict[str, list[float]] = {}
    names = args.clients
    try:
        with Progress(console=console, transient=True) as progress:
            total = len(args.qos) * args.rounds * 2 * len(names)
            task = progress.add_task(f"throughput on {url}", total=total)
            for qos in args.qos:
                for r in range(args.rounds):
                    turn = r % len(names)
                    for name in names[turn:] + names[:turn]:
                        for kind in ("raw", "replay"):
                            runs.append(
                                await _measure(
                                    url, name, kind, qos, match, args.reps, args.inflight
                                )
                            )
                            progress.advance(task)
            progress.add_task("lateness", total=None)
            for r in range(args.lateness_rounds):
                turn = r % len(names)
                for name in names[turn:] + names[:turn]:
                    late.setdefault(name, []).extend(
                        await _lateness(url, name, match, args.speed, args.lateness_reps)
                    )
    finally:
        if broker:
            broker.stop()
    _report(args, match, runs, late)
    return 0


def _report(
    args: argparse.Namespace, match: Match, runs: list[Run], late: dict[str, list[float]]
) -> None:
    table = Table(
        title=f"(a) replay vs raw loop, {args.reps} x {len(expand(match))} events, "
        f"{args.inflight} in flight; median of {args.rounds} rounds"
    )
    for col in ("client", "QoS", "raw events/s", "replay events/s", "replay/raw", "target",
                "replay x aiomqtt's", "CPU us/event raw", "replay"):  # fmt: skip
        table.add_column(col, justify="right")
    for name in args.clients:
        for qos in args.qos:
            mine = [r for r in runs if r.client == name and r.qos == qos]
            raw = statistics.median(r.events_per_s for r in mine if r.kind == "raw")
            rep = statistics.median(r.events_per_s for r in mine if r.kind == "replay")
            versus = ""
            if name != "aiomqtt" and "aiomqtt" in args.clients:
                theirs = [r for r in runs if r.client == "aiomqtt" and r.qos == qos]
                pairs = zip(
                    [r for r in mine if r.kind == "replay"],
                    [r for r in theirs if r.kind == "replay"],
                    strict=True,
                )
                ratios = [a.events_per_s / b.events_per_s for a, b in pairs]
                versus = f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
            cpu_raw = statistics.median(r.cpu_us_per_event for r in mine if r.kind == "raw")
            cpu_rep = statistics.median(r.cpu_us_per_event for r in mine if r.kind == "replay")
            table.add_row(
                name, str(qos), f"{raw:,.0f}", f"{rep:,.0f}", f"{rep / raw:.2f}", ">= 0.80",
                versus, f"{cpu_raw:,.0f}", f"{cpu_rep:,.0f}",
            )  # fmt: skip
    console.print(table)
    for name, values in late.items():
        ms = [x * 1000 for x in values]
        console.print(
            f"(b) lateness on {name} at --speed {args.speed:g}, {len(ms)} events: "
            f"p50 {_pct(ms, 50):.2f} ms, p99 {_pct(ms, 99):.2f} ms, max {max(ms):.2f} ms "
            "(target p99 <= 5 ms)"
        )
    console.print(
        "(events/s counts events; each event is two messages: the event and its retained state."
        " CPU us/event is this process's CPU time, the publishing client and the counting"
        " subscriber together, per event: what the client costs, whatever else the machine"
        " runs)"
    )


def _baseline(path: str) -> Any:
    """The MqttClient of another version, from a copy of its matchcast/transport/mqtt.py."""
    spec = importlib.util.spec_from_file_location("mqtt_baseline", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.MqttClient


CLIENTS: dict[str, Any] = {"aiomqtt": MqttClient, "fast": FastClient}


if __name__ == "__main__":
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--broker", help="broker URL; default: spawn mosquitto on a free port")
    ap.add_argument("--reps", type=int, default=20, help="replays of the match per run")
    ap.add_argument("--rounds", type=int, default=3, help="alternating raw/replay rounds per QoS")
    ap.add_argument("--qos", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--inflight", type=int, default=64)
    ap.add_argument("--speed", type=float, default=1200.0, help="speed factor for (b)")
    ap.add_argument("--lateness-reps", type=int, default=4, help="replays measured for (b)")
    ap.add_argument("--protocol", choices=["auto", "5", "3.1.1"], default="auto")
    ap.add_argument(
        "--clients",
        nargs="+",
        default=["aiomqtt"],
        choices=["aiomqtt", "fast", "baseline"],
        help="the MQTT clients to run each measure on, in turn",
    )
    ap.add_argument(
        "--baseline", help="another version's matchcast/transport/mqtt.py: client 'baseline'"
    )
    ap.add_argument("--lateness-rounds", type=int, default=1, help="rounds of (b) per client")
    configure_logging("console", "WARNING")
    parsed = ap.parse_args()
    PROTOCOL = parsed.protocol
    if parsed.baseline:
        CLIENTS["baseline"] = _baseline(parsed.baseline)
        if "baseline" not in parsed.clients:
            parsed.clients.append("baseline")
    sys.exit(asyncio.run(main(parsed)))
