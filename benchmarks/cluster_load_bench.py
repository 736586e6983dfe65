"""`matchcast load` on a 3-node NATS cluster beside a single mosquitto, in one run, in rounds.

Issue 15 asks for `load` figures "on the NATS cluster beside a single mosquitto, measured in
one run". This starts both (the NATS cluster of `tests/_clusters.py`: 3 nodes, JetStream, MQTT
with `stream_replicas: 3`; a mosquitto of `matchcast.testbroker`), then runs the same
`matchcast load` command on each, alternating, ``--rounds`` times, and prints each run and the
median of each engine, with NATS as a fraction of mosquitto:

    python benchmarks/cluster_load_bench.py --rounds 3
    python benchmarks/cluster_load_bench.py --rounds 3 --qos 0 --client aiomqtt
    python benchmarks/cluster_load_bench.py --rounds 3 --no-states   # events only

Each run is `matchcast load --broker LIST --matches K --subscribers 3 --publishers 3 --qos Q
--speed max --client C --report FILE` (on NATS, LIST names the three nodes, so `load` puts one
publisher and one probe on each). The figures are the report's: published and delivered
events/s, lost, duplicates and the p99 latency. A `load` exit code of 3 (a failed check: an
event lost) is shown, not fatal: NATS 2.9 drops QoS 1 deliveries now and then (docs/cluster.md).
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from matchcast.testbroker import Mosquitto, mosquitto_binary

ROOT = Path(__file__).resolve().parent.parent


def _load(broker: str, args: argparse.Namespace, report: Path) -> tuple[int, dict[str, Any]]:
    """One `matchcast load` run; its exit code and report."""
    argv = [sys.executable, "-m", "matchcast", "load", "--broker", broker]
    argv += ["--matches", str(args.matches), "--subscribers", "3", "--publishers", "3"]
    argv += ["--qos", str(args.qos), "--speed", "max", "--client", args.client]
    argv += ["--no-progress", "--report", str(report), "--root", f"clb{report.stem}"]
    if not args.states:
        argv.append("--no-states")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=args.timeout, check=False)
    if not report.exists():
        raise SystemExit(f"load wrote no report (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return done.returncode, json.loads(report.read_text())


def _figures(report: dict[str, Any]) -> dict[str, float]:
    delivery = report["delivery"]
    return {
        "published/s": report["sender"]["achieved_events_per_s"],
        "delivered/s": delivery["delivered_events_per_s"],
        "lost": delivery["lost"],
        "duplicates": delivery["duplicates"],
        "p99 ms": report["latency_ms"]["p99"],
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--matches", type=int, default=10)
    ap.add_argument("--qos", type=int, choices=[0, 1], default=1)
    ap.add_argument("--client", choices=["fast", "aiomqtt"], default="fast")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per load run")
    ap.add_argument(
        "--states",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="publish each event's retained state too, as a replayer does (load's default)",
    )
    args = ap.parse_args(argv)
    binary = mosquitto_binary()
    if binary is None:
        raise SystemExit("mosquitto is not installed")
    sys.path.insert(0, str(ROOT))
    nats = importlib.import_module("tests._clusters").NatsCluster().start()
    mosquitto = Mosquitto(binary).start()
    engines = {"NATS, 3 nodes": nats.broker_list, "mosquitto": mosquitto.url}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in engines}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for n in range(1, args.rounds + 1):
                for i, (name, broker) in enumerate(engines.items()):
                    code, report = _load(broker, args, Path(tmp) / f"r{n}e{i}.json")
                    got = _figures(report)
                    runs[name].append(got)
                    shown = ", ".join(f"{k} {v:,.1f}" for k, v in got.items())
                    print(f"round {n}, {name}: {shown} (exit {code})", flush=True)
    finally:
        nats.stop()
        mosquitto.stop()
    print(
        f"\nmedians of {args.rounds} rounds, {args.matches} semi-finals at --speed max, QoS "
        f"{args.qos}, 3 publishers, 3 probes, --client {args.client}"
        f"{'' if args.states else ', --no-states'}:"
    )
    keys = list(next(iter(runs.values()))[0])
    print("| | " + " | ".join(keys) + " |")
    print("|---" * (len(keys) + 1) + "|")
    medians = {
        name: {k: statistics.median(r[k] for r in rs) for k in keys} for name, rs in runs.items()
    }
    for name, m in medians.items():
        print(f"| {name} | " + " | ".join(f"{m[k]:,.1f}" for k in keys) + " |")
    nats_m, mosq_m = medians["NATS, 3 nodes"], medians["mosquitto"]
    for k in ("published/s", "delivered/s"):
        ratios = [
            a[k] / b[k] for a, b in zip(runs["NATS, 3 nodes"], runs["mosquitto"], strict=True)
        ]
        print(
            f"NATS/mosquitto {k}: median {statistics.median(ratios):.2f}x "
            f"(rounds: {', '.join(f'{r:.2f}' for r in ratios)}; medians "
            f"{nats_m[k]:,.0f} vs {mosq_m[k]:,.0f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
