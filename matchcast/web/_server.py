"""The match page's web server, on aiohttp: static files, two JSON endpoints, and SSE.

aiohttp does the HTTP: its llhttp parser bounds the request line, header fields and header
count (a request past them gets 400, 431 or 414 from here, never a silent close), and a
:class:`aiohttp.web.StreamResponse` carries each server-sent event stream. What is ours is the
fan-out: each stream drains its browser's bounded queue from the hub
(:mod:`matchcast.web._hub`), records when its bytes reached the socket (the latency figure),
and can be aborted at once when the browser falls too far behind. Open streams are capped
(``max_streams``): past the cap a new stream gets 503 with a body saying so, so a crowd of
browsers cannot take the file descriptors every other request needs. No TLS: put a reverse
proxy in front to expose it.

Every refused request (4xx, 5xx) gets one ``http.refused`` log line with its status and reason.

Routes:

- ``GET /``: the page; ``GET /static/<file>``: its CSS, JS and icon (packaged, no CDN);
- ``GET /api/matches``: the match list; ``GET /api/stats``: the hub's counters and latency;
- ``GET /events?match=<id>``: the SSE stream of a match (see :mod:`matchcast.web._hub`); a
  reconnecting browser sends ``Last-Event-ID`` and resumes after it;
- ``GET /api/control``: whether the page may control the replay (``matchcast web --control``);
  ``POST /api/control``: a command from the page (JSON, from the page's own origin, at most
  1 KiB), checked here before it is sent on to the replayer (docs/control.md).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import resource
import typing
from collections.abc import Awaitable, Callable, Iterable
from importlib import resources

import structlog
from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from pydantic_core import from_json

from events import (
    SPEED_RANGE,
    ControlAction,
    MinutePastPlayError,
    check_speed,
    clip,
    parse_minute,
)
from matchcast.web._guard import HEAD_TIMEOUT, HttpGuard
from matchcast.web._hub import Client, Frame, Hub

__all__ = ["ControlSender", "WebServer", "default_max_streams"]

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
_MATCH_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")
_EVENT_ID = re.compile(r"[0-9]{1,15}")
_SECURITY = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:",
    "Referrer-Policy": "no-referrer",
}
_SSE_HEADERS = {
    "Content-Type": "text/event-stream; charset=utf-8",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",
    **_SECURITY,
}
_NO_CACHE = {"Cache-Control": "no-cache"}
#: The browser waits this long before reconnecting after a drop.
_RETRY = b"retry: 1000\n\n"
#: A comment line for an idle stream: keeps proxies from closing it, finds dead browsers.
_KEEPALIVE = Frame(b": keepalive\n\n", None, 0.0)
#: Limits of the request head (aiohttp's parser enforces them).
MAX_LINE = 8190
MAX_FIELD = 8190
MAX_HEADERS = 64
#: The most streams served by default, whatever the descriptor limit allows.
MAX_STREAMS = 1000

#: aiohttp's own logger: it would write every refused request as a traceback through the
#: standard library. It is silenced; instead the access logger below writes one structured
#: line per refused request, and the middleware logs a handler's failure with its traceback.
_aiohttp_log = logging.getLogger("matchcast.web.aiohttp")
_aiohttp_log.addHandler(logging.NullHandler())
_aiohttp_log.propagate = False


def default_max_streams() -> int:
    """The stream cap by default: :data:`MAX_STREAMS`, or less where the process may open
    fewer files (each stream is a socket), keeping half the descriptors for everything else."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_STREAMS
    return max(1, min(MAX_STREAMS, soft // 2))


def _static_files() -> dict[str, tuple[bytes, str]]:
    root = resources.files("matchcast.web") / "static"
    files: dict[str, tuple[bytes, str]] = {}
    for entry in root.iterdir():
        suffix = "." + entry.name.rpartition(".")[2]
        if entry.is_file() and suffix in _TYPES:
            files[entry.name] = (entry.read_bytes(), _TYPES[suffix])
    return files


class _AccessLog(AbstractAccessLogger):
    """One structured line per refused request (aiohttp calls it for every response, parse
    errors included); served ones only at debug level."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        path = _logged_path(request)
        fields = {
            "status": response.status,
            "method": clip(request.method),
            "path": clip(path),
            "remote": request.remote,
        }
        if response.status >= 400:
            body = response.text if isinstance(response, web.Response) else None
            reason = (body or response.reason).strip().splitlines()
            _log.warning("http.refused", reason=clip(" ".join(reason)), **fields)
        else:
            _log.debug("http.served", seconds=round(time, 6), **fields)


def _logged_path(request: web.BaseRequest) -> str:
    """The path and query of a request as logs show it: cut, and without a ``token``."""
    try:
        url = request.rel_url
        if "token" in url.query:
            url = url.with_query({k: v for k, v in url.query.items() if k != "token"})
        return clip(url.raw_path_qs)
    except Exception:  # a head too broken to have a path
        return ""


def _text(status: int, body: str) -> web.Response:
    return web.Response(status=status, text=body + "\n", headers=_SECURITY)


@web.middleware
async def _errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Security headers on every answer; a handler's bug costs its request (500), logged."""
    try:
        response = await handler(request)
    except web.HTTPException as err:
        err.headers.update(_SECURITY)
        raise
    except (ConnectionError, asyncio.CancelledError):
        raise
    except Exception:
        _log.exception("http.failed", method=request.method, path=_logged_path(request))
        return _text(500, "internal error (logged on the server)")
    if not response.prepared:
        response.headers.update(_SECURITY)
    return response


class WebServer:
    """Serves the page and the SSE streams of a :class:`~matchcast.web.Hub`.

    Args:
        hub: where the frames come from.
        host: address to bind; 127.0.0.1 keeps the page on this machine.
        port: TCP port; 0 picks a free one (see :attr:`port` after :meth:`start`).
        keepalive: seconds of silence after which a comment line is sent, so a dead browser
            is noticed and proxies keep the stream open.
        max_streams: SSE streams open at once; past it a new one gets 503. By default
            :func:`default_max_streams`.
        control: sends the page's replay commands on (``matchcast web --control``); None
            keeps the page read-only (a command gets 403).
        allowed_hosts: host names a request may give besides those of ``host``
            (``web --allowed-host``; :class:`~matchcast.web._guard.HttpGuard`).
        token: the secret a command must carry (cookie or ``Authorization: Bearer``); None:
            none is asked for.
        max_connections: connections open at once, half-open ones included; by default
            :func:`~matchcast.web._guard.default_max_connections`.
        head_timeout: seconds a request head may take to arrive.
    """

    def __init__(
        self,
        hub: Hub,
        host: str = "127.0.0.1",
        port: int = 8000,
        *,
        keepalive: float = 15.0,
        max_streams: int | None = None,
        control: ControlSender | None = None,
        allowed_hosts: Iterable[str] = (),
        token: str | None = None,
        max_connections: int | None = None,
        head_timeout: float = HEAD_TIMEOUT,
    ) -> None:
        self.hub = hub
        self.control = control
        self.host = host
        self.port = port
        self.keepalive = keepalive
        self.max_streams = default_max_streams() if max_streams is None else max_streams
        if self.max_streams < 1:
            raise ValueError(f"max_streams must be at least 1, not {self.max_streams}")
        self.refused_streams = 0
        self.guard = HttpGuard(
            host,
            allowed_hosts,
            token=token,
            max_connections=max_connections,
            head_timeout=head_timeout,
        )
        self._files = _static_files()
        self._runner: web.AppRunner | None = None
        self._streams: set[Client] = set()
        self._keepalives: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        """The page's address."""
        return f"http://{self.host}:{self.port}/"

    @property
    def streams(self) -> int:
        """SSE streams open now."""
        return len(self._streams)

    async def start(self) -> None:
        """Listen; raises OSError if the port is taken."""
        app = web.Application(middlewares=[*self.guard.middlewares, _errors])
        app.router.add_get("/", self._page)
        app.router.add_get("/index.html", self._page)
        app.router.add_get("/static/{name}", self._static)
        app.router.add_get("/api/matches", self._matches)
        app.router.add_get("/api/stats", self._stats)
        app.router.add_route("GET", "/events", self._events)
        app.router.add_get("/api/control", self._control_enabled)
        app.router.add_post("/api/control", self._control)
        runner = web.AppRunner(
            app,
            handle_signals=False,
            access_log_class=_AccessLog,
            access_log=_aiohttp_log,
            logger=_aiohttp_log,
            max_line_size=MAX_LINE,
            max_field_size=MAX_FIELD,
            max_headers=MAX_HEADERS,
            shutdown_timeout=2.0,
            # A browser that goes away cancels its stream at once and frees its slot, rather
            # than at the next write (up to ``keepalive`` seconds later).
            handler_cancellation=True,
        )
        await runner.setup()
        site = self.guard.site(runner, self.host, self.port)
        try:
            await site.start()
        except OSError:
            await runner.cleanup()
            raise
        self._runner = runner
        self.port = runner.addresses[0][1]  # the bound port, for port=0
        self._keepalives = asyncio.ensure_future(self._keep_alive())
        _log.info(
            "web.started",
            url=self.url,
            max_streams=self.max_streams,
            max_connections=self.guard.max_connections,
            token=self.guard.token is not None,
        )

    async def stop(self) -> None:
        """Stop listening and end every stream."""
        if self._runner is None:
            return
        if self._keepalives is not None:
            self._keepalives.cancel()
            await asyncio.gather(self._keepalives, return_exceptions=True)
            self._keepalives = None
        for client in list(self._streams):
            client.drop()
        await self._runner.cleanup()
        self._runner = None
        _log.info(
            "web.stopped",
            refused_streams=self.refused_streams,
            shed_connections=self.guard.shed,
            refused_hosts=self.guard.hosts_refused,
            **self.hub.stats.as_dict(),
        )

    async def __aenter__(self) -> WebServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------ plain routes

    async def _page(self, _request: web.Request) -> web.Response:
        return self._file("index.html")

    async def _static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in self._files:
            return _text(404, "not found")
        return self._file(name)

    def _file(self, name: str) -> web.Response:
        content, ctype = self._files[name]
        return web.Response(body=content, headers={"Content-Type": ctype, **_NO_CACHE})

    async def _matches(self, _request: web.Request) -> web.Response:
        return self._json({"matches": self.hub.matches()})

    async def _stats(self, _request: web.Request) -> web.Response:
        stats = self.hub.stats.as_dict()
        stats["streams_open"] = len(self._streams)
        stats["streams_refused"] = self.refused_streams
        stats["max_streams"] = self.max_streams
        stats["connections_open"] = self.guard.connections
        stats["connections_shed"] = self.guard.shed
        stats["max_connections"] = self.guard.max_connections
        return self._json(stats)

    @staticmethod
    def _json(doc: object, status: int = 200) -> web.Response:
        body = json.dumps(doc, ensure_ascii=False).encode()
        return web.Response(
            status=status, body=body, headers={"Content-Type": "application/json", **_NO_CACHE}
        )

    # ------------------------------------------------------------ replay control

    async def _control_enabled(self, request: web.Request) -> web.Response:
        """Whether this browser may send commands: control is on, and it holds the token."""
        return self._json({"enabled": self.control is not None and self.guard.authorized(request)})

    async def _control(self, request: web.Request) -> web.Response:
        """A command from the page: bounded, checked, then sent on to the replayer."""
        status, body = await self._control_result(request)
        if status != 200:
            _log.info("control.refused", status=status, reason=body.get("error"))
        return self._json(body, status)

    async def _control_result(self, request: web.Request) -> tuple[int, dict[str, object]]:
        if self.control is None:
            return 403, {"error": "read-only: start matchcast web --control"}
        if not self.guard.authorized(request):
            return 403, {"error": "open the page through the address with its token first"}
        if request.content_type != "application/json":
            return 415, {"error": "send application/json"}
        origin = request.headers.get("Origin")
        if origin is not None and origin not in (
            f"http://{request.host}",
            f"https://{request.host}",
        ):
            return 403, {"error": "commands come from this page only"}
        length = request.content_length
        if length is None or length > _MAX_BODY:
            return 413, {"error": f"at most {_MAX_BODY} bytes, with a Content-Length"}
        try:  # the whole body (in as many packets as it came), within the head's time limit
            async with asyncio.timeout(self.guard.head_timeout):
                raw = await request.content.readexactly(length)
        except TimeoutError:
            return 408, {"error": f"the body took more than {self.guard.head_timeout:g} s"}
        except asyncio.IncompleteReadError:
            return 400, {"error": "the body ended before its Content-Length"}
        try:
            data = from_json(raw, allow_inf_nan=False)
        except ValueError:
            return 400, {"error": "not JSON"}
        checked = _check_command(data)
        if isinstance(checked, str):
            return 400, {"error": checked}
        return await self.control(*checked)

    # ------------------------------------------------------------ the SSE stream

    async def _events(self, request: web.Request) -> web.StreamResponse:
        match_id = request.query.get("match") or None
        if match_id is not None and not _MATCH_ID.fullmatch(match_id):
            return _text(400, "bad match id: letters, digits, '.', '_' and '-', at most 80")
        raw_id = request.headers.get("Last-Event-ID") or request.query.get("last_event_id")
        last_id: int | None = None
        if raw_id:
            if not _EVENT_ID.fullmatch(raw_id):
                return _text(400, "bad Last-Event-ID: expected the decimal seq of an event")
            last_id = int(raw_id)
        if len(self._streams) >= self.max_streams:
            self.refused_streams += 1
            return web.Response(
                status=503,
                text=f"too many live streams ({self.max_streams} open); try again later\n",
                headers={"Retry-After": "5", **_SECURITY},
            )
        transport = request.transport
        if transport is None:  # the browser is already gone
            return web.Response(status=499)
        client = self.hub.connect(match_id, last_id)
        client.abort = transport.abort
        self._streams.add(client)
        response = web.StreamResponse(headers=_SSE_HEADERS)
        try:
            await response.prepare(request)
            await self._pump(response, client)
        except (ConnectionError, RuntimeError):
            pass  # the browser left, or we aborted it
        finally:
            self._streams.discard(client)
            self.hub.disconnect(client)
        return response

    async def _keep_alive(self) -> None:
        """Every ``keepalive`` seconds, a comment line to each stream with nothing queued.

        One timer for all streams, rather than a timeout around every wait of every stream:
        the fan-out's cost per frame and browser is what the latency figure measures.
        """
        while True:
            await asyncio.sleep(self.keepalive)
            for client in list(self._streams):
                if client.queue.empty():
                    client.offer(_KEEPALIVE)

    async def _pump(self, response: web.StreamResponse, client: Client) -> None:
        loop = asyncio.get_running_loop()
        await response.write(_RETRY + b"".join(f.data for f in client.backlog))
        client.backlog = []
        queue = client.queue
        while True:
            first = await queue.get()
            batch = [first]
            while not queue.empty():
                batch.append(queue.get_nowait())
            frames = [f for f in batch if f is not None]
            if len(frames) < len(batch):
                return  # dropped, or the server is stopping
            await response.write(b"".join(f.data for f in frames))
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
    if match is not None and (not isinstance(match, str) or not _MATCH_ID.fullmatch(match)):
        return "bad match id"
    argument: str | None = None
    if action == "seek":
        minute = data.get("minute")
        if not isinstance(minute, str | int) or isinstance(minute, bool):
            return "seek needs a minute"
        try:
            argument = parse_minute(str(minute)).label.rstrip("'")
        except MinutePastPlayError as err:
            argument = err.minute  # the replayer answers with its match's last minute
        except ValueError as err:
            return str(err)
    elif action == "speed":
        speed = data.get("speed")
        if speed == "max":
            argument = "max"
        elif speed is None:
            return f"speed needs a speed: {SPEED_RANGE}"
        else:
            try:  # a JSON number, in the one range
                argument = f"{check_speed(speed):g}"
            except ValueError as err:
                return str(err)
    return str(action), argument, match
