"""The checks every HTTP server of matchcast puts in front of its routes, in one place.

What it guards against, and how:

- **DNS rebinding.** A page on another site may make a browser send requests to a server on
  this machine under the attacker's host name. Every request's ``Host`` must name this server:
  bound to a loopback address, ``127.0.0.1``/``::1`` and ``localhost``; bound to ``0.0.0.0`` or
  ``::``, the machine's own addresses and host names; bound to one address or name, that one;
  plus each ``allowed_hosts`` entry (a reverse proxy's public name; ``.example.org`` also
  allows every name under it). Anything else gets 403 and a ``web.host_refused`` log line.
- **A secret for commands.** With a ``token``, :meth:`HttpGuard.authorized` is true only for a
  request that carries it: the ``matchcast_token`` cookie, or ``Authorization: Bearer``. A
  browser opens the page once as ``/?token=...``; the guard answers with the cookie
  (``HttpOnly``, ``SameSite=Strict``) and a redirect to the same path without the token, so it
  leaves the address bar and the browser's history. A wrong token gets 403
  (``web.token_refused``). The token is never logged: paths are logged without their query.
- **Slow and half-open connections.** A request head must arrive whole within
  ``head_timeout`` seconds of the connection opening or of the previous answer ending;
  a connection that takes longer is closed. At most ``max_connections`` connections are open at
  once, half-open ones included (the cap sits below the descriptor limit,
  :func:`default_max_connections`): past it the connection that has waited longest for its
  head is shed to make room, or, when every connection is busy with a request, the new one is
  closed. Shed connections are logged as ``http.shed`` (at most one line a second, with counts).

To guard a server: make an :class:`HttpGuard`, pass :attr:`HttpGuard.middlewares` to
:class:`aiohttp.web.Application`, and listen through :meth:`HttpGuard.site` instead of
:class:`aiohttp.web.TCPSite`::

    guard = HttpGuard("127.0.0.1", allowed_hosts=["stats.example.org"])
    app = web.Application(middlewares=guard.middlewares)
    runner = web.AppRunner(app)
    await runner.setup()
    site = guard.site(runner, "127.0.0.1", 8080)
    await site.start()

:func:`guard_middlewares` is the middleware alone, for a server whose sockets are made elsewhere.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import resource
import socket
import time
from collections.abc import Awaitable, Callable, Iterable

import structlog
from aiohttp import web
from aiohttp.typedefs import Middleware
from aiohttp.web_protocol import RequestHandler

from events import clip

__all__ = [
    "COOKIE",
    "HEAD_TIMEOUT",
    "MAX_CONNECTIONS",
    "HttpGuard",
    "bound_to_loopback",
    "check_allowed_host",
    "default_max_connections",
    "guard_middlewares",
    "host_names",
]

#: The cookie a browser keeps the token in.
COOKIE = "matchcast_token"
#: Seconds a request head may take to arrive, from the connection's start or the last answer.
HEAD_TIMEOUT = 10.0
#: The most connections open at once by default, whatever the descriptor limit allows.
MAX_CONNECTIONS = 1200

_log = structlog.get_logger("matchcast.web")
_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_ANY = frozenset({"0.0.0.0", "::", ""})  # noqa: S104 (names of the wildcard, not a bind)
_HOSTNAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-.")


#: Descriptors kept free below the open-file limit: a burst of accepts (the listen backlog,
#: 128) may come before the sockets shed in the burst before it are closed, and the broker
#: connections, files and everything else need some.
_FD_RESERVE = 2 * 128 + 64


def default_max_connections() -> int:
    """:data:`MAX_CONNECTIONS`, or less where the open-file limit is lower: that limit less a
    reserve (``_FD_RESERVE``: 704 of 1,024), and never below half of it plus one (where the
    stream cap is)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(2, min(MAX_CONNECTIONS, max(soft - _FD_RESERVE, soft // 2 + 1)))


def bound_to_loopback(host: str) -> bool:
    """Whether an address to bind keeps the server on this machine."""
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _own_names() -> set[str]:
    """This machine's host names and addresses, as far as the system tells them."""
    names = set(_LOOPBACK_NAMES)
    for name in {socket.gethostname(), socket.getfqdn()}:
        if not name:
            continue
        names.add(name.lower())
        try:
            infos = socket.getaddrinfo(name, None)
        except OSError:
            continue
        names.update(str(info[4][0]).lower() for info in infos)
    for family, probe in ((socket.AF_INET, "192.0.2.1"), (socket.AF_INET6, "2001:db8::1")):
        try:  # the address a packet out would leave from: no packet is sent
            with socket.socket(family, socket.SOCK_DGRAM) as s:
                s.connect((probe, 9))
                names.add(str(s.getsockname()[0]).lower())
        except OSError:
            continue
    return names


def host_names(bound_host: str) -> frozenset[str]:
    """The names a request's ``Host`` may give for a server bound to ``bound_host``."""
    host = bound_host.strip("[]").lower()
    if host in _ANY:
        return frozenset(_own_names())
    if bound_to_loopback(host):
        return frozenset({host, *_LOOPBACK_NAMES})
    return frozenset({host})


def check_allowed_host(value: str) -> str:
    """An ``--allowed-host`` entry, lower-cased: a host name (``.name`` for it and every name
    under it) or an IP address, without a port. Raises ValueError saying what is wrong."""
    name = value.strip().lower()
    bare = name.strip("[]")
    try:
        ipaddress.ip_address(bare)
    except ValueError:
        pass
    else:
        return bare
    labels = name.removeprefix(".").split(".")
    if (
        not name
        or len(name) > 253
        or not set(name) <= _HOSTNAME_CHARS
        or any(not label or len(label) > 63 for label in labels)
        or any(label.startswith("-") or label.endswith("-") for label in labels)
    ):
        raise ValueError(
            f"allowed host {clip(value)!r}: expected a host name (letters, digits, '-', '.'; "
            "'.example.org' for a domain and its subdomains) or an IP address, without a port"
        )
    return name


def _host_of(header: str) -> str | None:
    """The host name of a ``Host`` header, lower-cased and without its port; None if malformed."""
    header = header.strip().lower()
    if header.startswith("["):
        end = header.find("]")
        name, port = (header[1:end], header[end + 1 :]) if end > 0 else ("", "")
    else:
        name, colon, rest = header.partition(":")
        port = colon + rest
    if port and not (port[0] == ":" and port[1:].isascii() and port[1:].isdigit()):
        return None
    return name.removesuffix(".") or None


class HttpGuard:
    """Host check, token and connection limits for one HTTP server (see the module's text).

    Args:
        bound_host: the address the server listens on.
        allowed_hosts: more names a ``Host`` may give (checked by :func:`check_allowed_host`).
        token: the secret :meth:`authorized` asks for; None: every request is authorized.
        max_connections: connections open at once; by default :func:`default_max_connections`.
        head_timeout: seconds a request head may take to arrive.
    """

    def __init__(
        self,
        bound_host: str,
        allowed_hosts: Iterable[str] = (),
        *,
        token: str | None = None,
        max_connections: int | None = None,
        head_timeout: float = HEAD_TIMEOUT,
    ) -> None:
        allowed = [check_allowed_host(h) for h in allowed_hosts]
        self.names = host_names(bound_host) | {h for h in allowed if not h.startswith(".")}
        self.domains = tuple(h for h in allowed if h.startswith("."))
        self.token = token
        self.max_connections = (
            default_max_connections() if max_connections is None else max_connections
        )
        if self.max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, not {self.max_connections}")
        self.head_timeout = head_timeout
        self.shed = 0
        self.hosts_refused = 0
        self._conns: dict[RequestHandler, _Guarded] = {}
        self._shed_log = _ShedLog()

    # ------------------------------------------------------------ requests

    @property
    def middlewares(self) -> list[Middleware]:
        """The middleware to put first in the application's list."""
        return [self._middleware]

    def allows_host(self, header: str | None) -> bool:
        """Whether a ``Host`` header names this server."""
        if header is None:
            return False
        host = _host_of(header)
        if not host:
            return False
        return host in self.names or any(host == d[1:] or host.endswith(d) for d in self.domains)

    def authorized(self, request: web.BaseRequest) -> bool:
        """Whether the request carries the token (always, when there is none)."""
        if self.token is None:
            return True
        given = request.cookies.get(COOKIE)
        if given is None:
            scheme, _, value = request.headers.get("Authorization", "").partition(" ")
            given = value.strip() if scheme.lower() == "bearer" else None
        return given is not None and _same(given, self.token)

    @web.middleware
    async def _middleware(self, request: web.Request, handler: _Handler) -> web.StreamResponse:
        conn = self._conns.get(request.protocol)
        if conn is not None:
            conn.busy()
        try:
            return await self._checked(request, handler)
        finally:
            if conn is not None:
                conn.waiting()

    async def _checked(self, request: web.Request, handler: _Handler) -> web.StreamResponse:
        header = request.headers.get("Host")
        target = request.url.host if not request.raw_path.startswith("/") else None
        if not self.allows_host(header) or (target is not None and not self.allows_host(target)):
            self.hosts_refused += 1
            _log.warning(
                "web.host_refused",
                host=clip(header) if header is not None else None,
                path=clip(request.path),
                remote=request.remote,
            )
            return web.Response(status=403, text="this server does not answer to that host name\n")
        given = request.query.get("token")
        if given is not None and self.token is not None and request.method == "GET":
            if not _same(given, self.token):
                _log.warning("web.token_refused", path=clip(request.path), remote=request.remote)
                return web.Response(status=403, text="wrong token\n")
            query = {k: v for k, v in request.query.items() if k != "token"}
            location = str(request.rel_url.with_query(query))
            response = web.Response(status=303, headers={"Location": location})
            response.set_cookie(COOKIE, self.token, httponly=True, samesite="Strict", path="/")
            return response
        return await handler(request)

    # ------------------------------------------------------------ connections

    def site(self, runner: web.BaseRunner, host: str, port: int) -> web.TCPSite:
        """A listening site for ``runner`` whose connections go through this guard."""
        return _GuardedSite(self, runner, host, port)

    @property
    def connections(self) -> int:
        """Connections open now."""
        return len(self._conns)

    def _wrap(self, inner: RequestHandler) -> _Guarded:
        return _Guarded(self, inner)

    def _admit(self, conn: _Guarded) -> bool:
        if len(self._conns) >= self.max_connections:
            waiting = [c for c in self._conns.values() if c.since is not None]
            if not waiting:
                self._note_shed("every connection busy: the new one is closed")
                return False
            oldest = min(waiting, key=lambda c: c.since or 0.0)
            self._note_shed("connection cap: the one waiting longest for its head is closed")
            oldest.close()
        self._conns[conn.inner] = conn
        return True

    def _release(self, conn: _Guarded) -> None:
        if self._conns.get(conn.inner) is conn:
            del self._conns[conn.inner]

    def _note_shed(self, reason: str) -> None:
        self.shed += 1
        self._shed_log.note(reason, self)


class _ShedLog:
    """``http.shed`` lines, at most one a second, each with the counts since the last."""

    def __init__(self) -> None:
        self.last = 0.0
        self.pending: dict[str, int] = {}

    def note(self, reason: str, guard: HttpGuard) -> None:
        self.pending[reason] = self.pending.get(reason, 0) + 1
        now = time.monotonic()
        if now - self.last < 1.0:
            return
        self.last = now
        for why, count in self.pending.items():
            _log.warning(
                "http.shed",
                reason=why,
                count=count,
                total=guard.shed,
                open=guard.connections,
                max_connections=guard.max_connections,
            )
        self.pending = {}


def _same(given: str, token: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8", "replace"), token.encode("utf-8", "replace"))


class _Guarded(asyncio.Protocol):
    """aiohttp's connection handler with a head deadline, counted by its guard."""

    def __init__(self, guard: HttpGuard, inner: RequestHandler) -> None:
        self.guard = guard
        self.inner = inner
        self.transport: asyncio.Transport | None = None
        self.since: float | None = None  # when it began waiting for a head; None while busy
        self._deadline: asyncio.TimerHandle | None = None
        self._admitted = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if not self.guard._admit(self):
            transport.abort()  # type: ignore[attr-defined]
            return
        self._admitted = True
        self.inner.connection_made(transport)
        self.waiting()

    def waiting(self) -> None:
        """Between requests: the next head must come within the guard's head_timeout."""
        if not self._admitted or self.transport is None or self.transport.is_closing():
            return
        self.since = time.monotonic()
        self._cancel_deadline()
        loop = asyncio.get_running_loop()
        self._deadline = loop.call_later(self.guard.head_timeout, self._too_slow)

    def busy(self) -> None:
        """A head arrived: no deadline while its request is handled."""
        self.since = None
        self._cancel_deadline()

    def _too_slow(self) -> None:
        self._deadline = None
        if self.since is not None:
            self.guard._note_shed(f"no request head within {self.guard.head_timeout:g} s")
            self.close()

    def close(self) -> None:
        self._cancel_deadline()
        self.since = None
        if self.transport is not None:
            self.transport.abort()

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def data_received(self, data: bytes) -> None:
        if self._admitted:
            self.inner.data_received(data)

    def eof_received(self) -> None:
        if self._admitted:
            self.inner.eof_received()

    def pause_writing(self) -> None:
        if self._admitted:
            self.inner.pause_writing()

    def resume_writing(self) -> None:
        if self._admitted:
            self.inner.resume_writing()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._cancel_deadline()
        self.guard._release(self)
        if self._admitted:
            self.inner.connection_lost(exc)


class _GuardedSite(web.TCPSite):
    """:class:`aiohttp.web.TCPSite`, its connections made through the guard."""

    def __init__(self, guard: HttpGuard, runner: web.BaseRunner, host: str, port: int) -> None:
        super().__init__(runner, host, port)
        self._guard = guard

    async def start(self) -> None:
        await web.BaseSite.start(self)
        server = self._runner.server
        if server is None:
            raise RuntimeError("call runner.setup() before starting a site")
        guard = self._guard

        def factory() -> asyncio.Protocol:
            return guard._wrap(server())

        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            factory,
            self._host,
            self._port,
            backlog=self._backlog,
            reuse_address=self._reuse_address,
            reuse_port=self._reuse_port,
        )
        sockets = self._server.sockets
        self._bound_port = sockets[0].getsockname()[1] if sockets else self._port


def guard_middlewares(
    bound_host: str, allowed_hosts: Iterable[str] = (), token: str | None = None
) -> list[Middleware]:
    """The host check and token exchange alone (no connection limits), as aiohttp middlewares."""
    return HttpGuard(bound_host, allowed_hosts, token=token).middlewares
