"""What the live figures cost the load sender: ``matchcast load`` with ``--live json`` (a row
of figures computed and written each second) against the same run with ``--live none``.

Alternating pairs against one mosquitto of its own, each run ``--speed max --matches K
--duration S`` (a throughput test: the sender as fast as it goes), and the median of each
side's ``achieved_events_per_s`` and their ratio:

    python benchmarks/load_live_bench.py                  # 5 pairs, 100 matches, 5 s
    python benchmarks/load_live_bench.py --pairs 7 --extra=--abort-on-fail --extra=--check \\
        --extra='p99 < 10s'                               # checks evaluated each second too

The target: the live figures cost at most 5% of the sender's rate (ratio >= 0.95).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from matchcast.testing import Mosquitto, mosquitto_binary


def _run(url: str, live: str, args: argparse.Namespace, out: Path) -> float:
    argv = [sys.executable, "-m", "matchcast", "load", "--broker", url, "--speed", "max",
            "--matches", str(args.matches), "--duration", str(args.duration),
            "--report", str(out)]  # fmt: skip
    baseline = live == "none" and args.compare is not None
    argv += ["--no-progress"] if baseline else ["--live", live, *args.extra]
    subprocess.run(
        argv,
        cwd=args.compare if baseline else Path(__file__).resolve().parent.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "MATCHCAST_BROKER": ""},
        check=False,
        timeout=300,
    )
    return float(json.loads(out.read_text())["sender"]["achieved_events_per_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--matches", type=int, default=100)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--extra", action="append", default=[], help="more load arguments")
    parser.add_argument("--compare", type=Path, help="a checkout to run the other side from")
    args = parser.parse_args()
    binary = mosquitto_binary()
    if binary is None:
        sys.exit("mosquitto is not installed")
    broker = Mosquitto(binary, extra=["max_queued_messages 1000000"]).start()
    rates: dict[str, list[float]] = {"none": [], "json": []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for pair in range(args.pairs):
                order = ("none", "json") if pair % 2 == 0 else ("json", "none")
                for live in order:
                    rates[live].append(_run(broker.url, live, args, Path(tmp) / "r.json"))
                print(f"pair {pair + 1}: none {rates['none'][-1]:,.0f}/s  "
                      f"json {rates['json'][-1]:,.0f}/s", flush=True)  # fmt: skip
    finally:
        broker.stop()
    none, live = statistics.median(rates["none"]), statistics.median(rates["json"])
    other = f"{args.compare}" if args.compare else "--live none"
    print(f"median events/s sent: {other} {none:,.0f}, --live json {live:,.0f}; "
          f"ratio {live / none:.3f} (target >= 0.95)")  # fmt: skip


if __name__ == "__main__":
    main()
