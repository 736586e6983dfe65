"""`matchcast consume` (the plug-in host) against `mosquitto_sub`, side by side, in rounds.

    python benchmarks/consume_bench.py                   # spawns its own mosquitto
    python benchmarks/consume_bench.py --n 200000 --rounds 3 --client fast

One mosquitto of its own, configured not to drop (``max_queued_messages 0``,
``set_tcp_nodelay true``). Each round, on one stream of --n events of one match (JSON lines
of --size bytes, seq 1..n) published by ``mosquitto_pub -l`` (at QoS 1 in chunks of 50,000
lines, since its packet ids wrap at 65,535):

  C         ``mosquitto_sub`` receiving the stream: messages/s from the first publish to the
            last line read (the ceiling)
  consume   ``matchcast consume`` in a subprocess with a no-op plug-in that counts: events
            handled/s, timed the same way (the plug-in notes the monotonic time of the n-th
            event; CLOCK_MONOTONIC is one clock for every process here)
  consume with 10 plug-ins, each handling every event (QoS 0)

at QoS 0 and 1; at QoS 1 the plug-in also counts events lost, duplicated and out of order as
its handler sees them. Then once: the consumer's RSS (sampled from /proc every half second)
while ``matchcast load`` keeps --live-matches matches live at once.

Targets (issue 16): consume >= 0.5x C at QoS 0 and at QoS 1, >= 0.3x with 10 plug-ins,
memory flat, nothing lost, duplicated or reordered at QoS 1. Every ratio is against the C
clients of its own round; the table gives the median of the rounds and their range. The
machine is shared (2 cores, other work on it): one round proves little, and a figure can move
by a third between runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from load_bench import CHUNK, _event_lines, c_clients_fed, median
from rich.console import Console
from rich.table import Table

from events import Topics
from matchcast.logs import configure_logging
from matchcast.testing import Mosquitto, mosquitto_binary
from matchcast.transport.connection import BrokerURL

console = Console(width=max(Console().width, 120))
MATCH = "bench-match"

#: A plug-in that counts; ``{name}`` and the expected count come from the file name and env.
PLUGIN = textwrap.dedent(
    """
    import json, os, time
    from consumers import Subscriber
    from events import BaseEvent, MatchState

    OUT = os.environ["MCBENCH_OUT"]
    N = int(os.environ["MCBENCH_N"])
    sub = Subscriber("{name}")
    seen = {{"handled": 0, "last_seq": 0, "lost": 0, "dup": 0, "reordered": 0, "done_at": None}}

    @sub.on(BaseEvent)
    def count(event: BaseEvent, state: MatchState) -> None:
        seen["handled"] += 1
        seq = event.seq
        if seq == seen["last_seq"]:
            seen["dup"] += 1
        elif seq < seen["last_seq"]:
            seen["reordered"] += 1
        else:
            seen["lost"] += seq - seen["last_seq"] - 1
            seen["last_seq"] = seq
        if seen["handled"] == N:
            seen["done_at"] = time.monotonic()
            with open(OUT + ".{name}.done", "w") as f:
                f.write(str(seen["done_at"]))

    @sub.on_stop
    def report() -> None:
        with open(OUT + ".{name}.json", "w") as f:
            json.dump(seen, f)
    """
)


class Consume:
    """``matchcast consume`` with ``plugins`` counting plug-ins, in a subprocess."""

    def __init__(
        self,
        url: BrokerURL,
        root: str,
        qos: int,
        n: int,
        plugins: int,
        workdir: Path,
        client: str,
        match: str = MATCH,
    ) -> None:
        self.out = str(workdir / f"out-{uuid.uuid4().hex[:6]}")
        self.names = [f"count{i}" for i in range(plugins)]
        paths = []
        for name in self.names:
            path = workdir / f"{name}.py"
            path.write_text(PLUGIN.format(name=name))
            paths.append(str(path))
        env = {**os.environ, "MCBENCH_OUT": self.out, "MCBENCH_N": str(n)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "matchcast", "consume", *paths, "--broker", str(url),
             "--root", root, "--qos", str(qos), "--match", match, "--client", client,
             "--queue-size", "1000000", "--log-format", "json"],
            env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        assert self.proc.stderr is not None
        deadline = time.monotonic() + 60
        for line in self.proc.stderr:
            if b"consumer.started" in line:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("consume did not start")
        else:
            raise RuntimeError("consume exited before it subscribed")

    def wait_done(self, timeout: float) -> float | None:
        """When the slowest plug-in handled its n-th event (monotonic), or None on timeout."""
        deadline = time.monotonic() + timeout
        files = [Path(f"{self.out}.{name}.done") for name in self.names]
        while time.monotonic() < deadline:
            if all(f.exists() and f.read_text() for f in files):
                return max(float(f.read_text()) for f in files)
            time.sleep(0.05)
        return None

    def stop(self) -> list[dict[str, Any]]:
        """SIGTERM (drains, runs the stop hooks); each plug-in's final counts."""
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        out = []
        for name in self.names:
            path = Path(f"{self.out}.{name}.json")
            out.append(json.loads(path.read_text()) if path.exists() else {"handled": 0})
        return out


def event_files(n: int, size: int, workdir: Path, chunk: int) -> list[Path]:
    """The stream in files of ``chunk`` lines, one ``mosquitto_pub -l`` each.

    QoS 0 goes in one file: MQTT orders messages per connection only, so the tail of one
    publisher and the head of the next can arrive interleaved (measured: 7,416 of 100,000
    events out of order at a chunk boundary). QoS 1 must be chunked (packet ids wrap past
    65,535); there each publisher has every message acknowledged before it exits.
    """
    lines = _event_lines(n, size, MATCH)
    files = []
    for k, start in enumerate(range(0, n, chunk)):
        path = workdir / f"events-{n}-{size}-{chunk}-{k}.txt"
        if not path.exists():
            path.write_bytes(b"".join(lines[start : start + chunk]))
        files.append(path)
    return files


def consume_rate(
    url: BrokerURL, qos: int, n: int, files: list[Path], plugins: int, workdir: Path, client: str
) -> dict[str, Any]:
    root = f"bench-{uuid.uuid4().hex[:8]}"
    consumer = Consume(url, root, qos, n, plugins, workdir, client)
    topic = Topics(root).events(MATCH)
    base = ["-h", url.host, "-p", str(url.port), "-t", topic, "-q", str(qos)]
    try:
        t0 = time.monotonic()
        for path in files:
            with path.open("rb") as f:
                subprocess.run(["mosquitto_pub", *base, "-l"], stdin=f, check=True, timeout=600)
        done = consumer.wait_done(timeout=120)
    finally:
        counts = consumer.stop()
    slowest = min(counts, key=lambda c: c["handled"])
    if done is None:  # timed out: the rate of what was handled within the run
        return {"rate": 0.0, **slowest}
    return {"rate": n / (done - t0), **slowest}


def topic_for_c() -> str:
    return f"bench/c/{uuid.uuid4().hex[:8]}"


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def memory_live(
    url: BrokerURL, matches: int, workdir: Path, client: str, rate: int = 5000, seconds: int = 40
) -> dict[str, Any]:
    """The consumer's RSS while ``matchcast load`` keeps ``matches`` matches live at once
    (started over 5 s, finished ones replaced, ``rate`` events/s in all: within what the
    consumer handles on this machine, so what is measured is its state per match, not a
    backlog) for ``seconds``."""
    root = f"bench-{uuid.uuid4().hex[:8]}"
    consumer = Consume(url, root, 0, 10**12, 1, workdir, client, match="+")
    samples: list[tuple[float, float]] = []
    t0 = time.monotonic()
    feeder = subprocess.Popen(
        [sys.executable, "-m", "matchcast", "load", "--broker", str(url), "--client", "fast",
         "--subscribers", "0", "--qos", "0", "--matches", str(matches), "--rate", str(rate),
         "--ramp", "5", "--duration", str(seconds), "--root", root, "--tag", "mem",
         "--no-progress"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        while feeder.poll() is None:
            samples.append((time.monotonic() - t0, _rss_mb(consumer.proc.pid)))
            time.sleep(0.5)
        time.sleep(2)
        samples.append((time.monotonic() - t0, _rss_mb(consumer.proc.pid)))
    finally:
        if feeder.poll() is None:
            feeder.kill()
        feeder.wait()
        counts = consumer.stop()
    live = [mb for t, mb in samples if t >= 6]  # after the ramp: every match live
    return {
        "start_mb": samples[0][1],
        "live_first_mb": live[0] if live else 0.0,
        "peak_mb": max(mb for _, mb in samples),
        "end_mb": samples[-1][1],
        "seconds": samples[-1][0],
        "handled": counts[0]["handled"],
        "series": [(round(t), round(mb)) for t, mb in samples[::10]],
    }


C_ROW = "C: mosquitto_pub -l -> mosquitto_sub"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200_000, help="events per measurement")
    parser.add_argument("--size", type=int, default=300, help="bytes per event (padded)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--client", default="fast", help="consume's --client")
    parser.add_argument("--live-matches", type=int, default=10_000)
    parser.add_argument("--live-seconds", type=int, default=40, help="how long they stay live")
    parser.add_argument("--skip", default="", help="comma list of: plugins10,qos1,memory")
    args = parser.parse_args()
    configure_logging("console", "ERROR")
    skip = set(filter(None, args.skip.split(",")))
    binary = mosquitto_binary()
    if binary is None:
        sys.exit("mosquitto is not installed")
    broker = Mosquitto(binary, extra=["max_queued_messages 0", "set_tcp_nodelay true"]).start()
    url = BrokerURL.parse(broker.url)
    workdir = Path(tempfile.mkdtemp(prefix="mc-consumebench-"))
    feeds = {0: event_files(args.n, args.size, workdir, args.n),
             1: event_files(args.n, args.size, workdir, CHUNK)}  # fmt: skip
    rows: dict[str, dict[int, list[tuple[float, float]]]] = {}
    notes: list[str] = []

    def add(name: str, qos: int, rate: float, ceiling: float) -> None:
        rows.setdefault(name, {}).setdefault(qos, []).append((rate, rate / ceiling))

    try:
        for r in range(args.rounds):
            console.rule(f"round {r + 1} of {args.rounds}")
            for qos in (0, 1):
                if qos == 1 and "qos1" in skip:
                    continue
                files = feeds[qos]
                ceiling = c_clients_fed(url, qos, args.n, files, topic_for_c())
                add(C_ROW, qos, ceiling, ceiling)
                res = consume_rate(url, qos, args.n, files, 1, workdir, args.client)
                add(
                    f"matchcast consume --client {args.client}, 1 plug-in",
                    qos,
                    res["rate"],
                    ceiling,
                )
                line = (
                    f"  QoS {qos}: C {ceiling:,.0f}/s; consume {res['rate']:,.0f}/s "
                    f"({res['rate'] / ceiling:.2f}x), handled {res['handled']:,}, "
                    f"lost {res.get('lost')}, dup {res.get('dup')}, reordered {res.get('reordered')}"
                )
                console.print(line)
                notes.append(f"round {r + 1} {line.strip()}")
                if qos == 0 and "plugins10" not in skip:
                    res = consume_rate(url, 0, args.n, files, 10, workdir, args.client)
                    add(
                        f"matchcast consume --client {args.client}, 10 plug-ins",
                        0,
                        res["rate"],
                        ceiling,
                    )
                    console.print(
                        f"  QoS 0, 10 plug-ins: {res['rate']:,.0f}/s ({res['rate'] / ceiling:.2f}x), "
                        f"slowest handled {res['handled']:,}"
                    )
        table = Table(
            title=f"events/s, {args.n:,} events x {args.size} B, one mosquitto (no drops); "
            f"median of {args.rounds} rounds, each ratio against mosquitto_sub in its round"
        )
        for col in ("measure", "QoS 0", "x C", "range", "QoS 1", "x C", "range"):
            table.add_column(col, justify="left" if col == "measure" else "right")
        for name, per_qos in rows.items():
            cells = [name]
            for qos in (0, 1):
                got = per_qos.get(qos, [])
                if not got:
                    cells += ["", "", ""]
                    continue
                ratios = [x for _, x in got]
                cells += [f"{median([v for v, _ in got]):,.0f}", f"{median(ratios):.2f}",
                          f"{min(ratios):.2f}-{max(ratios):.2f}"]  # fmt: skip
            table.add_row(*cells)
        console.print(table)
        for note in notes:
            console.print(f"[dim]{note}[/]")
        if "memory" not in skip:
            console.print(f"[dim]consumer RSS with {args.live_matches:,} matches live[/]")
            mem = memory_live(
                url, args.live_matches, workdir, args.client, seconds=args.live_seconds
            )
            console.print(
                f"consumer RSS, {args.live_matches:,} matches live at once: start "
                f"{mem['start_mb']:.0f} MB, all live {mem['live_first_mb']:.0f} MB, peak "
                f"{mem['peak_mb']:.0f} MB, end {mem['end_mb']:.0f} MB over {mem['seconds']:.0f} s; "
                f"{mem['handled']:,} events handled (fed at 5,000 events/s)"
            )
            console.print(f"[dim]RSS every 5 s (s, MB): {mem['series']}[/]")
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
