"""``matchcast load --metrics-port``: the run's figures as Prometheus metrics while it runs.

A :class:`LoadMetrics` is a :class:`~matchcast.load._live.LiveSink`: each second's row updates
the metrics below, and an aiohttp server (:func:`build_metrics_app`, which takes the
``middlewares`` to put in front) answers ``GET /metrics`` in Prometheus' text format. The
Grafana dashboard in ``deploy/grafana`` charts them (docs/load.md).

Metrics (prefix ``matchcast_load_``; latencies of the last second, in seconds):

========================================  =======  ===============================================
``offered_events_total``                  counter  events the schedule offered
``sent_events_total``                     counter  events published
``delivered_events_total``                counter  events the probes received (summed over them)
``latency_p50_seconds`` / ``_p99_`` /     gauge    latency from the schedule in the last second
``latency_max_seconds``                            (NaN in a second with no delivery)
``sender_lag_seconds``                    gauge    how far the sender is behind its schedule
``lost_events``, ``duplicate_events``,    gauge    so far (lost: not delivered ``--drain-idle``
``reordered_events``                               seconds after its schedule)
``live_matches``, ``subscribers``,        gauge    now
``connections``
``node_delivered_events_total{node}``     counter  per broker of a broker list
``node_latency_p99_seconds{node}``        gauge    per broker, last second
``elapsed_seconds``                       gauge    seconds of the run so far
``running``                               gauge    1 while the run goes, 0 once its report is done
========================================  =======  ===============================================
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, TextIO

import structlog
from aiohttp import web
from aiohttp.typedefs import Middleware
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    generate_latest,
)

from matchcast.load._dashboard import serve
from matchcast.web._guard import HttpGuard

__all__ = ["LoadMetrics", "build_metrics_app"]

_log = structlog.get_logger("matchcast.load.metrics")
_P = "matchcast_load_"
#: Row keys of a count in that second -> counter.
_COUNTS = {"offered": "offered_events", "sent": "sent_events", "delivered": "delivered_events"}
#: Row keys in ms -> gauge in seconds.
_MS = {
    "latency_p50": "latency_p50_seconds",
    "latency_p99": "latency_p99_seconds",
    "latency_max": "latency_max_seconds",
    "sender_lag_ms": "sender_lag_seconds",
}
#: Row keys of a level -> gauge.
_LEVELS = {
    "lost": "lost_events",
    "duplicates": "duplicate_events",
    "reordered": "reordered_events",
    "live_matches": "live_matches",
    "subscribers": "subscribers",
    "connections": "connections",
}
_HELP = {
    "offered_events": "Events the schedule offered",
    "sent_events": "Events published",
    "delivered_events": "Events the probe subscribers received, summed over them",
    "latency_p50_seconds": "Median latency from the schedule in the last second",
    "latency_p99_seconds": "99th percentile latency from the schedule in the last second",
    "latency_max_seconds": "Largest latency from the schedule in the last second",
    "sender_lag_seconds": "How far the sender is behind its schedule (max in the last second)",
    "lost_events": "Events lost so far",
    "duplicate_events": "Duplicate deliveries so far",
    "reordered_events": "Events delivered after a later one, so far",
    "live_matches": "Matches being sent now",
    "subscribers": "Probe subscribers now",
    "connections": "MQTT connections of the load process now",
}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


class LoadMetrics:
    """The figures of a load run as Prometheus metrics, served on ``host:port``.

    Args:
        port: TCP port for ``/metrics``; 0 picks a free one (see :attr:`port` after start).
        host: address to bind; 127.0.0.1 keeps the figures on this machine.
        middlewares: aiohttp middlewares put in front of the route.
        registry: where the metrics live (a fresh one by default, so runs never collide).
        announce: where to write ``metrics: URL`` once listening.
    """

    def __init__(
        self,
        port: int = 0,
        host: str = "127.0.0.1",
        *,
        middlewares: Iterable[Middleware] = (),
        registry: CollectorRegistry | None = None,
        announce: TextIO | None = None,
    ) -> None:
        self.port = port
        self.host = host
        self.guard = HttpGuard(host)
        self.middlewares = list(middlewares)
        self.registry = registry or CollectorRegistry()
        self.refused_rows = 0
        self.announce = announce
        reg = self.registry
        self.counters = {
            key: Counter(_P + name, _HELP[name], registry=reg) for key, name in _COUNTS.items()
        }
        self.gauges = {
            key: Gauge(_P + name, _HELP[name], registry=reg)
            for key, name in {**_MS, **_LEVELS}.items()
        }
        self.node_delivered = Counter(
            _P + "node_delivered_events",
            "Events the probes received from one broker of the list",
            ["node"],
            registry=reg,
        )
        self.node_p99 = Gauge(
            _P + "node_latency_p99_seconds",
            "99th percentile latency of one broker's deliveries in the last second",
            ["node"],
            registry=reg,
        )
        self.elapsed = Gauge(_P + "elapsed_seconds", "Seconds of the run so far", registry=reg)
        self.running = Gauge(
            _P + "running", "1 while the run goes, 0 once its report is done", registry=reg
        )
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        """Where Prometheus scrapes."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    async def start(self) -> None:
        """Listen; raises OSError if the port is taken."""
        self._runner = await serve(
            build_metrics_app(self, self.middlewares),
            self.guard,
            self.host,
            self.port,
            "--metrics-port",
        )
        self.port = self._runner.addresses[0][1]
        self.running.set(1)
        _log.info("metrics.started", url=self.url)
        if self.announce is not None:
            print(f"metrics: {self.url}", file=self.announce, flush=True)

    def second(self, row: dict[str, Any]) -> None:
        """Update the metrics from one second's row; a row that is no dict is counted and
        left out, a figure that is no number is skipped (a latency is NaN then)."""
        if not isinstance(row, dict):
            self.refused_rows += 1
            _log.warning("metrics.row_refused", type=type(row).__name__)
            return
        for key, counter in self.counters.items():
            count = _number(row.get(key))
            if count is not None and count > 0:
                counter.inc(count)
        for key, gauge in self.gauges.items():
            value = _number(row.get(key))
            if key in _MS:
                gauge.set(math.nan if value is None else value / 1000)
            elif value is not None:
                gauge.set(value)
        t = _number(row.get("t"))
        if t is not None:
            self.elapsed.set(t + 1)
        nodes = row.get("nodes")
        if isinstance(nodes, dict):
            for node, figures in nodes.items():
                if not isinstance(figures, dict):
                    continue
                delivered = _number(figures.get("delivered"))
                if delivered is not None and delivered > 0:
                    self.node_delivered.labels(str(node)).inc(delivered)
                p99 = _number(figures.get("latency_p99"))
                self.node_p99.labels(str(node)).set(math.nan if p99 is None else p99 / 1000)

    async def finish(self, report: dict[str, Any]) -> None:
        """The run is over: ``running`` drops to 0 (the figures stay until close)."""
        self.running.set(0)

    async def close(self) -> None:
        """Stop serving."""
        self.running.set(0)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
            _log.info("metrics.stopped")

    async def metrics(self, _request: web.Request) -> web.Response:
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


def build_metrics_app(
    metrics: LoadMetrics, middlewares: Iterable[Middleware] = ()
) -> web.Application:
    """The ``/metrics`` application: its guard's Host check first (as the dashboard's and
    ``matchcast web``'s), then ``middlewares``."""
    app = web.Application(middlewares=[*metrics.guard.middlewares, *middlewares])
    app.router.add_get("/metrics", metrics.metrics)
    return app
