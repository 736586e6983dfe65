"""A broker that accepts every connection, answers the SUBSCRIBE with a SUBACK and then a
PUBLISH whose topic length runs past the packet's end: every long-running reader of matchcast
reconnects with the one failover policy's growing wait (``matchcast/transport/failover.py``),
not in a storm. The waits are recorded instead of slept, so the test is fast and exact."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

import mqtt5
import pytest
from structlog.testing import capture_logs

from consumers import Runner
from events import Topics
from matchcast.app import run_replay, run_watch
from matchcast.app.replayers import follow_replayers
from matchcast.load._accounting import ConsumerAccount
from matchcast.load._run import LoadOptions, LoadRun, probe_filter
from matchcast.load._workload import LoadShape
from matchcast.transport import failover, mqtt311
from matchcast.transport.connection import BrokerURL
from matchcast.transport.mqtt import MqttClient
from simulator import ReplayOptions, resolve_matches
from tests._fake_broker import fake_broker, level, read_packet

#: A PUBLISH (QoS 0) whose topic is said to be 64 bytes long, with 2 bytes left in the packet.
TOPIC_PAST_THE_END = b"\x30\x04\x00\x40ab"
#: The waits before the 2nd to 6th connections: 0.1 doubling per quick loss.
GROWING = [0.1, 0.2, 0.4, 0.8, 1.6]


class SubackThenPoison:
    """CONNACK in the client's protocol; a SUBACK for each SUBSCRIBE, then the poison; a
    PUBACK for each QoS 1 PUBLISH. Counts connections; ``reached(n)`` is set at the n-th."""

    def __init__(self) -> None:
        self.connections = 0
        self.waiters: list[tuple[int, asyncio.Event]] = []

    def reached(self, n: int) -> asyncio.Event:
        event = asyncio.Event()
        self.waiters.append((n, event))
        return event

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connect = await read_packet(reader)
        self.connections += 1
        for n, event in self.waiters:
            if self.connections >= n:
                event.set()
        v5 = level(connect) == 5
        if v5:
            writer.write(mqtt5.ConnAckPacket(reason_code=mqtt5.ConnAckReasonCode.SUCCESS).write())
        else:
            writer.write(mqtt311.ConnAck(False, 0).encode())
        while True:
            packet = await read_packet(reader)
            found = mqtt311.frame(packet)
            assert found is not None
            kind, start = packet[0] & 0xF0, found[1]
            pid = packet[start : start + 2]
            if kind == 0x80:  # SUBSCRIBE: granted QoS 0, then the poison
                props = b"\x00" if v5 else b""
                body = pid + props + b"\x00"
                writer.write(bytes([0x90, len(body)]) + body + TOPIC_PAST_THE_END)
            elif kind == 0x30 and packet[0] & 0x06:  # a QoS 1 PUBLISH: its PUBACK
                size = int.from_bytes(packet[start : start + 2], "big")
                pid = packet[start + 2 + size : start + 4 + size]
                writer.write(b"\x40\x02" + pid)
            elif kind == 0xC0:  # PINGREQ
                writer.write(b"\xd0\x00")
            await writer.drain()


async def _waits_until(
    n: int, monkeypatch: pytest.MonkeyPatch, run: Callable[[BrokerURL], Awaitable[object]]
) -> list[float]:
    """Run ``run`` against the poisoning broker until its n-th connection; the policy's
    waits, recorded rather than slept."""
    waits: list[float] = []

    async def backoff(seconds: float) -> None:
        waits.append(seconds)
        await asyncio.sleep(0)

    monkeypatch.setattr(failover, "backoff", backoff)
    broker = SubackThenPoison()
    nth = broker.reached(n)
    async with fake_broker(broker) as url:
        task = asyncio.create_task(run(url))
        try:
            async with asyncio.timeout(60):  # a hang guard only
                done, _ = await asyncio.wait(
                    {task, asyncio.ensure_future(nth.wait())},
                    return_when=asyncio.FIRST_COMPLETED,
                )
                assert task not in done, task.exception()
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    return waits[: n - 1]


@pytest.mark.parametrize("client", ["aiomqtt", "fast"])
@pytest.mark.parametrize("protocol", ["3.1.1", "5"])
async def test_watch_consume_and_web_readers_reconnect_with_the_growing_wait(
    client: str, protocol: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run_watch: the reader of ``watch``, ``consume`` and ``web``."""
    with capture_logs() as logs:
        waits = await _waits_until(
            6,
            monkeypatch,
            lambda url: run_watch(
                url,
                [],
                runner=Runner([], topics=Topics("mctest-storm")),
                client=client,
                protocol=protocol,  # type: ignore[arg-type]
            ),
        )
    assert waits == GROWING
    assert sum(e["event"] == "broker.reconnect_delayed" for e in logs) >= 5


async def test_the_replayer_status_follower_reconnects_with_the_growing_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """follow_replayers: the statuses ``watch`` and ``web`` show (``replayer_status``)."""
    waits = await _waits_until(
        6,
        monkeypatch,
        lambda url: follow_replayers(url, Topics("mctest-storm"), lambda *_: None, "3.1.1"),
    )
    assert waits == GROWING


async def test_the_replayer_reconnects_with_the_growing_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """run_replay: its control listener subscribes, gets the poison, and the replayer's
    connection is replaced with the growing wait, not ended."""
    match = resolve_matches("semifinal")[0]
    options = ReplayOptions(speed=1.0, topics=Topics("mctest-storm"))
    waits = await _waits_until(
        6, monkeypatch, lambda url: run_replay([match], url, options, protocol="3.1.1")
    )
    assert waits == GROWING


async def test_the_load_tester_s_probes_reconnect_with_the_growing_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A probe of ``matchcast load``: lost at once after each SUBSCRIBE, replaced by a new
    client after the policy's wait."""

    def factory(client_id: str, _role: str) -> MqttClient:
        return MqttClient(url_of[0], client_id=client_id, protocol="3.1.1")

    url_of: list[BrokerURL] = []

    async def probe(url: BrokerURL) -> None:
        url_of.append(url)
        topics = Topics("mctest-storm")
        shape = LoadShape(matches=1, qos=0, tag="storm")
        run = LoadRun(LoadOptions(shape=shape, topics=topics), [], factory)
        async with factory("first", "probe") as first:
            await first.subscribe(probe_filter(topics, None), qos=0)
            await run._read(first, ConsumerAccount("probe"), 0)

    waits = await _waits_until(6, monkeypatch, probe)
    assert waits == GROWING
