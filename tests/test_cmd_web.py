"""``matchcast web``: the one-command demo, and one clear line for mistakes."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from matchcast.testing import wait_port
from matchcast.transport.broker import free_port
from tests._cli import matchcast, one_clear_line
from tests._sse import get, open_stream

SEMI_ID = "wc2026-sf-arg-eng"


@pytest.fixture(params=["aiomqtt", "fast"])
def demo_port(request: pytest.FixtureRequest) -> Iterator[int]:
    """``matchcast web --demo --speed max --client X`` on a free port, for each client; it must
    stop cleanly on SIGTERM."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            *("-m", "matchcast", "web", "--demo", "--speed", "max", "--port", str(port)),
            *("--client", request.param),
            *("-v", "--log-format", "json"),
        ],
        env={**os.environ, "MATCHCAST_BROKER": ""},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_port("127.0.0.1", port, timeout=20)
        yield port
    finally:
        proc.terminate()
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            raise AssertionError(f"matchcast web did not stop on SIGTERM:\n{err}") from None
    assert proc.returncode == 0, err
    assert f"http://127.0.0.1:{port}/" in err


async def test_web_demo_serves_the_page_and_plays_the_semifinal(demo_port: int) -> None:
    """``matchcast web --demo``: embedded broker + replay + page, no broker needed."""
    status, _, body = await get(demo_port, "/")
    assert status == 200 and b'id="score"' in body
    stream = await open_stream(demo_port, SEMI_ID)
    async with asyncio.timeout(60):
        while True:
            event = await stream.next()
            state = event.data.get("state") if isinstance(event.data, dict) else None
            if state and state["status"] == "finished":
                break
    stream.close()
    assert state["score"] == {"ARG": 2, "ENG": 1}


def test_web_with_a_taken_port_is_one_line() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        result = matchcast("web", "--broker", "mqtt://127.0.0.1:1", "--port", str(port))
    one_clear_line(result, 1)


def test_web_with_a_bad_broker_url_exits_2() -> None:
    one_clear_line(matchcast("web", "--broker", "http://nope"), 2, "mqtt")
