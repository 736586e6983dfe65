"""How long a replayer and a consumer whose node dies take to work again on another node.

Issue 15's bound: "a replayer or consumer whose node dies is publishing or receiving again on
another node within 5 s". Each round starts the semi-final replay at ``--speed`` with the
replayer (aiomqtt, as `matchcast replay`) and a consumer (`run_watch`, the fast client as
`matchcast consume`) both on node 1 of the list, SIGKILLs node 1 once the consumer has
``--kill-after`` events, and measures from the kill:

- ``reconnected``: the replayer's client connected to another node (``reconnect()`` returned);
- ``first PUBACK``: the first publish the new node acknowledged;
- ``consumer``: the first new event the consumer's handlers got again (it drops the re-sent
  ones it already has, so this includes the replayer's re-sent window).

Then it checks the replay finished 2-1 and prints each round and min/median/max.

    python benchmarks/failover_bench.py --engine nats --rounds 5
    python benchmarks/failover_bench.py --engine mosquitto --rounds 5   # two lone brokers: the
                                                                          # client-side cost only

``--engine nats`` starts a 3-node NATS 2.9 cluster of its own (tests/_clusters.py) and
restarts the killed node between rounds; ``mosquitto`` two unrelated mosquittos (the consumer
misses what was published on the dead one in between: only the times count).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from consumers import Runner, Subscriber
from events import Event, MatchState, MessageProps, Topics
from matchcast.app import run_watch
from matchcast.testbroker import Mosquitto, mosquitto_binary
from matchcast.transport.connection import BrokerURL
from matchcast.transport.mqtt import MqttClient
from simulator import Replayer, ReplayOptions, resolve_matches

SEMI = resolve_matches("semifinal")[0]


class _Timed:
    """The replayer's publisher, noting when it reconnected and when each publish was acked."""

    def __init__(self, inner: MqttClient) -> None:
        self.inner = inner
        self.reconnected_at: float | None = None
        self.acked_after_reconnect: float | None = None

    async def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        props: MessageProps | None = None,
    ) -> None:
        await self.inner.publish(topic, payload, qos=qos, retain=retain, props=props)
        if self.reconnected_at is not None and self.acked_after_reconnect is None:
            self.acked_after_reconnect = time.monotonic()

    async def wait_lost(self) -> None:
        await self.inner.wait_lost()

    async def reconnect(self) -> None:
        await self.inner.reconnect()
        if self.reconnected_at is None:
            self.reconnected_at = time.monotonic()


@dataclass
class Round:
    """One round's figures, in seconds from the kill (None: never happened)."""

    reconnected: float | None = None
    first_puback: float | None = None
    consumer: float | None = None
    final: str = ""
    notes: list[str] = field(default_factory=list)


class Brokers:
    """The nodes a round runs on: kill the first, bring it back."""

    def __init__(self, engine: str) -> None:
        self.engine = engine
        self.cluster: Any = None
        self.mosquittos: list[Mosquitto] = []
        if engine == "nats":
            sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
            self.cluster = importlib.import_module("tests._clusters").NatsCluster().start()
        else:
            binary = mosquitto_binary()
            if binary is None:
                raise SystemExit("mosquitto is not installed")
            self.mosquittos = [Mosquitto(binary).start() for _ in range(2)]

    @property
    def urls(self) -> tuple[BrokerURL, ...]:
        if self.cluster is not None:
            urls: tuple[BrokerURL, ...] = self.cluster.urls
            return urls
        return tuple(BrokerURL("127.0.0.1", m.port) for m in self.mosquittos)

    def kill_first(self) -> None:
        if self.cluster is not None:
            self.cluster.kill(0)
        else:
            self.mosquittos[0].kill()

    def heal(self) -> None:
        if self.cluster is not None:
            self.cluster.heal()
        elif self.mosquittos[0].proc is None or self.mosquittos[0].proc.poll() is not None:
            self.mosquittos[0].start()

    def stop(self) -> None:
        if self.cluster is not None:
            self.cluster.stop()
        for m in self.mosquittos:
            m.stop()


def _recorder(times: list[tuple[float, int]], enough: int, ready: asyncio.Event) -> Subscriber:
    sub = Subscriber("failover-bench")

    def note(event: Event, _state: MatchState) -> None:
        times.append((time.monotonic(), event.seq))
        if len(times) >= enough:
            ready.set()

    sub.on()(note)
    return sub


async def one_round(brokers: Brokers, args: argparse.Namespace, number: int) -> Round:
    urls = brokers.urls
    topics = Topics(root=f"fobench{number}-{uuid.uuid4().hex[:6]}")
    handled: list[tuple[float, int]] = []
    ready = asyncio.Event()
    runner = Runner([_recorder(handled, args.kill_after, ready)], topics=topics)
    out = Round()
    async with asyncio.timeout(args.round_timeout), asyncio.TaskGroup() as tg:
        watch = tg.create_task(
            run_watch(urls, [], runner=runner, until_finished={SEMI.match_id}, client="fast")
        )
        await runner.subscribed.wait()
        async with MqttClient(
            urls, client_id=f"fobench-{topics.root}", protocol="auto", max_inflight=20
        ) as client:
            timed = _Timed(client)
            options = ReplayOptions(speed=args.speed, break_seconds=0.5, topics=topics)
            replay = tg.create_task(Replayer(timed, options).run(SEMI))
            async with asyncio.timeout(60):
                await ready.wait()
            killed = time.monotonic()
            brokers.kill_first()
            report = await replay
        out.final = report.final_state.scoreline if report.final_state else "no final state"
        try:
            await asyncio.wait_for(asyncio.shield(watch), args.drain_s)
        except TimeoutError:
            out.notes.append("consumer did not see full time")
            runner.stop()
            await watch
    if timed.reconnected_at is not None:
        out.reconnected = timed.reconnected_at - killed
    if timed.acked_after_reconnect is not None:
        out.first_puback = timed.acked_after_reconnect - killed
    # The kill's last bytes may still be read from the dying socket: a new event counts once
    # handled after the replayer's client was connected again (nothing new exists before).
    since = timed.reconnected_at or killed
    after = [t for t, _ in handled if t > since]
    if after:
        out.consumer = after[0] - killed
    return out


def _figures(name: str, values: Sequence[float | None]) -> str:
    got = [v for v in values if v is not None]
    if not got:
        return f"{name}: none"
    missing = len(values) - len(got)
    tail = f" ({missing} rounds without)" if missing else ""
    return (
        f"{name}: min {min(got):.3f}s, median {statistics.median(got):.3f}s, "
        f"max {max(got):.3f}s over {len(got)} rounds{tail}"
    )


async def _rounds(brokers: Brokers, args: argparse.Namespace) -> list[Round]:
    rounds = []
    for n in range(1, args.rounds + 1):
        if n > 1:
            brokers.heal()
            await asyncio.sleep(args.settle_s)
        r = await one_round(brokers, args, n)
        rounds.append(r)

        def fmt(v: float | None) -> str:
            return "-" if v is None else f"{v:.3f}s"

        print(
            f"round {n}: reconnected {fmt(r.reconnected)}, first PUBACK {fmt(r.first_puback)}, "
            f"consumer receiving again {fmt(r.consumer)}, final {r.final}"
            + (f" ({'; '.join(r.notes)})" if r.notes else ""),
            flush=True,
        )
    return rounds


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--engine", choices=["nats", "mosquitto"], default="nats")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--speed", type=float, default=400.0)
    ap.add_argument("--kill-after", type=int, default=30, help="events the consumer has first")
    ap.add_argument("--settle-s", type=float, default=3.0, help="after restarting the node")
    ap.add_argument("--drain-s", type=float, default=20.0)
    ap.add_argument("--round-timeout", type=float, default=180.0)
    ap.add_argument("-v", "--verbose", action="store_true", help="show the clients' warnings")
    args = ap.parse_args(argv)
    # Quiet: the clients' warnings (broker.failed_over, ...) are expected here.
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(30 if args.verbose else 40),
        cache_logger_on_first_use=True,
    )
    brokers = Brokers(args.engine)
    try:
        rounds = asyncio.run(_rounds(brokers, args))
    finally:
        brokers.stop()
    print(f"{args.engine}, {args.rounds} rounds, semi-final at {args.speed:g}x, SIGKILL of node 1:")
    print("  " + _figures("replayer connected to another node", [r.reconnected for r in rounds]))
    print("  " + _figures("replayer's first PUBACK there", [r.first_puback for r in rounds]))
    print("  " + _figures("consumer handling new events again", [r.consumer for r in rounds]))
    finals = {r.final for r in rounds}
    print(f"  final scores: {', '.join(sorted(finals))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
