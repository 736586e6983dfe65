"""A broker that breaks every connection right after it accepts it: the consumer reconnects
with a growing wait, not in a hot loop, and the first Ctrl-C or SIGTERM stops it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys

import mqtt5
import pytest

from consumers import Runner
from events import Topics
from matchcast.app import watch
from matchcast.testbroker import Mosquitto, mosquitto_binary
from matchcast.transport import failover, mqtt311
from matchcast.transport.clients import ClientKind, mqtt_client
from tests._fake_broker import fake_broker, level, read_packet

#: A PUBLISH whose remaining length is a variable byte integer of more than four bytes.
MALFORMED = b"\x30\xff\xff\xff\xff\xff"


class Breaker:
    """Accepts each connection (a CONNACK in its protocol), then answers the client's next
    packet (its SUBSCRIBE) with a malformed one. Calls ``on_connect(n)`` at the n-th CONNECT."""

    def __init__(self) -> None:
        self.connections = 0
        self.on_connect: list[tuple[int, asyncio.Event]] = []

    def reached(self, n: int) -> asyncio.Event:
        """Set once the n-th connection is made."""
        event = asyncio.Event()
        self.on_connect.append((n, event))
        return event

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connect = await read_packet(reader)
        self.connections += 1
        for n, event in self.on_connect:
            if self.connections >= n:
                event.set()
        if level(connect) == 5:
            writer.write(mqtt5.ConnAckPacket(reason_code=mqtt5.ConnAckReasonCode.SUCCESS).write())
        else:
            writer.write(mqtt311.ConnAck(False, 0).encode())
        await writer.drain()
        await read_packet(reader)
        writer.write(MALFORMED)
        await writer.drain()
        await reader.read()  # until the client hangs up


async def test_a_broker_that_breaks_every_connection_is_reconnected_to_with_backoff(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each reconnect waits twice as long as the one before, up to the cap; a stop ends the
    loop without another connection. The waits are recorded, not slept. (The fast client,
    consume's: aiomqtt's paho reads past the malformed packet, and the SUBSCRIBE times out.)"""
    waits: list[float] = []
    runner = Runner([], topics=Topics("mctest-breaker"))

    async def pause(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(failover, "backoff", pause)
    breaker = Breaker()
    tenth = breaker.reached(10)
    async with fake_broker(breaker) as url, asyncio.timeout(30):  # a hang guard only

        async def stop_at_the_tenth() -> None:
            await tenth.wait()
            runner.stop()

        stopper = asyncio.create_task(stop_at_the_tenth())
        async with runner, mqtt_client(ClientKind.fast, url, protocol="3.1.1") as connection:
            await watch._run_through_failovers(runner, connection, 1)
        await stopper
    assert breaker.connections == 10
    assert waits == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0, 5.0]


def _consume(url: object) -> list[str]:
    return [sys.executable, "-m", "matchcast", "consume", "scoreboard", "--broker", str(url)]


async def test_sigterm_stops_consume_on_a_broker_that_breaks_every_connection() -> None:
    """One SIGTERM is enough: ``consume`` stops reconnecting and exits 0, as after any stop."""
    breaker = Breaker()
    looping = breaker.reached(4)  # the check that the broker answers, then three in the loop
    async with fake_broker(breaker) as url:
        proc = await asyncio.create_subprocess_exec(
            *_consume(url),
            "--log-format",
            "json",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "MATCHCAST_BROKER": ""},
        )
        try:
            async with asyncio.timeout(60):  # hang guards only
                await looping.wait()
                proc.send_signal(signal.SIGTERM)
                _, err = await proc.communicate()
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    said = [json.loads(line)["event"] for line in err.decode().splitlines() if line[:1] == "{"]
    assert proc.returncode == 0, err.decode()[-2000:]
    assert said.count("consumer.stopping") == 1
    assert "consumer.interrupted" not in said
    assert "broker.reconnect_delayed" in said


async def _until(stderr: asyncio.StreamReader, event: str, said: list[str]) -> None:
    while event not in said:
        line = await stderr.readline()
        assert line, f"consume ended before {event}: {said}"
        if line[:1] == b"{":
            said.append(json.loads(line)["event"])


@pytest.mark.mosquitto
async def test_sigterm_stops_consume_while_it_waits_for_a_broker_that_is_gone() -> None:
    """The broker dies: reconnect() tries for up to max_outage (300 s); one SIGTERM ends
    that at once, exit 0."""
    binary = mosquitto_binary()
    assert binary is not None
    broker = Mosquitto(binary).start()
    proc = await asyncio.create_subprocess_exec(
        *_consume(broker.url),
        "--log-format",
        "json",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "MATCHCAST_BROKER": ""},
    )
    assert proc.stderr is not None
    said: list[str] = []
    try:
        async with asyncio.timeout(60):  # hang guards only
            await _until(proc.stderr, "consumer.started", said)
            broker.kill()
            await _until(proc.stderr, "broker.reconnect_failed", said)
            proc.send_signal(signal.SIGTERM)
            _, err = await proc.communicate()
    finally:
        broker.kill()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    said += [json.loads(line)["event"] for line in err.decode().splitlines() if line[:1] == "{"]
    assert proc.returncode == 0, err.decode()[-2000:]
    assert said.count("consumer.stopping") == 1
    assert "consumer.interrupted" not in said
