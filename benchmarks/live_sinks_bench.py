"""What the live outputs of `matchcast load` cost the sender: the dashboard (with browsers
streaming it), the Prometheus metrics (scraped each second) and the HTML report.

    python benchmarks/live_sinks_bench.py                  # 5 pairs of 5 s runs
    python benchmarks/live_sinks_bench.py --pairs 7 --seconds 8 --streams 5

A sender-like loop runs in this process: it encodes the semi-final's events one after the other
(the sender's per-event work, without the socket), yields to the event loop every 64 events as
the sender does, and at each wall-clock second builds that second's row and hands it to the
sinks. Each pair runs the loop once without sinks and once with them, alternating which goes
first; the figure is events encoded per second. With sinks, a child process plays the
watchers: --streams SSE streams on the dashboard (each reading every second) and one scrape of
/metrics a second, as Prometheus would. The watchers run on the same machine, so their CPU
counts against the sender (a conservative figure on a small machine). The HTML report is
written once at the end of each run with sinks; its time is printed apart.

Prints the median events/s of each side, the ratio with/without per pair and its median
(target: at least 0.95), and the same ratio by this process's CPU time per event, which the
other work of a shared machine moves much less than the wall-clock rate.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from events import encode_event
from matchcast.load._dashboard import Dashboard
from matchcast.load._live import LiveSink
from matchcast.load._live_metrics import LoadMetrics
from matchcast.load._report_html import HtmlReport
from simulator import expand, resolve_matches

#: Seconds spent in the sinks' second() calls, one entry a call round (with sinks only).
IN_SECOND: list[float] = []
EVENTS = [s.event for s in expand(resolve_matches("semifinal")[0])]

WATCHER = textwrap.dedent(
    """
    import asyncio, sys, aiohttp

    async def stream(http, url):
        async with http.get(url) as resp:
            async for _ in resp.content.iter_any():
                pass

    async def scrape(http, url):
        while True:
            async with http.get(url) as resp:
                await resp.read()
            await asyncio.sleep(1)

    async def main(dash, metrics, n):
        async with aiohttp.ClientSession() as http:
            tasks = [stream(http, dash + "events") for _ in range(n)]
            await asyncio.gather(scrape(http, metrics), *tasks)

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
    """
)


def row(t: int, sent: int, nodes: int) -> dict[str, Any]:
    return {
        "kind": "matchcast-load-second",
        "t": t,
        "offered": sent,
        "sent": sent,
        "delivered": 2 * sent,
        "latency_p50": 1.2,
        "latency_p99": 4.5,
        "latency_max": 11.0,
        "sender_lag_ms": 0.3,
        "lost": 0,
        "duplicates": 0,
        "reordered": 0,
        "live_matches": 200,
        "subscribers": 2,
        "connections": 3,
        "nodes": {
            f"mqtt://node{i}:1883": {"delivered": sent // nodes, "latency_p99": 4.4}
            for i in range(nodes)
        }
        if nodes > 1
        else {},
    }


async def sender_loop(
    seconds: float, sinks: list[LiveSink], nodes: int
) -> tuple[float, float, list[dict[str, Any]]]:
    """Encode events for ``seconds``; each second, a row to every sink. Returns events/s,
    this process's CPU microseconds per event (the sinks' work included), and the rows."""
    loop = asyncio.get_running_loop()
    cpu0 = time.process_time()
    start = loop.time()
    end = start + seconds
    next_tick = start + 1.0
    total = in_second = t = 0
    rows = []
    n = len(EVENTS)
    while True:
        for _ in range(64):
            encode_event(EVENTS[total % n])
            total += 1
        in_second += 64
        now = loop.time()
        if now >= next_tick:
            r = row(t, in_second, nodes)
            rows.append(r)
            t0 = time.perf_counter()
            for sink in sinks:
                sink.second(r)
            IN_SECOND.append(time.perf_counter() - t0)
            t += 1
            in_second = 0
            next_tick += 1.0
        if now >= end:
            break
        await asyncio.sleep(0)
    cpu_us = (time.process_time() - cpu0) * 1e6 / total
    return total / (loop.time() - start), cpu_us, rows


async def one_run(
    with_sinks: bool, args: argparse.Namespace, tmp: Path
) -> tuple[float, float, float]:
    """Events/s, CPU us per event, and the HTML report's writing time (s) of one run."""
    if not with_sinks:
        rate, cpu_us, _ = await sender_loop(args.seconds, [], args.nodes)
        return rate, cpu_us, 0.0
    dash, metrics = Dashboard(port=0), LoadMetrics(port=0)
    html = HtmlReport(tmp / "r.html")
    sinks: list[LiveSink] = [dash, metrics, html]
    for sink in sinks:
        await sink.start()
    watcher = await asyncio.create_subprocess_exec(
        sys.executable, "-c", WATCHER, dash.url, metrics.url, str(args.streams)
    )
    try:
        async with asyncio.timeout(10):
            while dash.streams < args.streams:  # noqa: ASYNC110 (a count, no event to wait on)
                await asyncio.sleep(0.05)
        rate, cpu_us, rows = await sender_loop(args.seconds, sinks, args.nodes)
        t0 = time.perf_counter()
        await html.finish({"per_second": rows})
        html_s = time.perf_counter() - t0
    finally:
        watcher.terminate()
        await watcher.wait()
        for sink in sinks:
            await sink.close()
    return rate, cpu_us, html_s


async def main(args: argparse.Namespace) -> None:
    without: list[float] = []
    with_: list[float] = []
    ratios: list[float] = []
    cpu_ratios: list[float] = []
    html_times: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.pairs):
            order = (False, True) if i % 2 == 0 else (True, False)
            got: dict[bool, float] = {}
            cpu: dict[bool, float] = {}
            for sinks_on in order:
                got[sinks_on], cpu[sinks_on], html_s = await one_run(sinks_on, args, Path(tmp))
                if sinks_on:
                    html_times.append(html_s)
            without.append(got[False])
            with_.append(got[True])
            ratios.append(got[True] / got[False])
            cpu_ratios.append(cpu[False] / cpu[True])
            print(
                f"pair {i + 1}: without {got[False]:,.0f} ev/s ({cpu[False]:.2f} us CPU/event), "
                f"with {got[True]:,.0f} ev/s ({cpu[True]:.2f} us CPU/event); "
                f"ratio {ratios[-1]:.3f} (by CPU {cpu_ratios[-1]:.3f})",
                flush=True,
            )
    print(
        f"\nmedian without sinks {statistics.median(without):,.0f} ev/s, "
        f"with sinks {statistics.median(with_):,.0f} ev/s; "
        f"ratio median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, "
        f"max {max(ratios):.3f}); by this process's CPU per event: median "
        f"{statistics.median(cpu_ratios):.3f} (min {min(cpu_ratios):.3f}, "
        f"max {max(cpu_ratios):.3f}); target >= 0.95"
    )
    per_call = statistics.median(IN_SECOND[len(IN_SECOND) // 2 :] or [0.0])
    print(f"the sinks' second() calls: {per_call * 1e6:.0f} us a second of run (median)")
    print(
        f"HTML report of {int(args.seconds)} s written in "
        f"{statistics.median(html_times) * 1000:.1f} ms (median)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--streams", type=int, default=3, help="SSE streams on the dashboard")
    parser.add_argument("--nodes", type=int, default=3, help="brokers in the rows' nodes")
    asyncio.run(main(parser.parse_args()))
