"""How long a replayer and a consumer whose node dies take to work again on another node.

Issue 15's bound: "a replayer or consumer whose node dies is publishing or receiving again on
another node within 5 s". Each round starts the semi-final replay at ``--speed`` as `matchcast
replay` runs it (``run_replay``: its will, its retained status and its control subscription,
announced again on each new connection) and a consumer (``run_watch`` on the fast client, as
`matchcast consume`), both on node 1 of the list. An observer, a plain QoS 0 subscriber on
node 2, sees what reaches the cluster. Node 1 is SIGKILLed once the consumer has
``--kill-after`` events, and from the kill it measures:

- ``replayer``: the first event newer than any seen before the kill reaching the observer
  (the replayer publishing again on another node, end to end);
- ``consumer``: the first new event the consumer's handlers got again (it drops the re-sent
  ones it already has, so this includes the replayer's own failover).

Then it checks the replay finished 2-1 and prints each round and min/median/max.

    python benchmarks/failover_bench.py --engine nats --rounds 5
    python benchmarks/failover_bench.py --engine rabbitmq --rounds 2   # 3 nodes: a node each
    python benchmarks/failover_bench.py --engine rabbitmq --rounds 2 --session  # consume --session
    python benchmarks/failover_bench.py --engine mosquitto --rounds 5   # two lone brokers: the
                                                                          # client-side cost only
    python benchmarks/failover_bench.py --engine mosquitto --rounds 10 --clients fast aiomqtt

``--clients`` runs the consumer on each MQTT client named in turn, round by round (`watch` and
`web` take ``--client``, aiomqtt by default; `consume` the fast client), figures per client.

``--engine nats`` starts a 3-node NATS 2.9 cluster of its own (tests/_clusters.py) and
restarts the killed node between rounds; ``rabbitmq`` a 3-node RabbitMQ 3.10 cluster, each round
on the next live node; ``mosquitto`` two unrelated mosquittos (the consumer
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
from events import Event, MatchState, Topics, decode_event
from matchcast.app import run_replay, run_watch
from matchcast.testbroker import Mosquitto, mosquitto_binary
from matchcast.transport.connection import BrokerURL
from matchcast.transport.fastmqtt import FastClient
from simulator import ReplayOptions, resolve_matches

SEMI = resolve_matches("semifinal")[0]


@dataclass
class Round:
    """One round's figures, in seconds from the kill (None: never happened)."""

    client: str = "fast"
    replayer: float | None = None
    consumer: float | None = None
    final: str = ""
    notes: list[str] = field(default_factory=list)


class Brokers:
    """The nodes a round runs on: kill the round's first node, bring nodes back between rounds.

    On RabbitMQ a node restarted after a SIGKILL takes about 100 s, so each round starts on the
    next live node (the list rotated) and a node is restarted only when fewer than two are up.
    """

    def __init__(self, engine: str) -> None:
        self.engine = engine
        self.cluster: Any = None
        self.mosquittos: list[Mosquitto] = []
        self.first = 0
        if engine in ("nats", "rabbitmq"):
            sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
            clusters = importlib.import_module("tests._clusters")
            kind = clusters.NatsCluster if engine == "nats" else clusters.RabbitCluster
            self.cluster = kind().start()
        else:
            binary = mosquitto_binary()
            if binary is None:
                raise SystemExit("mosquitto is not installed")
            self.mosquittos = [Mosquitto(binary).start() for _ in range(2)]

    @property
    def urls(self) -> tuple[BrokerURL, ...]:
        """Every node, the round's first node first."""
        if self.cluster is not None:
            urls: tuple[BrokerURL, ...] = self.cluster.urls
        else:
            urls = tuple(BrokerURL("127.0.0.1", m.port) for m in self.mosquittos)
        return urls[self.first :] + urls[: self.first]

    def kill_first(self) -> None:
        if self.cluster is not None:
            self.cluster.kill(self.first)
        else:
            self.mosquittos[self.first].kill()

    def heal(self) -> None:
        if self.engine == "rabbitmq":
            live = self.cluster.ready_for_a_kill()
            self.first = live[0]
        elif self.cluster is not None:
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


async def _observe(url: BrokerURL, topics: Topics, seen: list[tuple[float, int]]) -> None:
    """Note the arrival time and seq of every event reaching ``url`` (QoS 0), until cancelled."""
    async with FastClient(url, client_id=f"fobench-observer-{topics.root}") as client:
        await client.subscribe(topics.events(), qos=0)
        async for message in client.messages():
            seen.append((time.monotonic(), decode_event(message.payload).seq))


async def one_round(
    brokers: Brokers, args: argparse.Namespace, number: int, client: str = "fast"
) -> Round:
    urls = brokers.urls
    topics = Topics(root=f"fobench{number}-{uuid.uuid4().hex[:6]}")
    handled: list[tuple[float, int]] = []
    observed: list[tuple[float, int]] = []
    ready = asyncio.Event()
    runner = Runner([_recorder(handled, args.kill_after, ready)], topics=topics)
    out = Round(client)
    async with asyncio.timeout(args.round_timeout), asyncio.TaskGroup() as tg:
        observer = tg.create_task(_observe(urls[1], topics, observed))
        session: dict[str, Any] = {}
        if args.session:  # `consume --session`: on RabbitMQ it dies with node 1, and is given up
            session = {
                "client_id": f"fobench-session-{topics.root}",
                "clean_start": False,
                "session_expiry": 600,
            }
        watch = tg.create_task(
            run_watch(
                urls, [], runner=runner, until_finished={SEMI.match_id}, client=client, **session
            )
        )
        await runner.subscribed.wait()
        await asyncio.sleep(0.5)  # the observer's SUBSCRIBE is out
        options = ReplayOptions(speed=args.speed, break_seconds=0.5, topics=topics)
        replay = tg.create_task(
            run_replay([SEMI], urls, options, replayer_id=f"fobench-{topics.root}")
        )
        async with asyncio.timeout(60):
            await ready.wait()
        killed = time.monotonic()
        newest_before = max((seq for _, seq in observed), default=0)
        brokers.kill_first()
        [report] = await replay
        out.final = report.final_state.scoreline if report.final_state else "no final state"
        try:
            await asyncio.wait_for(asyncio.shield(watch), args.drain_s)
        except TimeoutError:
            out.notes.append("consumer did not see full time")
            runner.stop()
            await watch
        observer.cancel()
    newer = [t for t, seq in observed if seq > newest_before and t > killed]
    if newer:
        out.replayer = newer[0] - killed
    # A new event counts once handled after the observer saw one (nothing new exists before).
    since = newer[0] if newer else killed
    after = [t for t, _ in handled if t >= since]
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
        r = await one_round(brokers, args, n, args.clients[(n - 1) % len(args.clients)])
        rounds.append(r)

        def fmt(v: float | None) -> str:
            return "-" if v is None else f"{v:.3f}s"

        print(
            f"round {n} ({r.client} consumer): replayer publishing again {fmt(r.replayer)}, "
            f"consumer receiving again {fmt(r.consumer)}, final {r.final}"
            + (f" ({'; '.join(r.notes)})" if r.notes else ""),
            flush=True,
        )
    return rounds


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--engine", choices=["nats", "rabbitmq", "mosquitto"], default="nats")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--speed", type=float, default=400.0)
    ap.add_argument("--kill-after", type=int, default=30, help="events the consumer has first")
    ap.add_argument("--settle-s", type=float, default=3.0, help="after restarting the node")
    ap.add_argument("--drain-s", type=float, default=20.0)
    ap.add_argument("--round-timeout", type=float, default=180.0)
    ap.add_argument("--session", action="store_true", help="the consumer with a persistent session")
    ap.add_argument("-v", "--verbose", action="store_true", help="show the clients' warnings")
    ap.add_argument(
        "--clients",
        nargs="+",
        default=["fast"],
        choices=["fast", "aiomqtt"],
        help="the consumer's MQTT client, in turn by round",
    )
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
    consumer = "a session consumer" if args.session else "a clean consumer"
    print(
        f"{args.engine}, {args.rounds} rounds, semi-final at {args.speed:g}x, {consumer}, "
        "SIGKILL of node 1:"
    )
    print("  " + _figures("replayer publishing again", [r.replayer for r in rounds]))
    for client in args.clients:
        mine = [r.consumer for r in rounds if r.client == client]
        print("  " + _figures(f"{client} consumer handling new events again", mine))
    finals = {r.final for r in rounds}
    print(f"  final scores: {', '.join(sorted(finals))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
