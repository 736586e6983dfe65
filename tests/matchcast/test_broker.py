"""The embedded broker keeps to this machine unless told otherwise."""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

import pytest

from matchcast.transport.broker import DEFAULT_HOST, EmbeddedBroker, embedded_broker, free_port
from tests._cli import run_cli

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads listening sockets from /proc/net"
)


def _listening(port: int) -> set[str]:
    """The addresses with a TCP socket listening on ``port``, from /proc/net/tcp{,6}."""
    found: set[str] = set()
    for name, width in (("tcp", 4), ("tcp6", 16)):
        path = Path("/proc/net") / name
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            addr_hex, port_hex = local.split(":")
            if state != "0A" or int(port_hex, 16) != port:  # 0A: LISTEN
                continue
            raw = bytes.fromhex(addr_hex)
            if width == 4:
                found.add(socket.inet_ntop(socket.AF_INET, raw[::-1]))
            else:  # four host-order 32-bit words
                words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
                found.add(socket.inet_ntop(socket.AF_INET6, words))
    return found


async def test_the_embedded_broker_listens_on_loopback_only_by_default() -> None:
    async with embedded_broker() as broker:
        assert broker.host == DEFAULT_HOST == "127.0.0.1"
        assert _listening(broker.port) == {"127.0.0.1"}


async def test_it_binds_elsewhere_only_when_told() -> None:
    broker = EmbeddedBroker("0.0.0.0", free_port("0.0.0.0"))
    await broker.start()
    try:
        assert _listening(broker.port) == {"0.0.0.0"}
    finally:
        await broker.stop()


def test_broker_host_says_so_in_its_help() -> None:
    result = run_cli("broker", "--help")
    assert result.code == 0
    help_text = " ".join(result.stdout.replace("│", " ").split())  # the text, not its box
    assert "127.0.0.1" in help_text
    assert "private to this machine" in help_text


async def test_a_connection_that_goes_before_its_connect_is_closed() -> None:
    """amqtt 0.12 kept the stream of such a connection open (a client whose connect was
    cancelled, or timed out); the garbage collector then reported the socket in a later test."""
    async with embedded_broker() as broker:
        reader, writer = await asyncio.open_connection(broker.host, broker.port)
        writer.write_eof()  # nothing sent: no CONNECT
        try:
            async with asyncio.timeout(5):
                assert await reader.read() == b"", "the broker closes its end"
        finally:
            writer.close()
            await writer.wait_closed()


async def test_a_free_port_taken_before_it_is_bound_is_tried_again_with_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``demo`` failed with "address already in use" on a busy machine: the free port it
    found was taken by another program before the broker bound it."""
    import matchcast.transport.broker as broker_module

    with socket.socket() as taken:
        taken.bind((DEFAULT_HOST, 0))
        taken.listen()
        busy = taken.getsockname()[1]
        ports = iter([busy, free_port()])
        monkeypatch.setattr(broker_module, "free_port", lambda host=DEFAULT_HOST: next(ports))
        async with embedded_broker() as broker:
            assert broker.port != busy
        with pytest.raises(OSError, match="address already in use"):
            async with embedded_broker(port=busy):
                pass  # a port asked for is tried once
