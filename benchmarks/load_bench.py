"""`matchcast load` against the C-client ceiling, aiomqtt and the fast client, side by side.

    python benchmarks/load_bench.py                  # spawns its own mosquitto
    python benchmarks/load_bench.py --n 200000 --size 300 --broker mqtt://127.0.0.1:18830

One broker, one publisher and one subscriber each, payloads of --size bytes,
delivered messages/s counted by the subscriber from the first publish to the last delivery:

  c        mosquitto_pub -l into mosquitto_sub (QoS 1 fed in chunks of 50,000 lines, since
           mosquitto_pub's packet ids wrap at 65,535)
  aiomqtt  a raw aiomqtt publish loop (100 in flight) into an aiomqtt subscriber, one process
  fast     a raw FastClient publish loop into a FastClient subscriber, one process
  load     `matchcast load --client fast --no-states` (real events padded to --size; its probe
           does the full per-stream accounting and latency), one process; and again with
           `--probe-workers 1`, the sender and the probe in two processes as the C clients are
  runner   the consumer runner (decode, dedup, reducer, dispatch to a no-op handler) on a
           FastClient: events handled/s, fed by mosquitto_pub -l (the same feeder as the C
           row, so the consumer is the only difference) and by `matchcast load` in another
           process (a Python feeder sharing the two cores)
  memory   `matchcast load --matches 1000 --speed 600 --ramp 2` in a child process: peak RSS

With --baseline FILE (a copy of another version's matchcast/transport/fastmqtt.py), each round
also runs that fast client's raw loop and C-fed runner, in turn with this one's (which goes
first alternates by round): a change to the fast client measured against what it replaces,
on the same broker in the same run. --fast-protocols 5 3.1.1 runs the raw loops in each
version; --skip load,aiomqtt,memory leaves only the C clients and the fast client's rows.

Each of --rounds rounds (default 3) measures the C clients, then everything else; every ratio
is against the C clients of its own round, and the table gives the median figure, the median
ratio and the range of the ratios. One round
can land far from the others on a shared 2-core machine (the C ceiling itself moved 90k-125k
msg/s between rounds here), so a single round proves little either way. Targets (issue 4):
load >= 0.8x C at QoS 0 and 1; runner >= 0.5x C at QoS 0; 1,000 matches under 300 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiomqtt
from rich.console import Console
from rich.table import Table

from consumers import Runner, Subscriber
from events import BaseEvent, MatchState, Topics
from matchcast.cli.load import make_factory
from matchcast.load import LoadOptions, LoadRun, LoadShape, MatchTemplate, build_report
from matchcast.logs import configure_logging
from matchcast.testing import Mosquitto, mosquitto_binary
from matchcast.transport.clients import ClientKind
from matchcast.transport.connection import BrokerURL
from matchcast.transport.fastmqtt import FastClient
from simulator import resolve_matches

console = Console(width=max(Console().width, 130))
CHUNK = 50_000


def payload(i: int, size: int) -> bytes:
    head = b'{"seq":%010d,"match":"m-1","type":"clock","pad":"' % i
    return head + b"x" * (size - len(head) - 2) + b'"}'


def c_clients(url: BrokerURL, qos: int, n: int, size: int, workdir: Path) -> float:
    files = []
    for start in range(0, n, CHUNK):
        path = workdir / f"lines-{size}-{start}.txt"
        if not path.exists():
            with path.open("wb") as f:
                for i in range(start, min(n, start + CHUNK)):
                    f.write(payload(i, size) + b"\n")
        files.append(path)
    return c_clients_fed(url, qos, n, files, f"bench/c/{uuid.uuid4().hex[:8]}")


def c_clients_fed(url: BrokerURL, qos: int, n: int, files: list[Path], topic: str) -> float:
    """Messages/s ``mosquitto_sub`` receives of the ``n`` lines in ``files``, each file fed to
    one ``mosquitto_pub -l`` in turn, timed from the first publish to the last line read."""
    base = ["-h", url.host, "-p", str(url.port), "-t", topic, "-q", str(qos)]
    sub = subprocess.Popen(["mosquitto_sub", *base], stdout=subprocess.PIPE)
    state = {"lines": 0, "last": 0.0}
    done = threading.Event()

    def reader() -> None:
        assert sub.stdout is not None
        fd = sub.stdout.fileno()
        while chunk := os.read(fd, 1 << 16):
            state["lines"] += chunk.count(b"\n")
            state["last"] = time.monotonic()
            if state["lines"] >= n + 1:
                done.set()

    threading.Thread(target=reader, daemon=True).start()
    while not state["lines"]:  # wait until the subscription is live
        subprocess.run(["mosquitto_pub", *base, "-m", "ready"], check=True)
        time.sleep(0.1)
    state["lines"] -= 1
    t0 = time.monotonic()
    for path in files:
        with path.open("rb") as f:
            subprocess.run(["mosquitto_pub", *base, "-l"], stdin=f, check=True, timeout=600)
    done.wait(timeout=30)
    sub.kill()
    sub.wait()
    got = state["lines"] - 1
    return got / (state["last"] - t0) if got > 0 else 0.0


async def raw_aiomqtt(url: BrokerURL, qos: int, n: int, size: int) -> float:
    topic = f"bench/aio/{uuid.uuid4().hex[:8]}"
    data = [payload(i, size) for i in range(n)]
    got = 0
    last = 0.0
    async with aiomqtt.Client(url.host, url.port, max_queued_incoming_messages=0) as sub:
        await sub.subscribe(topic, qos=qos)

        async def count() -> None:
            nonlocal got, last
            async for _ in sub.messages:
                got += 1
                last = time.monotonic()
                if got >= n:
                    return

        counter = asyncio.ensure_future(count())
        async with aiomqtt.Client(url.host, url.port, max_inflight_messages=100) as pub:
            pub.pending_calls_threshold = 1_000_000
            t0 = time.monotonic()
            for i in range(0, n, 100):
                await asyncio.gather(*(pub.publish(topic, p, qos=qos) for p in data[i : i + 100]))
            try:
                async with asyncio.timeout(30):
                    await counter
            except TimeoutError:
                pass
    return got / (last - t0)


async def raw_fast(
    url: BrokerURL, qos: int, n: int, size: int, client: Any = FastClient, protocol: str = "auto"
) -> float:
    topic = f"bench/fast/{uuid.uuid4().hex[:8]}"
    data = [payload(i, size) for i in range(n)]
    got = 0
    last = 0.0
    async with client(url, protocol=protocol) as sub, client(url, protocol=protocol) as pub:
        await sub.subscribe(topic, qos=qos)

        async def count() -> None:
            nonlocal got, last
            async for _ in sub.messages():
                got += 1
                last = time.monotonic()
                if got >= n:
                    return

        counter = asyncio.ensure_future(count())
        t0 = time.monotonic()
        pending: list[asyncio.Future[None]] = []
        for i, p in enumerate(data):
            fut = pub.publish_nowait(topic, p, qos, False)
            if fut is not None:
                pending.append(fut)
            if len(pending) >= 1000 or (i % 256 == 0 and not pending):
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
        try:
            async with asyncio.timeout(30):
                await counter
        except TimeoutError:
            pass
    return got / (last - t0)


def _delivery(report: dict[str, Any]) -> dict[str, object]:
    """What a load run's report says was delivered: rate, loss, duplicates, p99 latency."""
    d = report["delivery"]
    return {
        "rate": d["delivered_events_per_s"],
        "lost": d["lost"],
        "dup": d["duplicates"],
        "p99": report["latency_ms"]["p99"],
    }


async def load_run(url: BrokerURL, qos: int, n: int, size: int, client: str) -> dict[str, object]:
    template = MatchTemplate.build(resolve_matches("semifinal")[0])
    matches = max(1, n // len(template))
    shape = LoadShape(matches=matches, qos=qos, payload_size=size, states=False)
    options = LoadOptions(shape=shape, topics=Topics(f"bench-{uuid.uuid4().hex[:8]}"))
    run = LoadRun(options, [template], make_factory(ClientKind(client), url))
    await run.run()
    report = build_report(run, {})
    return _delivery(report)


#: Runs argv[2:] and writes its peak RSS (KiB) to argv[1]: RUSAGE_CHILDREN of this script
#: would give the largest child it ever ran, not this one.
_PEAK_RSS = (
    "import resource, subprocess, sys\n"
    "subprocess.run(sys.argv[2:], check=True, stdout=subprocess.DEVNULL)\n"
    "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
)


def load_cli(url: BrokerURL, *args: str, peak_rss: bool = False) -> dict[str, Any]:
    """The JSON report of ``matchcast load --broker URL --client fast ARGS`` run as a child;
    with ``peak_rss``, also that child's peak RSS in MB under ``"peak_rss_mb"``."""
    with tempfile.TemporaryDirectory() as tmp:
        out, rss = Path(tmp) / "r.json", Path(tmp) / "rss"
        cmd = [sys.executable, "-m", "matchcast", "load", "--broker", str(url), "--client",
               "fast", *args, "--no-progress", "--report", str(out)]  # fmt: skip
        if peak_rss:
            cmd = [sys.executable, "-c", _PEAK_RSS, str(rss), *cmd]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        report: dict[str, Any] = json.loads(out.read_text())
        if peak_rss:
            report["peak_rss_mb"] = int(rss.read_text()) / 1024
    return report


def load_two_processes(url: BrokerURL, qos: int, n: int, size: int) -> dict[str, object]:
    """`matchcast load --probe-workers 1`: the sender and the probe in two processes, as the
    C clients are (started through the command line; the rate is timed by the probe)."""
    report = load_cli(
        url, "--matches", str(max(1, n // _semifinal_events())), "--subscribers", "1",
        "--probe-workers", "1",
        "--no-states", "--qos", str(qos), "--payload-size", str(size),
        "--root", f"bench-{uuid.uuid4().hex[:8]}",
    )  # fmt: skip
    return _delivery(report)


async def _runner_rate(
    url: BrokerURL,
    topics: Topics,
    expected: int,
    feed: Callable[[], Awaitable[None]],
    *,
    from_first_event: bool = False,
    client: Any = FastClient,
    **runner: Any,
) -> dict[str, float]:
    """Run the consumer runner (a no-op handler) on a FastClient while ``feed()`` publishes;
    events/s up to the ``expected``-th event handled, from the start of ``feed()`` (as the C
    ceiling is timed) or from the first event handled (a feeder that takes seconds to start)."""
    handled = 0
    first = last = 0.0
    done = asyncio.Event()
    sub = Subscriber("noop")

    @sub.on(BaseEvent)
    def count(event: BaseEvent, state: MatchState) -> None:
        nonlocal handled, first, last
        handled += 1
        last = time.monotonic()
        if handled == 1:
            first = last
        if handled >= expected:
            done.set()

    consumer = Runner([sub], topics=topics, queue_size=100_000, **runner)
    async with client(url) as source:
        task = asyncio.ensure_future(consumer.run(source, qos=0))
        await consumer.subscribed.wait()
        t0 = time.monotonic()
        await feed()
        try:
            async with asyncio.timeout(60):
                await done.wait()
        except TimeoutError:
            pass
        consumer.stop()
        await task
    start = first if from_first_event else t0
    return {"rate": handled / (last - start) if last > start else 0.0, "handled": handled,
            "gaps": consumer.stats.gaps, "rejected": consumer.stats.rejected}  # fmt: skip


def _semifinal_events() -> int:
    """Events per match of ``matchcast load``'s default: the semi-final's stream."""
    from matchcast.testing import match_events  # noqa: PLC0415

    return len(match_events("semifinal"))


async def runner_rate(url: BrokerURL, n: int, size: int) -> dict[str, float]:
    """The runner fed by ``matchcast load`` (Python, sharing the machine's cores)."""
    topics = Topics(f"bench-{uuid.uuid4().hex[:8]}")
    per_match = _semifinal_events()
    matches = max(1, n // per_match)

    async def feed() -> None:
        feeder = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "matchcast", "load", "--broker", str(url), "--client", "fast",
            "--subscribers", "0", "--no-states", "--qos", "0", "--matches", str(matches),
            "--payload-size", str(size), "--root", topics.root, "--no-progress",
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        await feeder.wait()

    return await _runner_rate(url, topics, matches * per_match, feed, from_first_event=True)


def _event_lines(n: int, size: int, match_id: str) -> list[bytes]:
    """One match of ``n`` events, seq 1..n (clocks cycling through the semi-final's, its full
    time left out), each a
    JSON line padded with trailing whitespace to ``size`` bytes like the C clients' payloads."""
    from events import encode_event  # noqa: PLC0415
    from matchcast.testing import match_events  # noqa: PLC0415

    # Without full time: a consumer refuses every event of a run after its full time, and the
    # stream goes on far past the semi-final's events.
    template = [e for e in match_events("semifinal") if e.type != "full_time"]
    lines = []
    for i in range(n):
        event = template[i % len(template)].model_copy(update={"match_id": match_id, "seq": i + 1})
        line = encode_event(event)
        lines.append(line + b" " * max(0, size - len(line)) + b"\n")
    return lines


async def runner_rate_c_fed(
    url: BrokerURL, n: int, size: int, workdir: Path, client: Any = FastClient
) -> dict[str, float]:
    """The runner fed by the same C publisher as the ceiling (``mosquitto_pub -l``), so the
    consumer is the only difference between the two rows."""
    topics = Topics(f"bench-{uuid.uuid4().hex[:8]}")
    match_id = "bench-match"
    lines = _event_lines(n, size, match_id)
    files = []
    for k, start in enumerate(range(0, n, CHUNK)):  # packet ids wrap past 65,535: chunks
        path = workdir / f"events-{size}-{k}.txt"
        path.write_bytes(b"".join(lines[start : start + CHUNK]))
        files.append(path)
    base = ["-h", url.host, "-p", str(url.port), "-t", topics.events(match_id), "-q", "0"]

    async def feed() -> None:
        for path in files:
            with path.open("rb") as f:
                proc = await asyncio.create_subprocess_exec("mosquitto_pub", *base, "-l", stdin=f)
                await proc.wait()

    return await _runner_rate(url, topics, n, feed, match_filter=match_id, client=client)


def memory_1000(url: BrokerURL) -> dict[str, float]:
    t0 = time.monotonic()
    report = load_cli(
        url, "--matches", "1000", "--speed", "600", "--ramp", "2", "--subscribers", "1",
        "--qos", "0", peak_rss=True,
    )  # fmt: skip
    return {
        "peak_mb": report["peak_rss_mb"],
        "seconds": time.monotonic() - t0,
        "events": report["sender"]["events_published"],
        "lost": report["delivery"]["lost"],
        "overruns": report["sender"]["overruns"],
        "p99": report["latency_ms"]["p99"],
    }


C_ROW = "C clients (mosquitto_pub -l -> mosquitto_sub)"
LOAD_SPLIT = "matchcast load --probe-workers 1 (sender, probe: 2 processes)"
RUNNER_C = "consumer runner, fed by mosquitto_pub (no-op handler)"
RUNNER_LOAD = "consumer runner, fed by matchcast load (no-op handler)"


def load_baseline(path: str) -> Any:
    """The ``FastClient`` of another version of the fast client, from ``path``: a copy of its
    ``matchcast/transport/fastmqtt.py`` (importing what it needs from this checkout)."""
    import importlib.util  # noqa: PLC0415

    spec = importlib.util.spec_from_file_location("fastmqtt_baseline", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.FastClient


def fast_rows(
    url: BrokerURL, args: argparse.Namespace, qos: int, rnd: int, workdir: Path
) -> tuple[dict[str, float], dict[str, str]]:
    """The fast client's raw loop in each of --fast-protocols, and with --baseline the same
    beside the baseline's, in turn (the current one first in even rounds, last in odd ones);
    the C-fed consumer runner on each at QoS 0."""
    clients: list[tuple[str, Any]] = [("FastClient", FastClient)]
    if args.baseline:
        clients.append(("baseline FastClient", load_baseline(args.baseline)))
        if rnd % 2:
            clients.reverse()
    rows: dict[str, float] = {}
    notes: dict[str, str] = {}
    for protocol in args.fast_protocols:
        for name, client in clients:
            label = f"{name} raw loop" + ("" if protocol == "auto" else f" ({protocol})")
            console.print(f"[dim]QoS {qos}: {label}[/]")
            rows[label] = asyncio.run(raw_fast(url, qos, args.n, args.size, client, protocol))
    if args.baseline and qos == 0 and "runner" not in args.skip_set:
        for name, client in clients:
            console.print(f"[dim]consumer runner on {name}, fed by mosquitto_pub[/]")
            rc = asyncio.run(runner_rate_c_fed(url, args.n, args.size, workdir, client))
            rows[f"runner on {name}, C-fed"] = rc["rate"]
            notes[f"runner on {name}"] = f"handled {rc['handled']:,}, gaps {rc['gaps']}"
    return rows, notes


def one_round(
    url: BrokerURL, args: argparse.Namespace, skip: set[str], workdir: Path, rnd: int = 0
) -> tuple[dict[str, dict[int, float]], dict[str, str]]:
    """Every measure once: at each QoS the C clients first, then the rest."""
    rows: dict[str, dict[int, float]] = {}
    notes: dict[str, str] = {}
    for qos in (0, 1):
        console.print(f"[dim]QoS {qos}: C clients[/]")
        rows.setdefault(C_ROW, {})[qos] = c_clients(url, qos, args.n, args.size, workdir)
        if "aiomqtt" not in skip:
            console.print(f"[dim]QoS {qos}: aiomqtt[/]")
            small = min(args.n, 30_000)
            rows.setdefault("aiomqtt 2.x raw loop", {})[qos] = asyncio.run(
                raw_aiomqtt(url, qos, small, args.size)
            )
        fast, fast_notes = fast_rows(url, args, qos, rnd, workdir)
        for name, rate in fast.items():
            rows.setdefault(name, {})[qos] = rate
        notes.update(fast_notes)
        if "load" in skip:
            continue
        console.print(f"[dim]QoS {qos}: matchcast load --client fast[/]")
        res = asyncio.run(load_run(url, qos, args.n, args.size, "fast"))
        rows.setdefault("matchcast load --client fast", {})[qos] = float(res["rate"])  # type: ignore[arg-type]
        notes[f"load qos{qos}"] = f"lost {res['lost']}, dup {res['dup']}, p99 {res['p99']} ms"
        console.print(f"[dim]QoS {qos}: matchcast load --probe-workers 1[/]")
        res = load_two_processes(url, qos, args.n, args.size)
        rows.setdefault(LOAD_SPLIT, {})[qos] = float(res["rate"])  # type: ignore[arg-type]
        notes[f"load --probe-workers 1 qos{qos}"] = (
            f"lost {res['lost']}, dup {res['dup']}, p99 {res['p99']} ms"
        )
    if "runner" not in skip and not args.baseline:  # with one, fast_rows runs it on both
        console.print("[dim]consumer runner, fed by mosquitto_pub[/]")
        rc = asyncio.run(runner_rate_c_fed(url, args.n, args.size, workdir))
        rows[RUNNER_C] = {0: rc["rate"]}
        notes["runner (C-fed)"] = (
            f"handled {rc['handled']:,}, gaps {rc['gaps']}, rejected {rc['rejected']}"
        )
        console.print("[dim]consumer runner, fed by matchcast load[/]")
        rr = asyncio.run(runner_rate(url, args.n, args.size))
        rows[RUNNER_LOAD] = {0: rr["rate"]}
        notes["runner (load-fed)"] = f"handled {rr['handled']:,}, gaps {rr['gaps']}"
    return rows, notes


def print_against_baseline(rounds: list[dict[str, dict[int, float]]]) -> None:
    """Each fast-client row against the baseline's row of the same round: median and range."""
    for name in rounds[0]:
        other = name.replace("FastClient", "baseline FastClient", 1)
        if name.startswith("baseline") or other == name or other not in rounds[0]:
            continue
        for qos in (0, 1):
            ratios = [rd[name][qos] / rd[other][qos] for rd in rounds
                      if qos in rd.get(name, {}) and rd[other].get(qos)]  # fmt: skip
            if ratios:
                console.print(
                    f"{name}, QoS {qos}: x baseline {median(ratios):.2f} "
                    f"({min(ratios):.2f}-{max(ratios):.2f}) over {len(ratios)} rounds"
                )


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", help="mqtt://host:port (default: spawn a mosquitto)")
    parser.add_argument("--n", type=int, default=100_000, help="messages per measurement")
    parser.add_argument("--size", type=int, default=300, help="payload bytes")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every measure")
    parser.add_argument("--skip", default="", help="comma list of: aiomqtt,load,runner,memory")
    parser.add_argument(
        "--fast-protocols",
        nargs="+",
        default=["auto"],
        choices=["auto", "5", "3.1.1"],
        help="the fast client's raw loop in each of these MQTT versions",
    )
    parser.add_argument(
        "--baseline",
        help="another fast client to measure beside this one, in turn, in every round: a copy "
        "of its matchcast/transport/fastmqtt.py (git show REF:matchcast/transport/fastmqtt.py "
        "> /tmp/base.py); its raw loop and C-fed runner rows are added",
    )
    args = parser.parse_args()
    configure_logging("console", "ERROR")
    skip = set(filter(None, args.skip.split(",")))
    args.skip_set = skip
    broker = None
    if args.broker:
        url = BrokerURL.parse(args.broker)
    else:
        binary = mosquitto_binary()
        if binary is None:
            sys.exit("mosquitto is not installed")
        broker = Mosquitto(binary, extra=["max_queued_messages 1000000"]).start()
        url = BrokerURL.parse(broker.url)
    workdir = Path(tempfile.mkdtemp(prefix="mc-loadbench-"))
    try:
        rounds: list[dict[str, dict[int, float]]] = []
        for r in range(args.rounds):
            console.rule(f"round {r + 1} of {args.rounds}")
            rows, notes = one_round(url, args, skip, workdir, r)
            rounds.append(rows)
            for name, vals in rows.items():
                figures = ", ".join(
                    f"QoS {q} {v:,.0f} ({v / rows[C_ROW][q]:.2f}x)" for q, v in vals.items()
                )
                console.print(f"  {name}: {figures}")
            for k, v in notes.items():
                console.print(f"  {k}: {v}")
        table = Table(
            title=f"delivered msg/s, {args.n:,} x {args.size} B, one broker; median of "
            f"{args.rounds} rounds, each ratio against the C clients of its own round"
        )
        for col in ("measure", "QoS 0", "x C", "x C range", "QoS 1", "x C", "x C range"):
            table.add_column(col, justify="right" if col != "measure" else "left")
        for name in rounds[0]:
            cells = [name]
            for qos in (0, 1):
                got = [(rd[name][qos], rd[name][qos] / rd[C_ROW][qos]) for rd in rounds
                       if qos in rd.get(name, {})]  # fmt: skip
                if not got:
                    cells += ["", "", ""]
                    continue
                ratios = [x for _, x in got]
                cells += [f"{median([v for v, _ in got]):,.0f}", f"{median(ratios):.2f}",
                          f"{min(ratios):.2f}-{max(ratios):.2f}"]  # fmt: skip
            table.add_row(*cells)
        console.print(table)
        if args.baseline:
            print_against_baseline(rounds)
        if "memory" not in skip:
            console.print("[dim]1,000 matches at --speed 600 --ramp 2[/]")
            mem = memory_1000(url)
            console.print(
                f"1,000 concurrent matches, one process: peak RSS {mem['peak_mb']:.0f} MB, "
                f"{mem['events']:,} events in {mem['seconds']:.1f} s, lost {mem['lost']}, "
                f"overruns {mem['overruns']}, p99 {mem['p99']} ms"
            )
    finally:
        if broker is not None:
            broker.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
