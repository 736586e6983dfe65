"""A node of the list that refuses the subscription: the watch moves to the next node.

A newcomer following docs/cluster.md started ``matchcast watch --match ...`` a minute after a
NATS node was killed: one surviving node answered its SUBSCRIBE with 0x80 for up to about
170 s, and ``watch`` exited 1 on the first refusal, while the same command on the other
surviving node worked. A refusal on the first connection ended the watch; only one after a
failover was tried again. Given a list, the next node is asked; a lone broker's refusal (an
ACL) is still the error it was.
"""

from __future__ import annotations

import asyncio
import sys

import pytest
from structlog.testing import capture_logs

from events import Topics
from matchcast.app import run_replay
from matchcast.cli.common import say_when_absent
from matchcast.testbroker import Mosquitto
from matchcast.transport import mqtt311
from matchcast.transport.connection import BrokerURL
from simulator import ReplayOptions, resolve_matches
from tests._proxies import Connection, PacketProxy

pytestmark = pytest.mark.mosquitto

SEMI = resolve_matches("semifinal")[0]


class _Refuser(PacketProxy):
    """Forwards MQTT 3.1.1 to a broker, but answers every SUBSCRIBE itself with SUBACK 0x80."""

    def __init__(self, upstream_port: int) -> None:
        super().__init__(upstream_port)
        self.refused = 0

    def client_packet(self, conn: Connection, first: int, start: int, packet: bytes) -> bool:
        if first != 0x82:
            return True
        pid = int.from_bytes(packet[start : start + 2], "big")
        conn.writer.write(mqtt311.SubAck(pid, (0x80,)).encode())
        self.refused += 1
        return False


async def _watch(broker: str, topics: Topics) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "matchcast", "watch",
        "--broker", broker,
        "--protocol", "3.1.1",
        "--root", topics.root,
        "--match", SEMI.match_id,
        "--exit-at-full-time",
        "--log-format", "json",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def test_a_node_that_refuses_the_subscription_is_left_for_the_next(
    mosquitto: Mosquitto,
) -> None:
    topics = Topics("mctest-watch-refused")
    upstream = BrokerURL.parse(mosquitto.url)
    async with _Refuser(upstream.port) as refuser:
        broker = f"mqtt://127.0.0.1:{refuser.port},{mosquitto.url}"
        proc = await _watch(broker, topics)
        try:
            async with asyncio.timeout(60):
                while refuser.refused == 0 and proc.returncode is None:
                    await asyncio.sleep(0.05)
                await asyncio.sleep(1)  # on to the next node
                options = ReplayOptions(speed=2000.0, break_seconds=0.2, topics=topics)
                await run_replay([SEMI], upstream, options)
                stdout, stderr = await proc.communicate()
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert proc.returncode == 0, stderr.decode()[-3000:]
    assert "ARG 2-1 ENG" in stdout.decode()
    assert '"event": "consumer.subscribe_refused"' in stderr.decode()


async def test_a_lone_brokers_refusal_is_an_error_at_once(mosquitto: Mosquitto) -> None:
    """An ACL's answer: one ``error:`` line naming the refusal, exit 1, no retries."""
    upstream = BrokerURL.parse(mosquitto.url)
    async with _Refuser(upstream.port) as refuser:
        proc = await _watch(f"mqtt://127.0.0.1:{refuser.port}", Topics("mctest-watch-acl"))
        async with asyncio.timeout(60):
            _, stderr = await proc.communicate()
    assert proc.returncode == 1
    assert "refused (code [128])" in stderr.decode()
    assert refuser.refused <= 2, "the watch and its match-list reader ask once each"
    assert stderr.decode().count("error:") == 1, stderr.decode()


async def test_the_match_list_hint_is_best_effort(mosquitto: Mosquitto) -> None:
    """``watch --match`` lists the broker's matches when its match has not come after 5 s; on
    a connection of its own, to the first node. A tester's node that refused that
    subscription ended the whole watch with exit 1, though the watch itself had moved on."""
    upstream = BrokerURL.parse(mosquitto.url)
    async with _Refuser(upstream.port) as refuser:
        url = BrokerURL("127.0.0.1", refuser.port)
        with capture_logs() as logs:
            async with asyncio.timeout(30):  # a hang guard
                await say_when_absent(
                    url, Topics("mctest-hint"), "nowhere", lambda: False, 0.0, "3.1.1"
                )
    (unavailable,) = [e for e in logs if e["event"] == "match_list.unavailable"]
    assert "refused" in unavailable["reason"]
