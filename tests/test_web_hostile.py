"""The web server under hostile requests: every malformed request gets a 4xx and a log line,
never a silent close; open streams are capped with a 503; the server keeps serving."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from matchcast.web import Hub, WebServer
from tests._sse import get, open_stream

#: name -> raw bytes of one request. Each must be answered with a 4xx status.
CORPUS: dict[str, bytes] = {
    "last-event-id superscript two": (
        "GET /events?match=m1 HTTP/1.1\r\nHost: localhost\r\nLast-Event-ID: \u00b2\r\n\r\n".encode()
    ),
    "last-event-id negative": b"GET /events HTTP/1.1\r\nHost: localhost\r\nLast-Event-ID: -1\r\n\r\n",
    "last-event-id huge": (
        b"GET /events HTTP/1.1\r\nHost: localhost\r\nLast-Event-ID: " + b"9" * 40 + b"\r\n\r\n"
    ),
    "last-event-id in the query": b"GET /events?last_event_id=%C2%B2 HTTP/1.1\r\nHost: localhost\r\n\r\n",
    "ipv6 bracket path": b"GET //[ HTTP/1.1\r\nHost: localhost\r\n\r\n",
    "100 KB url": b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n",
    "20 KB header": b"GET / HTTP/1.1\r\nHost: localhost\r\nX-A: " + b"a" * 20_000 + b"\r\n\r\n",
    "200 headers": (
        b"GET / HTTP/1.1\r\nHost: localhost\r\n"
        + b"".join(b"X-%d: 1\r\n" % i for i in range(200))
        + b"\r\n"
    ),
    "binary garbage": b"\x00\x01\x02\x03\r\n\r\n",
    "unknown http version": b"GET / HTTP/9.9\r\nHost: localhost\r\n\r\n",
    "request smuggling": (
        b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 4\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    ),
    "non-utf8 path": b"GET /\xff\xfe HTTP/1.1\r\nHost: localhost\r\n\r\n",
    "terminal escape in path": b"GET /a\x1b[2J HTTP/1.1\r\nHost: localhost\r\n\r\n",
    "nul in match id": b"GET /events?match=%00 HTTP/1.1\r\nHost: localhost\r\n\r\n",
    "match id too long": b"GET /events?match="
    + b"a" * 81
    + b" HTTP/1.1\r\nHost: localhost\r\n\r\n",
    "traversal in match id": b"GET /events?match=../x HTTP/1.1\r\nHost: localhost\r\n\r\n",
    "tls hello on the http port": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40,
    "bare lf line ends": b"GET / HTTP/1.1\nHost: localhost\n\n",
    "bad percent escape": b"GET /%ZZ HTTP/1.1\r\nHost: localhost\r\n\r\n",
    "post to the stream": b"POST /events HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n",
    "traversal in static": b"GET /static/../cli.py HTTP/1.1\r\nHost: localhost\r\n\r\n",
}


async def _exchange(port: int, raw: bytes) -> bytes:
    """Send ``raw`` and return the response head (empty if the server closed without one)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        async with asyncio.timeout(10):
            try:
                return await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError as err:
                return err.partial
    finally:
        writer.close()


def _status(head: bytes) -> int:
    line = head.split(b"\r\n", 1)[0].split()
    assert len(line) >= 2 and line[0].startswith(b"HTTP/1."), head[:100]
    return int(line[1])


@pytest.mark.parametrize("name", list(CORPUS))
async def test_each_hostile_request_gets_a_4xx_and_a_log_line(name: str) -> None:
    async with WebServer(Hub(), port=0) as server:
        with capture_logs() as logs:
            head = await _exchange(server.port, CORPUS[name])
            async with asyncio.timeout(5):  # the access line is written as the response ends
                while not any(e["event"] == "http.refused" for e in logs):
                    await asyncio.sleep(0.01)
        status = _status(head)
        assert 400 <= status < 500, (name, head[:200])
        (line,) = [e for e in logs if e["event"] == "http.refused"]
        assert line["status"] == status and line["reason"]
        assert len(line["path"]) <= 203  # a 100 KB url is not copied into the log
        # ...and the server is still there for everyone else.
        assert (await get(server.port, "/api/matches"))[0] == 200


async def test_stream_cap_answers_503_with_a_reason_and_plain_pages_still_work() -> None:
    hub = Hub()
    async with WebServer(hub, port=0, max_streams=3) as server:
        streams = [await open_stream(server.port, "m1") for _ in range(3)]
        assert all(s.status == 200 for s in streams)
        with capture_logs() as logs:
            status, headers, body = await get(server.port, "/events?match=m1")
        assert status == 503
        assert b"too many live streams (3 open)" in body
        assert headers["retry-after"] == "5"
        assert [e["status"] for e in logs if e["event"] == "http.refused"] == [503]
        assert (await get(server.port, "/"))[0] == 200
        streams.pop().close()
        async with asyncio.timeout(10):
            while server.streams >= 3:
                await asyncio.sleep(0.01)
        again = await open_stream(server.port, "m1")
        assert again.status == 200
        for s in [*streams, again]:
            s.close()
        _, _, stats = await get(server.port, "/api/stats")
        assert b'"streams_refused": 1' in stats


def test_the_stream_cap_defaults_below_the_descriptor_limit() -> None:
    import resource

    from matchcast.web._server import MAX_STREAMS, default_max_streams

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    cap = default_max_streams()
    assert 1 <= cap <= MAX_STREAMS
    assert soft == resource.RLIM_INFINITY or cap <= soft // 2


# ------------------------------------------------------------------ hypothesis


@pytest.fixture(scope="module")
def threaded_server() -> Iterator[int]:
    """One server on a loop of its own thread, so hypothesis can drive it with plain sockets."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    stop = asyncio.Event()
    port: list[int] = []

    async def serve() -> None:
        async with WebServer(Hub(), port=0) as server:
            port.append(server.port)
            ready.set()
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(10)
    yield port[0]
    loop.call_soon_threadsafe(stop.set)
    thread.join(10)
    loop.close()


def _blocking_exchange(port: int, raw: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(raw)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        return data


_LINE = st.binary(max_size=300).filter(lambda b: b"\r" not in b and b"\n" not in b)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=_LINE, last_event_id=_LINE, header=_LINE)
def test_any_path_and_header_bytes_get_an_answer_below_500(
    threaded_server: int, path: bytes, last_event_id: bytes, header: bytes
) -> None:
    """Whatever the request line and headers hold, the server answers (never a silent close)
    and never with a server error."""
    raw = (
        b"GET /events?match=m1&x=" + path + b" HTTP/1.1\r\nHost: localhost\r\n"
        b"Last-Event-ID: " + last_event_id + b"\r\nX-Anything: " + header + b"\r\n"
        b"Connection: close\r\n\r\n"
    )
    head = _blocking_exchange(threaded_server, raw)
    status = _status(head)
    assert status < 500
    if status == 200:  # a stream opened: it is a valid request, close it
        assert b"text/event-stream" in head


_SERVE_UNDER_ULIMIT = """
import asyncio, resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (200, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
from matchcast.logs import configure_logging
from matchcast.web import Hub, WebServer
configure_logging("json", "WARNING", stream=sys.stderr)

async def main():
    async with WebServer(Hub(), port=0) as server:
        print("PORT", server.port, server.max_streams, flush=True)
        await asyncio.Event().wait()

asyncio.run(main())
"""


async def test_under_ulimit_200_a_crowd_of_streams_cannot_starve_other_requests() -> None:
    """The reported case: ~190 streams under ``ulimit -n 200`` starved every other request.
    The default cap (half the descriptors) answers 503 instead, and pages still load."""
    import sys

    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _SERVE_UNDER_ULIMIT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    streams = []
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(30):
            line = b""
            line = await proc.stdout.readline()
            port, cap = map(int, line.split()[1:])
        assert cap == 100
        async with asyncio.timeout(60):
            for _ in range(190):
                streams.append(await open_stream(port, "m1"))
            statuses = [s.status for s in streams]
            assert statuses.count(200) == 100 and statuses.count(503) == 90
            assert (await get(port, "/"))[0] == 200
            assert (await get(port, "/api/matches"))[0] == 200
    finally:
        for s in streams:
            s.close()
        proc.terminate()
        await proc.wait()
