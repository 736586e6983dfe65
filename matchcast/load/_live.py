"""Where a load run's figures go while it runs: the :class:`LiveSink` protocol.

Each second the orchestration hands every sink one row of figures (the keys below, the same
dict as a ``--live json`` line and as the extra keys of a report's ``per_second`` row), and the
final report at the end::

    {"kind": "matchcast-load-second", "t": 12,
     "offered": 400, "sent": 400, "delivered": 800,              # events in that second
     "latency_p50": 1.2, "latency_p99": 4.0, "latency_max": 9.1, # ms, null if none
     "sender_lag_ms": 0.4,                                       # max in the second
     "lost": 0, "duplicates": 0, "reordered": 0,                 # cumulative so far
     "live_matches": 50, "subscribers": 2, "connections": 3,
     "nodes": {"mqtt://h:p": {"delivered": 400, "latency_p99": 3.9}}}  # {} for one broker
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["LiveSink"]


class LiveSink(Protocol):
    """One consumer of the figures of a run, called by the orchestration."""

    async def start(self) -> None:
        """Before the run: bind ports, open files."""

    def second(self, row: dict[str, Any]) -> None:
        """One second's figures; never blocks."""

    async def finish(self, report: dict[str, Any]) -> None:
        """The final report dict."""

    async def close(self) -> None:
        """Always called last, also on Ctrl-C or an aborted run."""
