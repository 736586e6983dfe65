"""The fast client's own CPU per message, with no broker and no socket, in each MQTT version.

    python benchmarks/codec_bench.py
    git show main:matchcast/transport/fastmqtt.py > /tmp/base.py
    python benchmarks/codec_bench.py --baseline /tmp/base.py --rounds 7

What the client spends on one message, measured as process CPU time (``time.process_time``,
so other work on a shared machine does not count, as it does in the wall-clock rates of
load_bench.py), per version and QoS:

  receive  N PUBLISH packets (--size bytes of payload) arrive in 64 KiB reads: decoded,
           acknowledged (QoS 1) and handed to a batch handler, as ``consume`` takes them
  publish  N ``publish_nowait`` calls, the broker's PUBACKs (QoS 1) fed back in 64 KiB reads:
           encoded, written (to a transport that drops the bytes) and settled

With --baseline FILE (a copy of another version's matchcast/transport/fastmqtt.py, the
single-module client before matchcast.transport.fast), the same on that client, alternating
with this one in each round; the table gives the median ns/message over the rounds and the
ratio of this client to the baseline (under 1: this one is cheaper).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import statistics
import time
from collections.abc import Callable
from typing import Any

import mqtt5
from rich.console import Console
from rich.table import Table

from matchcast.transport import mqtt311
from matchcast.transport.connection import BrokerURL
from matchcast.transport.fastmqtt import FastClient

console = Console()
URL = BrokerURL.parse("mqtt://127.0.0.1:1")
READ = 65536


class NullTransport(asyncio.Transport):
    """Takes writes and drops them."""

    def write(self, data: Any) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: Any = None, low: Any = None) -> None:
        pass

    def abort(self) -> None:
        pass

    def close(self) -> None:
        pass


def packets(version: str, qos: int, n: int, size: int, kind: str) -> list[bytes]:
    """``n`` PUBLISH (``kind`` "publish") or PUBACK ("puback") packets, in reads of 64 KiB."""
    out = []
    for i in range(n):
        pid = i % 65535 + 1
        if kind == "puback":
            raw = (
                mqtt5.PubAckPacket(pid).write() if version == "5" else mqtt311.PubAck(pid).encode()
            )
        elif version == "5":
            raw = mqtt5.PublishPacket(
                "matchcast/events/m-1",
                b"x" * size,
                qos=mqtt5.QoS(qos),
                packet_id=pid if qos else None,
            ).write()
        else:
            raw = mqtt311.encode_publish(
                "matchcast/events/m-1", b"x" * size, qos, False, pid if qos else None
            )
        out.append(raw)
    data = b"".join(out)
    return [data[i : i + READ] for i in range(0, len(data), READ)]


class Current:
    """This checkout's client: one connection, fed bytes as its socket would."""

    def __init__(self, version: str) -> None:
        self.client = FastClient(URL, protocol=version, max_inflight=65535, keepalive=0)  # type: ignore[arg-type]
        self.version = version

    def connect(self) -> Callable[[bytes], None]:
        from matchcast.transport.fast import codec5, codec311  # noqa: PLC0415

        codec = codec5.CODEC if self.version == "5" else codec311.CODEC
        link = self.client._new_link(codec)
        link.connection_made(NullTransport())
        ack = (
            mqtt5.ConnAckPacket(receive_max=65535).write()
            if self.version == "5"
            else mqtt311.ConnAck(False, 0).encode()
        )
        link.data_received(ack)
        link.accept(link.connack.result())
        self.client._link = link
        return link.data_received


class Baseline:
    """The single-module client of --baseline, fed the same way."""

    def __init__(self, module: Any, version: str) -> None:
        self.client = module.FastClient(URL, protocol=version, max_inflight=65535, keepalive=0)
        self.version = version

    def connect(self) -> Callable[[bytes], None]:
        c = self.client
        c._loop = asyncio.get_running_loop()
        c._reset()
        c._v5 = self.version == "5"
        c._transport = NullTransport()
        c._proto = object()
        c._quota = 65535
        c._lost = c._loop.create_future()
        return c._on_data  # type: ignore[no-any-return]


async def receive(side: Current | Baseline, reads: list[bytes], n: int) -> float:
    got = 0

    def handler(batch: list[Any]) -> None:
        nonlocal got
        got += len(batch)

    feed = side.connect()
    side.client.set_batch_handler(handler)
    t0 = time.process_time()
    for data in reads:
        feed(data)
    spent = time.process_time() - t0
    assert got == n, (got, n)
    await asyncio.sleep(0)  # let the scheduled flush run outside the timing
    return spent / n * 1e9


async def publish(
    side: Current | Baseline, acks: list[bytes], qos: int, n: int, size: int
) -> float:
    feed = side.connect()
    payload = b"x" * size
    nowait = side.client.publish_nowait
    t0 = time.process_time()
    futures = [nowait("matchcast/events/m-1", payload, qos, False) for _ in range(n)]
    for data in acks:
        feed(data)
    spent = time.process_time() - t0
    if qos:
        assert all(f is not None and f.done() for f in futures)
    await asyncio.sleep(0)
    return spent / n * 1e9


async def main(args: argparse.Namespace) -> None:
    base = None
    if args.baseline:
        spec = importlib.util.spec_from_file_location("fastmqtt_baseline", args.baseline)
        assert spec is not None
        assert spec.loader is not None
        base = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(base)
    results: dict[tuple[str, str, int, str], list[float]] = {}
    for r in range(args.rounds):
        for version in ("5", "3.1.1"):
            for qos in (0, 1):
                reads = packets(version, qos, args.n, args.size, "publish")
                acks = packets(version, qos, args.n, args.size, "puback") if qos else []
                sides: list[tuple[str, Any]] = [("current", lambda v=version: Current(v))]
                if base is not None:
                    sides.append(("baseline", lambda v=version: Baseline(base, v)))
                    if r % 2:
                        sides.reverse()
                for name, make in sides:
                    results.setdefault((version, "receive", qos, name), []).append(
                        await receive(make(), reads, args.n)
                    )
                    results.setdefault((version, "publish", qos, name), []).append(
                        await publish(make(), acks, qos, args.n, args.size)
                    )
        console.print(f"[dim]round {r + 1} of {args.rounds} done[/]")
    table = Table(
        title=f"CPU ns per message, {args.n:,} messages of {args.size} B, median of {args.rounds} rounds"
    )
    for col in ("version", "path", "QoS", "current", "baseline", "current / baseline", "range"):
        table.add_column(col, justify="right")
    for version in ("5", "3.1.1"):
        for path in ("receive", "publish"):
            for qos in (0, 1):
                cur = results[(version, path, qos, "current")]
                row = [version, path, str(qos), f"{statistics.median(cur):,.0f}"]
                if base is not None:
                    old = results[(version, path, qos, "baseline")]
                    ratios = [c / o for c, o in zip(cur, old, strict=True)]
                    row += [
                        f"{statistics.median(old):,.0f}",
                        f"{statistics.median(ratios):.2f}",
                        f"{min(ratios):.2f}-{max(ratios):.2f}",
                    ]
                table.add_row(*row)
    console.print(table)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000, help="messages per measurement")
    parser.add_argument("--size", type=int, default=300, help="payload bytes")
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--baseline", help="another fastmqtt.py to compare with, in turn")
    asyncio.run(main(parser.parse_args()))
