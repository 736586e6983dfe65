"""Figures of a consumer runner, as Prometheus metrics and in its final log.

The runner is measured from outside: :meth:`RunnerMetrics.instrument` wraps each subscriber's
handlers to time them and to read how far behind the schedule each event is handled, and a
collector reads the runner's own counters and queue depth when Prometheus scrapes.

Metrics (prefix ``matchcast_consumer_``): ``events_handled_total``, ``handler_errors_total``
(by subscriber), ``handler_seconds`` and ``lag_seconds`` histograms, ``queue_depth``, and every
``RunnerStats`` counter as ``runner_{name}_total``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from consumers import Runner, Subscriber
from consumers._subscriber import call_handler
from events import Event, MatchState
from matchcast.load._accounting import LatencySeries, histogram_summary

__all__ = ["RunnerMetrics"]

_BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
            0.25, 0.5, 1.0, 2.5, 5.0, 10.0)  # fmt: skip


class _RunnerCollector(Collector):
    def __init__(self, runner: Runner) -> None:
        self.runner = runner

    def collect(self) -> Iterator[Any]:
        for name, value in self.runner.stats.as_dict().items():
            family = CounterMetricFamily(
                f"matchcast_consumer_runner_{name}", f"Runner counter {name}"
            )
            family.add_metric([], value)
            yield family
        depth = GaugeMetricFamily(
            "matchcast_consumer_queue_depth", "Events queued for the handlers, all matches"
        )
        depth.add_metric([], self.runner.queue_depth)
        yield depth


class RunnerMetrics:
    """Instruments subscribers and a runner; serves the figures over HTTP if asked.

    Args:
        registry: where the metrics live (a fresh one by default, so tests don't collide).
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.handled = Counter(
            "matchcast_consumer_events_handled",
            "Handler calls that returned normally",
            ["subscriber"],
            registry=self.registry,
        )
        self.errors = Counter(
            "matchcast_consumer_handler_errors",
            "Handler calls that raised",
            ["subscriber"],
            registry=self.registry,
        )
        self.handler_seconds = Histogram(
            "matchcast_consumer_handler_seconds",
            "Time spent in one handler call",
            ["subscriber"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.lag_seconds = Histogram(
            "matchcast_consumer_lag_seconds",
            "How long after its scheduled_at an event reached a handler",
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.processing_us = LatencySeries()
        self.lag_us = LatencySeries()
        self._t0 = time.monotonic()
        self.runner: Runner | None = None

    def watch(self, runner: Runner) -> None:
        """Expose ``runner``'s counters and queue depth."""
        self.runner = runner
        self.registry.register(_RunnerCollector(runner))

    async def serve(self, port: int, addr: str = "127.0.0.1") -> web.AppRunner:
        """Serve ``/metrics`` on ``addr:port`` behind the guard of every matchcast HTTP server
        (only the host names it is bound to, a head deadline, a connection cap); the caller
        cleans the runner up. A port that is taken raises OSError naming ``--metrics-port``."""
        from matchcast.load._dashboard import serve  # noqa: PLC0415 - aiohttp's stack, shared
        from matchcast.web._guard import HttpGuard  # noqa: PLC0415

        guard = HttpGuard(addr)

        async def metrics(request: web.Request) -> web.Response:
            body = generate_latest(self.registry)
            return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

        app = web.Application(middlewares=guard.middlewares)
        app.router.add_get("/metrics", metrics)
        return await serve(app, guard, addr, port, "--metrics-port")

    def instrument(self, subscriber: Subscriber) -> Subscriber:
        """A copy of ``subscriber`` whose handlers are timed and counted."""
        out = Subscriber(subscriber.name)
        handled = self.handled.labels(subscriber.name)
        errors = self.errors.labels(subscriber.name)
        seconds = self.handler_seconds.labels(subscriber.name)
        for reg in subscriber.registrations:
            wrapped = self._wrap(reg.handler, handled, errors, seconds)
            wrapped.__qualname__ = reg.name
            out.on(*reg.event_types, match=reg.match_id)(wrapped)
        for handler in subscriber.state_handlers:
            out.on_state(handler)
        return out

    def _wrap(
        self,
        fn: Callable[[Any, MatchState], Awaitable[None] | None],
        handled: Any,
        errors: Any,
        seconds: Any,
    ) -> Callable[[Any, MatchState], Awaitable[None]]:
        async def timed(event: Event, state: MatchState) -> None:
            start = time.perf_counter()
            if event.scheduled_at is not None:
                lag = time.time() - event.scheduled_at.timestamp()
                self.lag_seconds.observe(max(lag, 0.0))
                self.lag_us.add(int(time.monotonic() - self._t0), int(lag * 1e6))
            try:
                await call_handler(fn, event, state)
            except Exception:
                errors.inc()
                raise
            finally:
                took = time.perf_counter() - start
                seconds.observe(took)
                self.processing_us.add(int(time.monotonic() - self._t0), int(took * 1e6))
            handled.inc()

        return timed

    def summary(self) -> dict[str, Any]:
        """The figures for the final log: runner counters, handler time and lag in ms."""
        out: dict[str, Any] = {}
        if self.runner is not None:
            out.update(self.runner.stats.as_dict())
            out["queue_depth"] = self.runner.queue_depth
        out["handler_ms"] = histogram_summary(self.processing_us.histogram())
        out["lag_ms"] = histogram_summary(self.lag_us.histogram())
        return out
