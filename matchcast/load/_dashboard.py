"""``matchcast load --dashboard``: the run's figures as charts in a browser, live over SSE.

A :class:`Dashboard` is a :class:`~matchcast.load._live.LiveSink`. It serves one page (aiohttp,
as ``matchcast web`` does) whose charts (uPlot, shipped in ``matchcast/load/static``, no CDN)
show each second of the run: throughput, latency percentiles, the sender's lag, loss and
duplicates, live matches, and per node for a broker list. Routes:

- ``GET /``: the page; ``GET /static/<file>``: its script, styles and the chart library;
- ``GET /events``: server-sent events: ``history`` (a JSON list of every second so far, or of
  those after the browser's ``Last-Event-ID``), then ``second`` (one row) each second, and
  ``end`` (the run's headline figures) when the report is done;
- ``GET /api/seconds``: the seconds so far and, once finished, the headline figures (JSON).

Each browser has a bounded queue; one that falls too far behind is cut off and, reconnecting
with ``Last-Event-ID``, gets what it missed as one ``history`` event. Streams are capped
(``max_streams``, 503 past it). The server has the guard of every matchcast HTTP server
(:class:`matchcast.web._guard.HttpGuard`): only a Host it is bound to is answered (403
otherwise), so a web page elsewhere cannot read it through DNS rebinding; a request head must
come within 10 s; connections are capped below the descriptor limit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
from collections import deque
from collections.abc import Iterable, Sequence
from importlib import resources
from typing import Any, TextIO

import structlog
from aiohttp import web
from aiohttp.typedefs import Middleware

from matchcast.web._guard import HttpGuard

__all__ = [
    "Dashboard",
    "build_app",
    "headline",
    "jsonable",
    "serve",
    "static_file",
]

_log = structlog.get_logger("matchcast.load.dashboard")


_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
}
_SECURITY = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}
_SSE_HEADERS = {
    **_SECURITY,
    "Content-Type": "text/event-stream; charset=utf-8",
    "X-Accel-Buffering": "no",
}
#: Frames a browser may have waiting before it is cut off (it reconnects and catches up).
QUEUE_FRAMES = 120
#: Seconds of the run the dashboard keeps for a browser that opens it: a day.
HISTORY_SECONDS = 86_400
#: Streams open at once by default.
MAX_STREAMS = 32


def static_file(name: str) -> str:
    """The text of one of the dashboard's packaged files (page, script, chart library)."""
    return (resources.files("matchcast.load") / "static" / name).read_text(encoding="utf-8")


def _dumps(doc: object) -> str:
    """JSON for a browser: NaN and infinities become null, anything odd becomes a string."""
    return json.dumps(jsonable(doc), separators=(",", ":"), default=str)


def jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def headline(report: dict[str, Any]) -> dict[str, Any]:
    """The figures of a final report the page shows under its charts (name -> value)."""
    sender = report.get("sender") or {}
    delivery = report.get("delivery") or {}
    latency = report.get("latency_ms") or {}
    checks = [c for c in report.get("checks") or [] if isinstance(c, dict)]
    failed = sum(1 for c in checks if not c.get("passed"))
    status = "finished"
    if report.get("aborted"):
        status = "aborted"
    elif report.get("interrupted"):
        status = "interrupted"
    elif failed:
        status = f"failed ({failed} check{'s' if failed > 1 else ''})"
    elif checks:
        status = "passed"
    out: dict[str, Any] = {"status": status}
    for name, value in (
        ("sent events/s", sender.get("achieved_events_per_s")),
        ("delivered events/s", delivery.get("delivered_events_per_s")),
        ("latency p50 ms", latency.get("p50")),
        ("latency p99 ms", latency.get("p99")),
        ("latency max ms", latency.get("max")),
        ("lost", delivery.get("lost")),
        ("duplicates", delivery.get("duplicates")),
        ("reordered", delivery.get("reordered")),
        ("publish failures", sender.get("publish_failures")),
    ):
        if value is not None:
            out[name] = value
    if checks:
        out["checks passed"] = f"{len(checks) - failed}/{len(checks)}"
    return out


class _Stream:
    """One browser's pending frames; cut off when more than ``limit`` wait."""

    def __init__(self, limit: int) -> None:
        self.frames: deque[bytes] = deque()
        self.limit = limit
        self.wake = asyncio.Event()
        self.idle = asyncio.Event()  # set when every frame queued has been written
        self.idle.set()
        self.cut = False

    def put(self, frame: bytes) -> None:
        if len(self.frames) >= self.limit:
            self.cut = True
        else:
            self.frames.append(frame)
            self.idle.clear()
        self.wake.set()


def _frame(event: str, data: str, event_id: int | None = None) -> bytes:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {data}\n\n".encode()


async def serve(
    app: web.Application, guard: HttpGuard, host: str, port: int, option: str
) -> web.AppRunner:
    """Run ``app`` on ``host:port`` (port 0: a free one, in the runner's ``addresses``),
    its connections through ``guard`` (the head deadline and connection cap of every matchcast
    HTTP server; its middleware checks each Host). A port that is taken raises OSError naming
    ``option`` (what the user set), leaving nothing behind."""
    runner = web.AppRunner(
        app,
        handle_signals=False,
        access_log=None,
        shutdown_timeout=1.0,
        # A browser that goes away cancels its stream at once and frees its slot.
        handler_cancellation=True,
    )
    await runner.setup()
    try:
        await guard.site(runner, host, port).start()
    except OSError as err:
        await runner.cleanup()
        raise OSError(
            err.errno,
            f"{option}: cannot listen on {host}:{port} ({err.strerror or err}); "
            "choose another port, or 0 for a free one",
        ) from None
    return runner


def build_app(dashboard: Dashboard, middlewares: Iterable[Middleware] = ()) -> web.Application:
    """The dashboard's aiohttp application: its guard's Host check first (only the names it
    is bound to answer, as for ``matchcast web``), then ``middlewares``."""
    app = web.Application(middlewares=[*dashboard.guard.middlewares, *middlewares])
    app.router.add_get("/", dashboard.page)
    app.router.add_get("/index.html", dashboard.page)
    app.router.add_get("/static/{name}", dashboard.static)
    app.router.add_get("/events", dashboard.events)
    app.router.add_get("/api/seconds", dashboard.seconds)
    return app


class Dashboard:
    """The live dashboard of a load run (a :class:`~matchcast.load._live.LiveSink`).

    Args:
        host: address to bind; 127.0.0.1 keeps the page on this machine.
        port: TCP port; 0 picks a free one (see :attr:`port` after :meth:`start`).
        middlewares: aiohttp middlewares put in front of the routes.
        max_streams: event streams open at once; past it a new one gets 503.
        keepalive: seconds of silence after which a comment line goes to each browser.
        title: shown in the page's heading.
        history: the most recent seconds a browser gets when it opens the page (the report
            keeps them all); bounds the memory of a run of days.
        announce: where to write ``dashboard: URL`` once listening (standard error from
            the command line, so the user sees the address whatever the log level).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        middlewares: Sequence[Middleware] = (),
        max_streams: int = MAX_STREAMS,
        keepalive: float = 15.0,
        title: str = "matchcast load",
        history: int = HISTORY_SECONDS,
        announce: TextIO | None = None,
    ) -> None:
        if max_streams < 1:
            raise ValueError(f"max_streams must be at least 1, not {max_streams}")
        self.host = host
        self.port = port
        self.guard = HttpGuard(host)
        self.middlewares = list(middlewares)
        self.max_streams = max_streams
        self.keepalive = keepalive
        self.title = title
        self.announce = announce
        self.rows: deque[tuple[int, str]] = deque(maxlen=history)
        self.last_t = -1
        self.summary: dict[str, Any] | None = None
        self.refused_rows = 0
        self._streams: set[_Stream] = set()
        self._runner: web.AppRunner | None = None
        self._files = {
            name: (static_file(name).encode(), _TYPES["." + name.rpartition(".")[2]])
            for name in ("dashboard.js", "dashboard.css", "uPlot.iife.min.js", "uPlot.min.css")
        }
        self._page = static_file("dashboard.html").replace("{{title}}", _html_text(title)).encode()

    @property
    def url(self) -> str:
        """The page's address."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    @property
    def streams(self) -> int:
        """Event streams open now."""
        return len(self._streams)

    # ------------------------------------------------------------ LiveSink

    async def start(self) -> None:
        """Listen; raises OSError if the port is taken."""
        self._runner = await serve(
            build_app(self, self.middlewares), self.guard, self.host, self.port, "--dashboard"
        )
        self.port = self._runner.addresses[0][1]
        _log.info("dashboard.started", url=self.url)
        if self.announce is not None:
            print(f"dashboard: {self.url}", file=self.announce, flush=True)

    def second(self, row: dict[str, Any]) -> None:
        """Keep the row and queue it for every browser; a row that is no JSON object with an
        integer ``t`` after the last one is counted and left out."""
        t = row.get("t") if isinstance(row, dict) else None
        if not isinstance(t, int) or isinstance(t, bool) or t <= self.last_t:
            self.refused_rows += 1
            _log.warning("dashboard.row_refused", t=repr(t)[:40], last_t=self.last_t)
            return
        try:
            data = _dumps(row)
        except (TypeError, ValueError, RecursionError) as err:  # JSON cannot hold it (a cycle)
            self.refused_rows += 1
            _log.warning("dashboard.row_refused", t=t, error=str(err)[:200])
            return
        self.rows.append((t, data))
        self.last_t = t
        frame = _frame("second", data, t)
        for stream in self._streams:
            stream.put(frame)

    async def finish(self, report: dict[str, Any]) -> None:
        """Send the run's headline figures to every browser; the page shows it is finished."""
        self.summary = headline(report)
        frame = _frame("end", _dumps(self.summary))
        for stream in self._streams:
            stream.put(frame)
        # Give the browsers a moment to read the end before the server goes (never blocks
        # the exit for long: a stuck browser is cut off by close()).
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                await asyncio.gather(*(s.idle.wait() for s in self._streams))

    async def close(self) -> None:
        """Stop listening and end every stream."""
        for stream in list(self._streams):
            stream.cut = True
            stream.wake.set()
            stream.idle.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
            _log.info("dashboard.stopped", seconds=len(self.rows), refused_rows=self.refused_rows)

    # ------------------------------------------------------------ routes

    async def page(self, _request: web.Request) -> web.Response:
        return web.Response(body=self._page, headers={**_SECURITY, "Content-Type": _TYPES[".html"]})

    async def static(self, request: web.Request) -> web.Response:
        found = self._files.get(request.match_info["name"])
        if found is None:
            return web.Response(status=404, text="not found\n", headers=_SECURITY)
        body, ctype = found
        return web.Response(body=body, headers={**_SECURITY, "Content-Type": ctype})

    async def seconds(self, _request: web.Request) -> web.Response:
        rows = ",".join(data for _, data in self.rows)
        body = '{"seconds":[' + rows + '],"summary":' + _dumps(self.summary) + "}"
        return web.Response(text=body, headers={**_SECURITY, "Content-Type": "application/json"})

    def _history(self, after: int) -> bytes:
        rows = [data for t, data in self.rows if t > after]
        if not rows:
            return b""
        return _frame("history", "[" + ",".join(rows) + "]", self.last_t)

    async def events(self, request: web.Request) -> web.StreamResponse:
        if len(self._streams) >= self.max_streams:
            _log.warning("http.refused", status=503, reason="too many streams")
            return web.Response(
                status=503,
                text=f"at most {self.max_streams} dashboards at once; close one\n",
                headers=_SECURITY,
            )
        last = request.headers.get("Last-Event-ID", "")
        after = int(last) if last.isdigit() and len(last) < 12 else -1
        response = web.StreamResponse(headers=_SSE_HEADERS)
        stream = _Stream(QUEUE_FRAMES)
        self._streams.add(stream)
        try:
            await response.prepare(request)
            await response.write(b"retry: 1000\n\n" + self._history(after))
            if self.summary is not None:
                await response.write(_frame("end", _dumps(self.summary)))
            await self._drain(stream, response)
        except ConnectionError:
            pass  # the browser went away
        finally:
            self._streams.discard(stream)
        return response

    async def _drain(self, stream: _Stream, response: web.StreamResponse) -> None:
        while not stream.cut:
            try:
                async with asyncio.timeout(self.keepalive):
                    await stream.wake.wait()
            except TimeoutError:
                await response.write(b": keepalive\n\n")
                continue
            stream.wake.clear()
            if stream.cut:
                break
            chunk = b"".join(stream.frames)
            stream.frames.clear()
            await response.write(chunk)
            if not stream.frames:
                stream.idle.set()
        if len(stream.frames) >= stream.limit:
            _log.info("dashboard.stream_cut", pending=len(stream.frames))


def _html_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
