"""The live match page: a bridge subscriber, a fan-out hub, and its aiohttp SSE server.

::

    hub = Hub()
    async with WebServer(hub, port=8000):
        await run_watch(url, [bridge(hub)])

The page itself (HTML, CSS, vanilla JS) is in ``static/`` and served from the package.
"""

from matchcast.web._bridge import bridge
from matchcast.web._guard import HttpGuard, bound_to_loopback, check_allowed_host
from matchcast.web._hub import Client, Frame, Hub, HubStats
from matchcast.web._server import ControlSender, WebServer

__all__ = [
    "Client",
    "ControlSender",
    "Frame",
    "HttpGuard",
    "Hub",
    "HubStats",
    "WebServer",
    "bound_to_loopback",
    "bridge",
    "check_allowed_host",
]
