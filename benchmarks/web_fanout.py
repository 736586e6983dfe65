"""SSE fan-out of `matchcast web`: N concurrent clients on one server during a replay.

    python benchmarks/web_fanout.py                    # 200 clients, spawns its own mosquitto
    python benchmarks/web_fanout.py --clients 500 --speed 1200 --rounds 3

The server (`matchcast web --broker ...`) runs in its own process, so the clients here do not
share its event loop. Per round: N raw-socket SSE clients subscribe to the semi-final, the
replay runs at --speed, and every client reads until full time. Then:

- every client must have received every seq, in order (checked, not timed);
- bridge-to-client latency, measured by the server: from the bridge subscriber handing an
  update to the hub to its bytes reaching that client's socket (``/api/stats``);
- end to end, measured here: from the replayer's ``emitted_at`` to the client reading the
  update (replayer -> mosquitto -> runner -> hub -> socket -> client), same machine clock.

Target (issue 7): bridge-to-client p99 < 50 ms with 200 clients.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import statistics
import subprocess
import sys
import time
import uuid

from events import Topics
from matchcast.app import run_replay
from matchcast.logs import configure_logging
from matchcast.testing import Mosquitto, mosquitto_binary, wait_port
from matchcast.transport.broker import free_port
from matchcast.transport.connection import BrokerURL
from simulator import ReplayOptions, expand, resolve_matches

SEMI = resolve_matches("semifinal")[0]


async def client(
    port: int, ready: asyncio.Event, counter: list[int], n: int
) -> tuple[list[int], list[float]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET /events?match={SEMI.match_id} HTTP/1.1\r\nHost: bench\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    chunked = b"transfer-encoding: chunked" in head.lower()
    counter[0] += 1
    if counter[0] == n:
        ready.set()
    seqs: list[int] = []
    e2e: list[float] = []
    raw = b""  # as read, chunk framing included
    buffer = b""  # the event stream
    try:
        while True:
            while b"\n\n" not in buffer:
                data = await reader.read(65536)
                if not data:
                    raise ConnectionError("the server closed the stream")
                if not chunked:
                    buffer += data
                    continue
                raw += data  # HTTP/1.1 streams are chunked: take whole chunks out
                while (end := raw.find(b"\r\n")) >= 0:
                    size = int(raw[:end].split(b";")[0], 16)
                    if len(raw) < end + 2 + size + 2:
                        break
                    buffer += raw[end + 2 : end + 2 + size]
                    raw = raw[end + 2 + size + 2 :]
            block, _, buffer = buffer.partition(b"\n\n")
            now = time.time()
            if not block.startswith(b"event: update"):
                continue
            _, _, data = block.partition(b"data: ")
            body = json.loads(data)
            event = body["event"]
            seqs.append(event["seq"])
            emitted = dt.datetime.fromisoformat(event["emitted_at"]).timestamp()
            e2e.append(now - emitted)
            if event["type"] == "full_time":
                return seqs, e2e
    finally:
        writer.close()


async def stats(port: int) -> dict[str, object]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /api/stats HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
    raw = await reader.read()
    writer.close()
    return json.loads(raw.partition(b"\r\n\r\n")[2])


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000


async def round_(
    broker: Mosquitto, n: int, speed: float | None
) -> tuple[dict[str, float], list[float], int]:
    """One replay with a fresh server and topic root (a second replay of the same match on the
    same root would be all duplicates to the server's runner)."""
    url = BrokerURL.parse(broker.url)
    topics = Topics(f"bench-{uuid.uuid4().hex[:8]}")
    port = free_port()
    server = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "matchcast",
        "web",
        "--broker",
        broker.url,
        "--port",
        str(port),
        "--root",
        topics.root,
        "--log-format",
        "json",
        stderr=subprocess.DEVNULL,
    )
    try:
        await asyncio.to_thread(wait_port, "127.0.0.1", port, 20)
        ready = asyncio.Event()
        counter = [0]
        tasks = [asyncio.ensure_future(client(port, ready, counter, n)) for _ in range(n)]
        async with asyncio.timeout(30):
            await ready.wait()
        await run_replay([SEMI], url, ReplayOptions(speed=speed, break_seconds=0.5, topics=topics))
        async with asyncio.timeout(60):
            results = await asyncio.gather(*tasks)
        s = await stats(port)
    finally:
        server.terminate()
        await server.wait()
    expected = list(range(1, 107))
    bad = sum(1 for seqs, _ in results if seqs != expected)
    print(
        f"  {n} clients: {n - bad} received all {len(expected)} updates in order, {bad} did not; "
        f"server latency p99 {s['latency_ms']['p99']:.2f} ms, dropped {s['clients_dropped']}"
    )  # type: ignore[index]
    return s["latency_ms"], [x for _, e2e in results for x in e2e], int(s["clients_dropped"])  # type: ignore[return-value, call-overload]


async def main(args: argparse.Namespace) -> int:
    configure_logging("console", "WARNING")
    binary = mosquitto_binary()
    if binary is None:
        print("mosquitto is not installed (apt-get install mosquitto)")
        return 2
    broker = Mosquitto(binary, extra=["max_queued_messages 100000", "set_tcp_nodelay true"]).start()
    server_lat: list[dict[str, float]] = []
    e2e: list[float] = []
    dropped = 0
    speed = None if args.speed == "max" else float(args.speed)
    print(
        f"matchcast web, {args.clients} SSE clients, replay of the semi-final at --speed {args.speed}, {args.rounds} round(s)"
    )
    try:
        for _ in range(args.rounds):
            lat, ends, drops = await round_(broker, args.clients, speed)
            server_lat.append(lat)
            e2e += ends
            dropped += drops
    finally:
        broker.stop()
    p99 = max(r["p99"] for r in server_lat)
    print(
        f"server bridge-to-client latency, {args.clients * len(expand(SEMI))} deliveries per round, worst round: "
        f"p50 {max(r['p50'] for r in server_lat):.2f} ms, p99 {p99:.2f} ms, "
        f"max {max(r['max'] for r in server_lat):.2f} ms (target p99 < 50 ms); clients dropped: {dropped}"
    )
    print(
        f"end to end (replayer emitted_at -> client read) over {len(e2e)} deliveries: "
        f"p50 {pct(e2e, 0.5):.2f} ms, p99 {pct(e2e, 0.99):.2f} ms, max {pct(e2e, 1):.2f} ms, "
        f"mean {statistics.fmean(e2e) * 1000:.2f} ms"
    )
    return 0 if p99 < 50 else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--speed", default="600", help="replay speed factor, or 'max'")
    parser.add_argument("--rounds", type=int, default=1)
    sys.exit(asyncio.run(main(parser.parse_args())))
