"""The guard in front of every matchcast HTTP server (``matchcast/web/_guard.py``): only this
server's host names, a token for commands beyond loopback, a time limit on request heads and a
cap on connections that sheds the half-open ones first."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys

import pytest
from structlog.testing import capture_logs

from matchcast.transport.broker import free_port
from matchcast.web import HttpGuard, Hub, WebServer, check_allowed_host
from matchcast.web._guard import COOKIE, host_names
from tests._cli import matchcast, one_clear_line
from tests._sse import open_stream

Sent = list[tuple[str, str | None, str | None]]
PAUSE = b'{"command": "pause"}'


async def _request(
    port: int,
    method: str,
    path: str,
    *,
    host: str | None = "127.0.0.1",
    headers: dict[str, str] | None = None,
    body: bytes = b"",
) -> tuple[int, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    lines = [f"{method} {path} HTTP/1.1", "Connection: close"]
    if host is not None:
        lines.append(f"Host: {host}:{port}")
    for name, value in (headers or {}).items():
        lines.append(f"{name}: {value}")
    if body:
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    async with asyncio.timeout(10):
        raw = await reader.read()
    writer.close()
    head, _, content = raw.partition(b"\r\n\r\n")
    rows = head.decode().split("\r\n")
    parsed = {k.lower(): v.strip() for k, _, v in (r.partition(":") for r in rows[1:])}
    return int(rows[0].split()[1]), parsed, content


def _recorder() -> tuple[Sent, object]:
    sent: Sent = []

    async def sender(
        action: str, argument: str | None, match: str | None
    ) -> tuple[int, dict[str, object]]:
        sent.append((action, argument, match))
        return 200, {"state": "paused"}

    return sent, sender


# ------------------------------------------------------------ host names


@pytest.mark.parametrize(
    "host",
    [
        "rebind.attacker.example",  # the DNS-rebinding request of the report
        "127.0.0.1.attacker.example",
        "localhost.attacker.example",
        "0x7f000001",
        "127.1",
        "[::ffff:127.0.0.1]",
    ],
)
async def test_a_command_under_a_foreign_host_name_is_refused(host: str) -> None:
    sent, sender = _recorder()
    async with WebServer(Hub(), port=0, control=sender) as server:  # type: ignore[arg-type]
        with capture_logs() as logs:
            status, _, _ = await _request(
                server.port,
                "POST",
                "/api/control",
                host=host,
                headers={"Origin": f"http://{host}:{server.port}"},
                body=PAUSE,
            )
    assert status == 403
    assert sent == []
    assert [e["host"] for e in logs if e["event"] == "web.host_refused"] == [
        f"{host}:{server.port}"
    ]


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "LOCALHOST", "localhost."])
async def test_the_bound_loopback_names_are_served(host: str) -> None:
    sent, sender = _recorder()
    async with WebServer(Hub(), port=0, control=sender) as server:  # type: ignore[arg-type]
        status, _, _ = await _request(server.port, "POST", "/api/control", host=host, body=PAUSE)
    assert status == 200
    assert sent == [("pause", None, None)]


async def test_a_request_with_no_host_or_a_bad_port_is_refused() -> None:
    async with WebServer(Hub(), port=0) as server:
        assert (await _request(server.port, "GET", "/", host=None))[0] == 400  # aiohttp's
        bad_port = {"Host": "127.0.0.1:80x"}
        assert (await _request(server.port, "GET", "/", host=None, headers=bad_port))[0] == 403


async def test_allowed_hosts_add_a_proxy_name_and_its_subdomains() -> None:
    allowed = ["Scores.Example.org", ".fans.example"]
    async with WebServer(Hub(), port=0, allowed_hosts=allowed) as server:
        for ok in ("scores.example.org", "fans.example", "eu.fans.example", "127.0.0.1"):
            assert (await _request(server.port, "GET", "/", host=ok))[0] == 200, ok
        for no in ("example.org", "evilfans.example", "scores.example.org.evil"):
            assert (await _request(server.port, "GET", "/", host=no))[0] == 403, no


def test_a_wildcard_bind_answers_to_the_machine_s_own_names() -> None:
    names = host_names("0.0.0.0")
    assert {socket.gethostname().lower(), "127.0.0.1", "localhost"} <= names
    assert "rebind.attacker.example" not in names
    assert host_names("192.0.2.7") == {"192.0.2.7"}
    assert host_names("::1") >= {"::1", "localhost", "127.0.0.1"}


@pytest.mark.parametrize("bad", ["", "a b", "host:8080", "-x.org", "x..org", "é.org", "*"])
def test_a_bad_allowed_host_says_what_is_expected(bad: str) -> None:
    with pytest.raises(ValueError, match="expected a host name"):
        check_allowed_host(bad)


# ------------------------------------------------------------ the token


async def test_the_token_is_traded_for_a_strict_cookie_and_commands_need_it() -> None:
    token = "s3cret-token-for-the-page"
    sent, sender = _recorder()
    async with WebServer(Hub(), port=0, control=sender, token=token) as server:  # type: ignore[arg-type]
        port = server.port
        with capture_logs() as logs:
            assert (await _request(port, "POST", "/api/control", body=PAUSE))[0] == 403
            _, _, body = await _request(port, "GET", "/api/control")
            assert json.loads(body) == {"enabled": False}
            assert (await _request(port, "GET", "/?token=wrong"))[0] == 403
            status, headers, _ = await _request(port, "GET", f"/?token={token}&x=1")
            assert status == 303
            assert headers["location"] == "/?x=1"
            cookie = headers["set-cookie"]
            assert cookie.startswith(f"{COOKIE}={token};")
            assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
            jar = {"Cookie": f"{COOKIE}={token}"}
            _, _, body = await _request(port, "GET", "/api/control", headers=jar)
            assert json.loads(body) == {"enabled": True}
            assert (await _request(port, "POST", "/api/control", headers=jar, body=PAUSE))[0] == 200
            bearer = {"Authorization": f"Bearer {token}"}
            assert (await _request(port, "POST", "/api/control", headers=bearer, body=PAUSE))[
                0
            ] == 200
            forged = {"Cookie": f"{COOKIE}={token}x"}
            assert (await _request(port, "POST", "/api/control", headers=forged, body=PAUSE))[
                0
            ] == 403
    assert sent == [("pause", None, None)] * 2
    assert token not in repr(logs)
    assert any(e["event"] == "web.token_refused" for e in logs)


# ------------------------------------------------------------ slow heads, connection cap


async def _half_open(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nHost: localh")  # and never the rest
    await writer.drain()
    return reader, writer


async def test_a_head_that_never_ends_is_closed_and_logged() -> None:
    async with WebServer(Hub(), port=0, head_timeout=0.2) as server:
        with capture_logs() as logs:
            reader, writer = await _half_open(server.port)
            async with asyncio.timeout(10):
                assert await reader.read() == b""  # closed by the server
            writer.close()
        assert server.guard.shed == 1
    assert any(e["event"] == "http.shed" and "head" in e["reason"] for e in logs)


async def test_at_the_cap_the_oldest_half_open_connection_makes_room() -> None:
    async with WebServer(Hub(), port=0, max_connections=3, head_timeout=60) as server:
        with capture_logs() as logs:
            slow = [await _half_open(server.port) for _ in range(3)]
            await _until(lambda: server.guard.connections == 3)
            status, _, _ = await _request(server.port, "GET", "/api/stats", host="localhost")
            assert status == 200
            async with asyncio.timeout(10):
                assert await slow[0][0].read() == b""  # the oldest one was shed
            for _, writer in slow:
                writer.close()
    assert any(e["event"] == "http.shed" for e in logs)


async def test_at_the_cap_with_every_connection_busy_the_new_one_is_closed() -> None:
    async with WebServer(Hub(), port=0, max_connections=2) as server:
        streams = [await open_stream(server.port, None) for _ in range(2)]
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        async with asyncio.timeout(10):
            assert await reader.read() == b""
        writer.close()
        assert server.streams == 2  # the open streams were not touched
        for s in streams:
            s.close()


async def _until(done: object) -> None:
    async with asyncio.timeout(10):
        while not done():  # type: ignore[operator]
            await asyncio.sleep(0.01)


def test_the_guard_refuses_a_cap_below_one() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        HttpGuard("127.0.0.1", max_connections=0)


# ------------------------------------------------------------ matchcast web


def test_web_refuses_a_bad_allowed_host_or_a_short_token() -> None:
    one_clear_line(matchcast("web", "--allowed-host", "a b"), 2, "--allowed-host")
    short = matchcast("web", "--control", env={"MATCHCAST_WEB_TOKEN": "abc"})
    one_clear_line(short, 2, "MATCHCAST_WEB_TOKEN")


async def test_web_beyond_loopback_prints_a_token_once_on_stdout_and_never_logs_it() -> None:
    port = free_port()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "matchcast", "web", "--demo", "--speed", "max", "--control"),
        *("--host", "0.0.0.0", "--port", str(port), "-v", "--log-format", "json"),
        env={k: v for k, v in os.environ.items() if k != "MATCHCAST_WEB_TOKEN"}
        | {"MATCHCAST_BROKER": ""},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        async with asyncio.timeout(30):
            line = (await proc.stdout.readline()).decode().strip()
        assert line.startswith(f"http://0.0.0.0:{port}/?token=")
        token = line.partition("?token=")[2]
        assert len(token) >= 16
        assert (await _request(port, "POST", "/api/control", body=PAUSE))[0] == 403
        status, headers, _ = await _request(port, "GET", f"/?token={token}")
        assert status == 303 and "SameSite=Strict" in headers["set-cookie"]
        bearer = {"Authorization": f"Bearer {token}"}
        status, _, _ = await _request(port, "POST", "/api/control", headers=bearer, body=PAUSE)
        assert status != 403  # past the guard (the demo's replayer answers, or has finished)
    finally:
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            out, err = await proc.communicate()
    assert token.encode() not in out + err


async def test_an_absolute_request_target_under_a_foreign_host_is_refused() -> None:
    sent, sender = _recorder()
    async with WebServer(Hub(), port=0, control=sender) as server:  # type: ignore[arg-type]
        target = "http://rebind.attacker.example/api/control"
        status, _, _ = await _request(server.port, "POST", target, body=PAUSE)
    assert status == 403
    assert sent == []


async def test_a_command_body_in_several_packets_is_read_whole() -> None:
    sent, sender = _recorder()
    async with WebServer(Hub(), port=0, control=sender, head_timeout=5) as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(
            b"POST /api/control HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
            b"Content-Type: application/json\r\nContent-Length: 19\r\n\r\n{"
        )
        await writer.drain()
        await asyncio.sleep(0.05)  # the rest in another packet
        writer.write(b'"command":"pause"}')
        async with asyncio.timeout(10):
            status = int((await reader.read()).split(b" ", 2)[1])
        writer.close()
    assert status == 200
    assert sent == [("pause", None, None)]


@pytest.mark.parametrize(("soft", "cap"), [(1024, 704), (256, 129), (100_000, 1200), (4, 3)])
def test_the_connection_cap_stays_below_the_descriptor_limit(
    soft: int, cap: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    import resource

    from matchcast.web._guard import default_max_connections

    monkeypatch.setattr(resource, "getrlimit", lambda _: (soft, soft))
    assert default_max_connections() == cap
