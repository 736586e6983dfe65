"""The page's controls at the web server: read-only by default; with a sender, each command is
bounded and checked before it goes anywhere (``matchcast web --control``)."""

from __future__ import annotations

import asyncio
import json

import pytest

from matchcast.web import Hub, WebServer
from tests._sse import get

Sent = list[tuple[str, str | None, str | None]]


async def _post(
    port: int,
    body: bytes,
    *,
    ctype: str = "application/json",
    origin: str | None = None,
    length: int | None = None,
) -> tuple[int, dict[str, object]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        f"POST /api/control HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n"
        f"Content-Type: {ctype}\r\n"
        f"Content-Length: {len(body) if length is None else length}\r\n"
        + (f"Origin: {origin}\r\n" if origin else "")
        + "\r\n"
    )
    writer.write(head.encode() + body)
    async with asyncio.timeout(10):
        response = await reader.read()
    writer.close()
    status = int(response.split(b" ", 2)[1])
    return status, json.loads(response.split(b"\r\n\r\n", 1)[1])


@pytest.fixture
async def controlled() -> tuple[WebServer, Sent]:
    sent: Sent = []

    async def sender(
        action: str, argument: str | None, match: str | None
    ) -> tuple[int, dict[str, object]]:
        sent.append((action, argument, match))
        return 200, {"state": "paused"}

    async with WebServer(Hub(), port=0, control=sender) as srv:
        yield srv, sent  # type: ignore[misc]


async def test_the_page_is_read_only_unless_started_with_control() -> None:
    async with WebServer(Hub(), port=0) as server:
        status, _, body = await get(server.port, "/api/control")
        assert (status, json.loads(body)) == (200, {"enabled": False})
        refused = await _post(server.port, b'{"command": "pause"}')
    assert refused[0] == 403
    assert "read-only" in str(refused[1]["error"])


async def test_a_checked_command_reaches_the_sender(controlled: tuple[WebServer, Sent]) -> None:
    server, sent = controlled
    status, _, body = await get(server.port, "/api/control")
    assert json.loads(body) == {"enabled": True}
    assert (await _post(server.port, b'{"command": "pause"}'))[0] == 200
    seek = b'{"command": "seek", "minute": "90+2", "match": "wc2026-sf-arg-eng"}'
    assert (await _post(server.port, seek))[0] == 200
    assert (await _post(server.port, b'{"command": "speed", "speed": 120}'))[0] == 200
    assert (await _post(server.port, b'{"command": "speed", "speed": "max"}'))[0] == 200
    assert sent == [
        ("pause", None, None),
        ("seek", "90+2", "wc2026-sf-arg-eng"),
        ("speed", "120", None),
        ("speed", "max", None),
    ]


@pytest.mark.parametrize(
    ("body", "kwargs", "status", "problem"),
    [
        (b'{"command": "explode"}', {}, 400, "command must be one of"),
        (b'{"command": "seek", "minute": "50+2"}', {}, 400, "written like 60 or 90+2"),
        (b'{"command": "seek"}', {}, 400, "seek needs a minute"),
        (
            b'{"command": "speed", "speed": -4}',
            {},
            400,
            "speed must be 'max' or a number from 0.01 to 1,000,000",
        ),
        (b'{"command": "pause", "match": "../x"}', {}, 400, "bad match id"),
        (b'{"command": "pause", "then": "rm"}', {}, 400, "expected {command"),
        (b"{not json", {}, 400, "not JSON"),
        (b"[" * 600 + b"]" * 600, {}, 413, "at most"),
        (b'{"command": "pause"}', {"ctype": "text/plain"}, 415, "application/json"),
        (b'{"command": "pause"}', {"origin": "http://evil.example"}, 403, "this page only"),
    ],
)
async def test_a_bad_or_foreign_command_is_refused_before_the_sender(
    controlled: tuple[WebServer, Sent],
    body: bytes,
    kwargs: dict[str, str],
    status: int,
    problem: str,
) -> None:
    server, sent = controlled
    got, answer = await _post(server.port, body, **kwargs)  # type: ignore[arg-type]
    assert got == status
    assert problem in str(answer["error"])
    assert sent == []
