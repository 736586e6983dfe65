"""A load run's seconds and report as the orchestration hands them to its sinks (docs/load.md),
for the tests of the dashboard, the HTML report and the metrics that show them."""

from __future__ import annotations

from typing import Any

__all__ = ["REPORT", "row"]


def row(t: int, **extra: Any) -> dict[str, Any]:
    """A second as the orchestration sends it (docs/load.md)."""
    return {
        "kind": "matchcast-load-second",
        "t": t,
        "offered": 100 + t,
        "sent": 100 + t,
        "delivered": 200 + t,
        "latency_p50": 1.5,
        "latency_p99": 4.0,
        "latency_max": 9.0,
        "sender_lag_ms": 0.2,
        "lost": 0,
        "duplicates": 0,
        "reordered": 0,
        "live_matches": 10,
        "subscribers": 2,
        "connections": 3,
        "nodes": {},
        **extra,
    }


REPORT: dict[str, Any] = {
    "kind": "matchcast-load-report",
    "sender": {"achieved_events_per_s": 101.0, "publish_failures": 0},
    "delivery": {"delivered_events_per_s": 202.0, "lost": 0, "duplicates": 1, "reordered": 0},
    "latency_ms": {"p50": 1.5, "p99": 4.0, "max": 9.0},
    "checks": [{"expr": "lost == 0", "passed": True}, {"expr": "p99 < 1ms", "passed": False}],
    "per_second": [row(0), row(1), row(2)],
}
