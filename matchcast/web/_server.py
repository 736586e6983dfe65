"""A small HTTP/1.1 server for the match page: static files, two JSON endpoints, and SSE.

Why a server of our own rather than starlette + uvicorn: the page needs four routes, GET only,
and one long-lived response type (server-sent events are a text stream with no framing beyond
blank lines). ``asyncio.start_server`` does that in ~200 lines with no new dependency, and it
gives the fan-out the control it needs: the socket write is ours, so a browser's queue, the
moment its bytes reach the kernel (the latency figure) and aborting a slow one are all direct.
It is not a general web server: no keep-alive (each plain response closes its connection; the
browser only fetches three files), no TLS (put a reverse proxy in front to expose it), request
heads capped in size and time.

Routes:

- ``GET /``: the page; ``GET /static/<file>``: its CSS, JS and icon (packaged, no CDN);
- ``GET /api/matches``: the match list; ``GET /api/stats``: the hub's counters and latency;
- ``GET /events?match=<id>``: the SSE stream of a match (see :mod:`matchcast.web._hub`); a
  reconnecting browser sends ``Last-Event-ID`` and resumes after it;
- ``GET /api/control``: whether the page may control the replay (``matchcast web --control``);
  ``POST /api/control``: a command from the page (``{"command": "seek", "minute": "85"}``),
  checked here and handed to the :data:`ControlSender` (docs/control.md). Only with a JSON
  content type (a form on another site cannot send one without a CORS preflight, which this
  server never grants) and, when the browser says where it comes from, from this page's origin.
"""

from __future__ import annotations

import asyncio
import json
import re
import typing
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from importlib import resources
from urllib.parse import parse_qs, urlsplit

import structlog
from pydantic_core import from_json

from events import ControlAction, parse_minute
from matchcast.web._hub import Client, Hub

__all__ = ["ControlSender", "WebServer"]

#: Sends a checked command ``(action, argument, match)`` to the replayer; returns the HTTP status
#: and the JSON body for the page: the reply, or ``{"error": ...}``.
ControlSender = Callable[[str, str | None, str | None], Awaitable[tuple[int, dict[str, object]]]]
_ACTIONS = frozenset(typing.get_args(ControlAction))
_MAX_BODY = 1024

_log = structlog.get_logger("matchcast.web")

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}
_MATCH_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")
_HEAD_TIMEOUT = 10.0
_MAX_HEADERS = 64
_SECURITY = (
    b"X-Content-Type-Options: nosniff\r\n"
    b"Content-Security-Policy: default-src 'self'; img-src 'self' data:\r\n"
    b"Referrer-Policy: no-referrer\r\n"
)
_SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\n"
    b"Content-Type: text/event-stream; charset=utf-8\r\n"
    b"Cache-Control: no-cache\r\n"
    b"X-Accel-Buffering: no\r\n" + _SECURITY + b"\r\n"
    # The browser waits this long before reconnecting after a drop.
    b"retry: 1000\n\n"
)


def _static_files() -> dict[str, tuple[bytes, str]]:
    root = resources.files("matchcast.web") / "static"
    files: dict[str, tuple[bytes, str]] = {}
    for entry in root.iterdir():
        suffix = "." + entry.name.rpartition(".")[2]
        if entry.is_file() and suffix in _TYPES:
            files[entry.name] = (entry.read_bytes(), _TYPES[suffix])
    return files


class WebServer:
    """Serves the page and the SSE streams of a :class:`~matchcast.web.Hub`.

    Args:
        hub: where the frames come from.
        host: address to bind; 127.0.0.1 keeps the page on this machine.
        port: TCP port; 0 picks a free one (see :attr:`port` after :meth:`start`).
        keepalive: seconds of silence after which a comment line is sent, so a dead browser
            is noticed and proxies keep the stream open.
    """

    def __init__(
        self,
        hub: Hub,
        host: str = "127.0.0.1",
        port: int = 8000,
        *,
        keepalive: float = 15.0,
        control: ControlSender | None = None,
    ) -> None:
        self.hub = hub
        self.control = control
        self.host = host
        self.port = port
        self.keepalive = keepalive
        self._files = _static_files()
        self._server: asyncio.Server | None = None
        self._streams: set[Client] = set()

    @property
    def url(self) -> str:
        """The page's address."""
        return f"http://{self.host}:{self.port}/"

    async def start(self) -> None:
        """Listen; raises OSError if the port is taken."""
        self._server = await asyncio.start_server(self._handle, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        _log.info("web.started", url=self.url)

    async def stop(self) -> None:
        """Stop listening and end every stream."""
        if self._server is None:
            return
        self._server.close()
        for client in list(self._streams):
            client.drop()
        await self._server.wait_closed()
        self._server = None
        _log.info("web.stopped", **self.hub.stats.as_dict())

    async def __aenter__(self) -> WebServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------ requests

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await self._read_head(reader)
            if head is None:
                return
            method, target, headers = head
            url = urlsplit(target)
            if method == "POST" and url.path == "/api/control":
                await self._control(reader, writer, headers)
                return
            if method not in ("GET", "HEAD") or (method == "HEAD" and url.path == "/events"):
                await self._respond(writer, HTTPStatus.METHOD_NOT_ALLOWED, b"GET only\n")
                return
            query = parse_qs(url.query)
            if url.path == "/events":
                await self._events(writer, query, headers)
            else:
                await self._plain(writer, url.path, body=method == "GET")
        except (ConnectionError, TimeoutError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _read_head(
        self, reader: asyncio.StreamReader
    ) -> tuple[str, str, dict[str, str]] | None:
        try:
            async with asyncio.timeout(_HEAD_TIMEOUT):
                parts = (await reader.readline()).decode("latin-1").split()
                headers: dict[str, str] = {}
                for _ in range(_MAX_HEADERS):
                    line = await reader.readline()
                    if line in (b"\r\n", b"\n", b""):
                        break
                    name, _, value = line.decode("latin-1").partition(":")
                    headers[name.strip().lower()] = value.strip()
        except ValueError:  # a line over the stream's limit
            return None
        if len(parts) != 3:
            return None
        return parts[0], parts[1], headers

    async def _plain(self, writer: asyncio.StreamWriter, path: str, *, body: bool) -> None:
        if path in ("/", "/index.html"):
            content, ctype = self._files["index.html"]
        elif path.startswith("/static/") and path[8:] in self._files:
            content, ctype = self._files[path[8:]]
        elif path == "/api/matches":
            content, ctype = self._json({"matches": self.hub.matches()})
        elif path == "/api/stats":
            content, ctype = self._json(self.hub.stats.as_dict())
        elif path == "/api/control":
            content, ctype = self._json({"enabled": self.control is not None})
        else:
            await self._respond(writer, HTTPStatus.NOT_FOUND, b"not found\n")
            return
        await self._respond(writer, HTTPStatus.OK, content, ctype, body=body)

    @staticmethod
    def _json(doc: object) -> tuple[bytes, str]:
        return json.dumps(doc, ensure_ascii=False).encode(), "application/json"

    @staticmethod
    async def _respond(
        writer: asyncio.StreamWriter,
        status: HTTPStatus,
        content: bytes,
        ctype: str = "text/plain; charset=utf-8",
        *,
        body: bool = True,
    ) -> None:
        head = (
            f"HTTP/1.1 {status.value} {status.phrase}\r\n"
            f"Content-Type: {ctype}\r\nContent-Length: {len(content)}\r\n"
            "Cache-Control: no-cache\r\nConnection: close\r\n"
        ).encode()
        writer.write(head + _SECURITY + b"\r\n" + (content if body else b""))
        await writer.drain()

    # ------------------------------------------------------------ control

    async def _control(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, headers: dict[str, str]
    ) -> None:
        """A command from the page: bounded, checked, then sent on to the replayer."""
        status, body = await self._control_result(reader, headers)
        if status != HTTPStatus.OK:
            _log.info("control.refused", status=status, reason=body.get("error"))
        content, ctype = self._json(body)
        await self._respond(writer, HTTPStatus(status), content, ctype)

    async def _control_result(
        self, reader: asyncio.StreamReader, headers: dict[str, str]
    ) -> tuple[int, dict[str, object]]:
        if self.control is None:
            return HTTPStatus.FORBIDDEN, {"error": "read-only: start matchcast web --control"}
        if headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return HTTPStatus.UNSUPPORTED_MEDIA_TYPE, {"error": "send application/json"}
        origin = headers.get("origin")
        if origin is not None and origin != f"http://{headers.get('host', '')}":
            return HTTPStatus.FORBIDDEN, {"error": "commands come from this page only"}
        length = headers.get("content-length", "")
        if not length.isdigit() or int(length) > _MAX_BODY:
            return HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {"error": f"at most {_MAX_BODY} bytes"}
        async with asyncio.timeout(_HEAD_TIMEOUT):
            raw = await reader.readexactly(int(length))
        try:
            data = from_json(raw, allow_inf_nan=False)
        except ValueError:
            return HTTPStatus.BAD_REQUEST, {"error": "not JSON"}
        checked = _check_command(data)
        if isinstance(checked, str):
            return HTTPStatus.BAD_REQUEST, {"error": checked}
        return await self.control(*checked)

    # ------------------------------------------------------------ the SSE stream

    async def _events(
        self, writer: asyncio.StreamWriter, query: dict[str, list[str]], headers: dict[str, str]
    ) -> None:
        match_id = (query.get("match") or [""])[0] or None
        if match_id is not None and not _MATCH_ID.match(match_id):
            await self._respond(writer, HTTPStatus.BAD_REQUEST, b"bad match id\n")
            return
        raw_id = headers.get("last-event-id") or (query.get("last_event_id") or [""])[0]
        last_id = int(raw_id) if raw_id.isdigit() else None
        client = self.hub.connect(match_id, last_id)
        client.abort = writer.transport.abort
        self._streams.add(client)
        try:
            await self._pump(writer, client)
        finally:
            self._streams.discard(client)
            self.hub.disconnect(client)

    async def _pump(self, writer: asyncio.StreamWriter, client: Client) -> None:
        loop = asyncio.get_running_loop()
        writer.write(_SSE_HEAD)
        writer.writelines([f.data for f in client.backlog])
        client.backlog = []
        await writer.drain()
        queue = client.queue
        while True:
            try:
                async with asyncio.timeout(self.keepalive):
                    first = await queue.get()
            except TimeoutError:
                writer.write(b": keepalive\n\n")
                await writer.drain()
                continue
            batch = [first]
            while not queue.empty():
                batch.append(queue.get_nowait())
            frames = [f for f in batch if f is not None]
            if len(frames) < len(batch):
                return  # dropped, or the server is stopping
            writer.writelines([f.data for f in frames])
            await writer.drain()
            now = loop.time()
            for f in frames:
                if f.seq is not None:
                    self.hub.sent(f, now)


def _check_command(data: object) -> tuple[str, str | None, str | None] | str:
    """``(action, argument, match)`` from the page's JSON, or what is wrong with it."""
    if not isinstance(data, dict) or not set(data) <= {"command", "minute", "speed", "match"}:
        return "expected {command, minute?, speed?, match?}"
    action = data.get("command")
    if action not in _ACTIONS:
        return f"command must be one of {', '.join(sorted(_ACTIONS))}"
    match = data.get("match")
    if match is not None and (not isinstance(match, str) or not _MATCH_ID.match(match)):
        return "bad match id"
    argument: str | None = None
    if action == "seek":
        minute = data.get("minute")
        if not isinstance(minute, str | int) or isinstance(minute, bool):
            return "seek needs a minute"
        try:
            argument = parse_minute(str(minute)).label.rstrip("'")
        except ValueError as err:
            return str(err)
    elif action == "speed":
        speed = data.get("speed")
        if speed == "max":
            argument = "max"
        elif isinstance(speed, int | float) and not isinstance(speed, bool) and 0 < speed <= 1e6:
            argument = f"{speed:g}"
        else:
            return "speed must be above 0, or 'max'"
    return str(action), argument, match
