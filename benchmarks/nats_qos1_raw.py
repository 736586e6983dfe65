"""QoS 1 delivery across a NATS cluster with no matchcast code: a raw-socket MQTT 3.1.1 check.

Issue 15: `matchcast load` at QoS 1 lost events now and then on a 3-node NATS 2.9 cluster with
every node up. This script asks whether the engine does it on its own: it speaks MQTT 3.1.1
over plain asyncio sockets (no matchcast import, no client library), and does what `load`
does: one subscriber per node on ``ROOT/matches/+/events`` at QoS 1 (clean session, SUBACK
awaited), then one publisher per node, each publishing its share of ``--matches`` streams of
``--events`` events at QoS 1 with up to ``--inflight`` unacknowledged (and, unless
``--no-states``, a retained QoS 1 state after each event, as the replayer does). Every PUBLISH
gets its PUBACK; every subscriber acknowledges every message it gets. It then waits until each
subscriber has every event or nothing has arrived for ``--wait-s`` (longer than NATS's 30 s
ack wait, so a redelivery would show), and prints per round and subscriber what never came.

    python benchmarks/nats_qos1_raw.py --broker mqtt://127.0.0.1:4001,mqtt://127.0.0.1:4002,...
    python benchmarks/nats_qos1_raw.py --spawn-nats --rounds 10

``--session`` gives the subscribers persistent sessions. ``--spawn-nats`` starts a 3-node cluster of its own (tests/_clusters.py, free ports).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import sys
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


def _vbi(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n % 128, n // 128
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _s(text: str) -> bytes:
    raw = text.encode()
    return len(raw).to_bytes(2, "big") + raw


def _packet(first: int, body: bytes) -> bytes:
    return bytes([first]) + _vbi(len(body)) + body


@dataclass
class Raw:
    """One MQTT 3.1.1 connection: PUBACKs settle publishes, PUBLISHes are acked and kept."""

    name: str
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    acks: dict[int, asyncio.Future[None]] = field(default_factory=dict)
    suback: asyncio.Future[bytes] | None = None
    received: list[tuple[str, bytes, bool]] = field(default_factory=list)
    last_rx: float = 0.0
    next_pid: int = 0

    @classmethod
    async def connect(cls, host: str, port: int, name: str, *, session: bool = False) -> Raw:
        """Connect with a clean session, or a persistent one (``session``)."""
        reader, writer = await asyncio.open_connection(host, port)
        cid = f"raw-{name}-{uuid.uuid4().hex[:6]}"
        flags = b"\x00" if session else b"\x02"
        writer.write(_packet(0x10, _s("MQTT") + b"\x04" + flags + b"\x00\x3c" + _s(cid)))
        head = await asyncio.wait_for(reader.readexactly(4), 10)
        if head[0] != 0x20 or head[3] != 0:
            raise RuntimeError(f"{name}: CONNACK {head!r}")
        return cls(name, reader, writer)

    async def read_loop(self) -> None:
        r = self.reader
        while True:
            first = (await r.readexactly(1))[0]
            length, mult = 0, 1
            while True:
                b = (await r.readexactly(1))[0]
                length += (b & 0x7F) * mult
                mult *= 128
                if not b & 0x80:
                    break
            body = await r.readexactly(length)
            kind = first >> 4
            if kind == 3:
                tlen = int.from_bytes(body[:2], "big")
                topic = body[2 : 2 + tlen].decode()
                at = 2 + tlen
                qos = (first >> 1) & 3
                if qos:
                    pid = body[at : at + 2]
                    at += 2
                    self.writer.write(b"\x40\x02" + pid)
                self.received.append((topic, body[at:], bool(first & 0x08)))
                self.last_rx = time.monotonic()
            elif kind == 4:
                fut = self.acks.pop(int.from_bytes(body[:2], "big"), None)
                if fut is not None and not fut.done():
                    fut.set_result(None)
            elif kind == 9 and self.suback is not None:
                self.suback.set_result(body[2:])

    async def subscribe(self, topic_filter: str) -> None:
        self.suback = asyncio.get_running_loop().create_future()
        self.writer.write(_packet(0x82, b"\x00\x01" + _s(topic_filter) + b"\x01"))
        codes = await asyncio.wait_for(self.suback, 10)
        if codes != b"\x01":
            raise RuntimeError(f"{self.name}: SUBACK {codes!r}")

    def publish(self, topic: str, payload: bytes, *, retain: bool = False) -> asyncio.Future[None]:
        self.next_pid = self.next_pid % 65535 + 1
        pid = self.next_pid
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.acks[pid] = fut
        first = 0x32 | (1 if retain else 0)
        self.writer.write(_packet(first, _s(topic) + pid.to_bytes(2, "big") + payload))
        return fut


async def nats_request(host: str, port: int, subject: str, payload: bytes = b"") -> bytes:
    """One request over the NATS client protocol (for the JetStream API); the reply's body."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        await reader.readline()  # INFO
        inbox = f"_INBOX.{uuid.uuid4().hex}"
        writer.write(b'CONNECT {"verbose":false,"pedantic":false}\r\n')
        writer.write(f"SUB {inbox} 1\r\nPUB {subject} {inbox} {len(payload)}\r\n".encode())
        writer.write(payload + b"\r\n")
        async with asyncio.timeout(10):
            while True:
                line = await reader.readline()
                if line.startswith(b"PING"):
                    writer.write(b"PONG\r\n")
                elif line.startswith(b"MSG"):
                    size = int(line.split()[-1])
                    return (await reader.readexactly(size + 2))[:-2]
    finally:
        writer.close()


async def _js(nats: tuple[str, int] | None, subject: str) -> dict[str, Any]:
    if nats is None:
        return {}
    reply: dict[str, Any] = json.loads(await nats_request(*nats, subject))
    return reply


async def _publisher(
    conn: Raw, root: str, matches: list[int], events: int, inflight: int, states: bool
) -> int:
    """Publish each match's events (interleaved over the matches), at most `inflight` unacked."""
    window = asyncio.Semaphore(inflight)
    pending: set[asyncio.Future[None]] = set()
    acked = 0

    def done(fut: asyncio.Future[None]) -> None:
        nonlocal acked
        window.release()
        pending.discard(fut)
        acked += 1

    for seq in range(1, events + 1):
        for m in matches:
            for topic, retain in (
                (f"{root}/matches/m{m}/events", False),
                *([(f"{root}/matches/m{m}/state", True)] if states else []),
            ):
                await window.acquire()
                fut = conn.publish(topic, f'{{"m":{m},"seq":{seq}}}'.encode(), retain=retain)
                pending.add(fut)
                fut.add_done_callback(done)
        await asyncio.sleep(0)
    async with asyncio.timeout(60):
        while pending:
            await asyncio.wait(set(pending))
    return acked


async def one_round(
    nodes: list[tuple[str, int]], args: argparse.Namespace, number: int
) -> dict[str, list[tuple[int, int]]]:
    root = f"raw{number}-{uuid.uuid4().hex[:6]}"
    nats = args.nats_addr
    before = (await _js(nats, "$JS.API.STREAM.INFO.$MQTT_msgs")).get("state", {})
    subs = [
        await Raw.connect(h, p, f"sub{i}", session=args.session) for i, (h, p) in enumerate(nodes)
    ]
    tasks = [asyncio.create_task(s.read_loop()) for s in subs]
    for s in subs:
        await s.subscribe(f"{root}/matches/+/events")
    pubs = [await Raw.connect(h, p, f"pub{i}") for i, (h, p) in enumerate(nodes)]
    tasks += [asyncio.create_task(p.read_loop()) for p in pubs]
    shares = [[m for m in range(args.matches) if m % len(pubs) == i] for i in range(len(pubs))]
    t0 = time.monotonic()
    acked = await asyncio.gather(
        *(
            _publisher(p, root, share, args.events, args.inflight, not args.no_states)
            for p, share in zip(pubs, shares, strict=True)
        )
    )
    sent = time.monotonic() - t0
    want = {(m, s) for m in range(args.matches) for s in range(1, args.events + 1)}
    while True:
        await asyncio.sleep(0.2)
        complete = all(len({p for _, p, _ in s.received}) >= len(want) for s in subs)
        idle = time.monotonic() - max(s.last_rx for s in subs)
        if complete or idle > args.wait_s:
            break
    after = (await _js(nats, "$JS.API.STREAM.INFO.$MQTT_msgs")).get("state", {})
    if nats is not None:
        stored = after.get("last_seq", 0) - before.get("last_seq", 0)
        print(f"round {number}: $MQTT_msgs stored {stored} messages in the round")
        listing = await _js(nats, "$JS.API.CONSUMER.LIST.$MQTT_msgs")
        for info in listing.get("consumers", []):
            print(
                f"  consumer {info['name']} filter {info['config'].get('filter_subject')}: "
                f"delivered {info['delivered']['stream_seq']}, "
                f"ack floor {info['ack_floor']['stream_seq']}, "
                f"ack pending {info['num_ack_pending']}, redelivered {info['num_redelivered']}, "
                f"pending {info['num_pending']}"
            )
    missing: dict[str, list[tuple[int, int]]] = {}
    for s in subs:
        got: dict[tuple[int, int], int] = defaultdict(int)
        dups = 0
        for _topic, payload, dup in s.received:
            text = payload.decode()
            m = int(text.split('"m":')[1].split(",")[0])
            seq = int(text.split('"seq":')[1].rstrip("}"))
            got[(m, seq)] += 1
            dups += dup
        missing[s.name] = sorted(want - set(got))
        twice = sum(1 for n in got.values() if n > 1)
        print(
            f"round {number} {s.name} (node {s.name[3:]}): received {len(s.received)}, "
            f"missing {len(missing[s.name])} {missing[s.name][:12]}, twice {twice}, DUP {dups}"
        )
    print(
        f"round {number}: published {sum(acked)} PUBACKed of "
        f"{len(want) * (1 if args.no_states else 2)} in {sent:.2f}s"
    )
    for t in tasks:
        t.cancel()
    for conn in subs + pubs:
        conn.writer.write(b"\xe0\x00")
        with contextlib.suppress(OSError):
            conn.writer.close()
    return missing


def _start_cluster() -> Any:
    """A 3-node NATS cluster of our own (tests/_clusters.py), free ports."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    clusters = importlib.import_module("tests._clusters")
    return clusters.NatsCluster().start()


async def _rounds(nodes: list[tuple[str, int]], args: argparse.Namespace) -> int:
    lossy = 0
    for n in range(1, args.rounds + 1):
        missing = await one_round(nodes, args, n)
        lossy += any(missing.values())
    print(f"rounds with a loss: {lossy} of {args.rounds}")
    return 0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--broker", help="comma-separated mqtt://host:port of every node")
    ap.add_argument("--spawn-nats", action="store_true", help="start a 3-node cluster of its own")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--matches", type=int, default=4)
    ap.add_argument("--events", type=int, default=106)
    ap.add_argument("--inflight", type=int, default=1000)
    ap.add_argument("--no-states", action="store_true", help="publish the events only")
    ap.add_argument("--wait-s", type=float, default=35.0, help="stop after this long idle")
    ap.add_argument("--session", action="store_true", help="subscribers with persistent sessions")
    ap.add_argument("--nats", help="host:port of a node's NATS client port: JetStream figures")
    args = ap.parse_args(argv)
    args.nats_addr = None
    if args.nats:
        host, _, port = args.nats.rpartition(":")
        args.nats_addr = (host, int(port))
    cluster = None
    if args.spawn_nats:
        cluster = _start_cluster()
        brokers = cluster.broker_list
        conf = (cluster.root / "n1" / "nats.conf").read_text()
        listen = conf.split("listen: ", 1)[1].split("\n", 1)[0]
        host, _, port = listen.rpartition(":")
        args.nats_addr = (host, int(port))
    elif args.broker:
        brokers = args.broker
    else:
        ap.error("--broker or --spawn-nats")
    nodes = [(u.hostname or "127.0.0.1", u.port or 1883) for u in map(urlsplit, brokers.split(","))]
    try:
        return asyncio.run(_rounds(nodes, args))
    finally:
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
