"""A run's figures each second, and where they go while it runs.

Each second of a run gives a *row* (a dict, the same keys everywhere: the ``--live json``
line, the extra keys of the report's ``per_second`` rows, what a dashboard draws)::

    {"kind": "matchcast-load-second", "t": 3,
     "offered": 600, "sent": 600, "delivered": 1200,        # events in that second
     "latency_p50": 1.2, "latency_p99": 4.0, "latency_max": 9.1,   # ms, null if none
     "sender_lag_ms": 0.4,     # how far the sender was behind its schedule (max in second)
     "lost": 0, "duplicates": 0, "reordered": 0,            # cumulative so far
     "live_matches": 10, "subscribers": 2, "connections": 3,
     "nodes": {}}              # per node of a broker list: delivered, latency_p99

:class:`Seconds` computes them from a :class:`~matchcast.load.LoadRun`; :func:`follow` hands
one to every :class:`LiveSink` each second, evaluates ``--check`` on the figures so far, and
ends the run at the first failed one with ``--abort-on-fail``. Mid-run, ``lost`` counts the
events that were not delivered ``drain_idle_s`` after they were sent (the final report counts
what never arrived at all).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import sys
import time
from collections.abc import Sequence
from typing import IO, Any, Protocol

import structlog

from matchcast.load._accounting import (
    ConsumerAccount,
    LatencySeries,
    LatencyUnion,
    histogram_summary,
)
from matchcast.load._checks import LATENCY_FIGURES, Check
from matchcast.load._run import LoadRun

__all__ = [
    "ROW_KIND",
    "JsonLines",
    "LiveSink",
    "Seconds",
    "TerminalView",
    "follow",
]

_log = structlog.get_logger("matchcast.load")

#: The ``kind`` of a per-second row.
ROW_KIND = "matchcast-load-second"
#: The ``kind`` of the last ``--live json`` line.
END_KIND = "matchcast-load-end"


class LiveSink(Protocol):
    """Somewhere the figures go while a run lasts (the JSON lines, the terminal line, a
    dashboard, Prometheus metrics, an HTML report). The orchestration calls every sink:
    :meth:`start` before the run, :meth:`second` each second, :meth:`finish` with the final
    report, and :meth:`close` always, also after Ctrl-C or an abort."""

    async def start(self) -> None:
        """Before the run (bind ports etc.)."""
        ...

    def second(self, row: dict[str, Any]) -> None:
        """One second's figures; never blocks."""
        ...

    async def finish(self, report: dict[str, Any]) -> None:
        """The final report dict."""
        ...

    async def close(self) -> None:
        """Always called last."""
        ...


def lost_so_far(accounts: Sequence[ConsumerAccount], sent: dict[str, int]) -> int:
    """Events of ``sent`` (last seq per match) some consumer should have and has not."""
    return sum(acc.owed(sent) for acc in accounts)


class Seconds:
    """The per-second rows of a run, computed as it goes (see the module docstring)."""

    def __init__(self, run: LoadRun) -> None:
        self.run = run
        self.rows: dict[int, dict[str, Any]] = {}
        #: What the sender had sent at each second: (second, last seq per match).
        self._sent_at: collections.deque[tuple[int, dict[str, int]]] = collections.deque()
        self.lost = 0
        self._last_running = 0
        #: Every latency received so far (us), at 3 significant digits, as HDR keeps them.
        self._latencies: collections.Counter[int] = collections.Counter()

    def _lost(self, t: int) -> int:
        """Events sent by second ``t - drain_idle_s`` and not yet received."""
        stats = self.run.stats
        self._sent_at.append((t, dict(stats.expected)))
        horizon = t + 1 - self.run.options.drain_idle_s
        due: dict[str, int] | None = None
        while self._sent_at and self._sent_at[0][0] + 1 <= horizon:
            due = self._sent_at.popleft()[1]
        if due is not None:
            self.lost = lost_so_far(self.run.accounts, due)
        return self.lost

    def row(self, t: int, *, final: bool = False) -> dict[str, Any]:
        """The figures of second ``t`` (``final``: the run is over, ``lost`` is left as the
        report counts it)."""
        run = self.run
        stats = run.stats
        n, p50, p99, top = _latency(run.latency, t, self._latencies if not final else None)
        nodes = run.nodes
        row: dict[str, Any] = {
            "kind": ROW_KIND,
            "t": t,
            "offered": stats.offered.get(t, 0),
            "sent": stats.sent.get(t, 0),
            "delivered": n,
            "latency_p50": p50,
            "latency_p99": p99,
            "latency_max": top,
            "sender_lag_ms": round(stats.lag_us.get(t, 0) / 1000, 3),
            "lost": self.lost if final else self._lost(t),
            "duplicates": sum(n.duplicates for n in nodes.values()),
            "reordered": sum(n.reordered for n in nodes.values()),
            "live_matches": self._running(t),
            "subscribers": run.probes_live,
            "connections": run.probes_live + len(run.publisher_nodes),
            "nodes": {} if len(nodes) < 2 else _nodes(run, t),
        }
        self.rows[t] = row
        return row

    def _running(self, t: int) -> int:
        """The most matches running at once in second ``t``: those at its start, or more if
        more started in it."""
        stats = self.run.stats
        now = 0 if stats.finished else stats.matches_running
        at_start, self._last_running = self._last_running, now
        return max(at_start, stats.running_peak.get(t, 0), now if not stats.finished else 0)

    def fill(self) -> list[dict[str, Any]]:
        """Rows for the seconds of a finished run that no live row reached (its end, the
        drain): ``lost`` there is what has not arrived of everything sent, as the report
        counts it."""
        run, stats = self.run, self.run.stats
        last = max([*run.latency.seconds(), *stats.sent, *stats.offered, 0])
        self.lost = lost_so_far(run.accounts, stats.expected)
        return [self.row(t, final=True) for t in range(last + 1) if t not in self.rows]

    def _latency_so_far(self) -> dict[str, float]:
        """p50, p90, p99, p99.9, max and mean (ms) of every second's row so far: from the
        counts the rows kept, not the HDR histograms (whose percentile walk in Python costs
        tens of ms a second, and held up the sender it was measuring)."""
        counts = self._latencies
        if not counts:
            return dict.fromkeys(("p50", "p90", "p99", "p99_9", "max", "mean"), 0.0)
        p50, p90, p99, p999 = _quantiles(counts, (0.5, 0.9, 0.99, 0.999))
        total = sum(counts.values())
        mean = sum(v * n for v, n in counts.items()) / total / 1000
        top = round(max(counts) / 1000, 3)
        return {"p50": p50, "p90": p90, "p99": p99, "p99_9": p999, "max": top, "mean": mean}

    def so_far(self, elapsed: float, *, latency: bool = True) -> dict[str, Any]:
        """The figures of the run so far, as a report holds them (what ``--check`` reads);
        without ``latency`` (no check reads it), no latency percentiles."""
        run, stats = self.run, self.run.stats
        received = sum(n.received for n in run.nodes.values())
        elapsed = max(elapsed, 1e-9)
        return {
            "latency_ms": self._latency_so_far() if latency else {},
            "delivery": {
                "lost": self.lost,
                "duplicates": sum(n.duplicates for n in run.nodes.values()),
                "reordered": sum(n.reordered for n in run.nodes.values()),
                "received": received,
                "delivered_events_per_s": received / elapsed,
            },
            "sender": {
                "publish_failures": stats.failures,
                "overruns": stats.overruns,
                "achieved_events_per_s": stats.events / elapsed,
            },
        }


def _three_digits(us: int) -> int:
    """``us`` to 3 significant digits (the precision of the run's HDR histograms)."""
    if us < 1000:
        return max(us, 1)
    scale: int = 10 ** (len(str(us)) - 3)
    return us // scale * scale


def _quantiles(counts: collections.Counter[int], marks: Sequence[float]) -> list[float]:
    """The values (ms) at the fractions ``marks`` (ascending) of ``counts`` (us -> how many)."""
    total = sum(counts.values())
    wanted = [total * m for m in marks]
    found: list[float] = []
    running = 0
    for v in sorted(counts):
        running += counts[v]
        while wanted and running >= wanted[0]:
            wanted.pop(0)
            found.append(round(v / 1000, 3))
    return found


def _latency(
    series: LatencySeries | LatencyUnion,
    t: int,
    into: collections.Counter[int] | None = None,
) -> tuple[int, float | None, float | None, float | None]:
    """Count, p50, p99 and max (ms) of second ``t``: from its exact counts while it is not
    sealed (a sort of its distinct values, a few ms at most; an HDR histogram's percentile
    walk costs about 10 ms each and would hold up the sender), else from its histogram.
    The counts are added to ``into`` at 3 significant digits."""
    counts = series.counts(t)
    if into is not None:
        for value, n in counts.items():
            into[_three_digits(value)] += n
    total = sum(counts.values())
    if total < series.count(t):  # sealed (a late row): the histogram has it
        hist = series.histogram(t)
        summary = histogram_summary(hist)
        return hist.get_total_count(), summary["p50"], summary["p99"], summary["max"]
    if not total:
        return 0, None, None, None
    p50, p99 = _quantiles(counts, (0.5, 0.99))
    return total, p50, p99, round(max(counts) / 1000, 3)


def _nodes(run: LoadRun, t: int) -> dict[str, Any]:
    out = {}
    for key, tally in run.nodes.items():
        n, _, p99, _ = _latency(tally.latency, t)
        out[key] = {"delivered": n, "latency_p99": p99}
    return out


def _failed(checks: Sequence[Check], figures: dict[str, Any]) -> Check | None:
    return next((c for c in checks if not c.passes(figures)), None)


async def follow(
    run: LoadRun,
    seconds: Seconds,
    sinks: Sequence[LiveSink],
    *,
    checks: Sequence[Check] = (),
    check_delay_s: float = 0.0,
    abort_on_fail: bool = False,
) -> None:
    """Each second of ``run``: a row to every sink; the checks on the figures so far (from
    ``check_delay_s`` on), the run aborted at the first that fails with ``abort_on_fail``;
    a warning the first time the sender falls behind its schedule. Runs until cancelled."""
    await run.sending.wait()
    sender = run.sender
    assert sender is not None
    behind = False
    t = 0
    while True:
        await asyncio.sleep(max(0.0, sender.mono0 + t + 1 - time.monotonic()))
        row = seconds.row(t)
        for sink in sinks:
            try:
                sink.second(row)
            except Exception as err:  # a sink's failure ends no run
                _log.warning("load.sink_failed", sink=type(sink).__name__, error=str(err))
        if not behind and row["sender_lag_ms"] > sender.overrun_us / 1000:
            behind = True
            _log.warning("load.sender_behind", t=t, lag_ms=row["sender_lag_ms"])
        t += 1
        if checks and abort_on_fail and t >= check_delay_s:
            figures = seconds.so_far(
                time.monotonic() - sender.mono0,
                latency=any(c.figure in LATENCY_FIGURES for c in checks),
            )
            failed = _failed(checks, figures)
            if failed is not None:
                actual = failed.actual(figures)
                run.abort({"check": failed.text, "actual": actual, "t": t})
                _log.warning("load.aborted", check=failed.text, actual=actual, t=t)
                return


class JsonLines:
    """``--live json``: one JSON object per line on standard output each second, and a last
    line (``kind`` ``matchcast-load-end``) with the run's outcome."""

    def __init__(self, out: IO[str] | None = None) -> None:
        self.out = out or sys.stdout

    async def start(self) -> None:
        """Nothing to prepare."""

    def second(self, row: dict[str, Any]) -> None:
        """Write the row as one line, flushed."""
        self.out.write(json.dumps(row, separators=(",", ":")) + "\n")
        self.out.flush()

    async def finish(self, report: dict[str, Any]) -> None:
        """The end line: what the run sent and delivered, latency, checks, abort."""
        s, d = report["sender"], report["delivery"]
        end = {
            "kind": END_KIND,
            "interrupted": bool(report.get("interrupted")),
            "aborted": report.get("aborted"),
            "events_published": s["events_published"],
            "received": d["received"],
            "lost": d["lost"],
            "duplicates": d["duplicates"],
            "reordered": d["reordered"],
            "latency_ms": report["latency_ms"],
            "sender_lag_ms": s.get("lag_ms"),
            "behind": s.get("behind"),
            "checks": report.get("checks"),
        }
        self.second(end)

    async def close(self) -> None:
        """Nothing to release."""


class TerminalView:
    """The live line on a terminal, refreshed each second."""

    def __init__(self, console: Any) -> None:
        self.console = console
        self._live: Any = None

    async def start(self) -> None:
        """Show the line (empty until the first second)."""
        from rich.live import Live  # noqa: PLC0415

        self._live = Live("starting", console=self.console, refresh_per_second=2, transient=True)
        self._live.start()

    def second(self, row: dict[str, Any]) -> None:
        """Show this second's figures."""
        if self._live is None:
            return
        p99 = row["latency_p99"]
        self._live.update(
            f"{row['t'] + 1:5d}s  matches {row['live_matches']:,}  subscribers "
            f"{row['subscribers']}  sent {row['sent']:,}/s  delivered {row['delivered']:,}/s  "
            f"p99 {'-' if p99 is None else f'{p99:.1f}'} ms  lag {row['sender_lag_ms']:.1f} ms"
            f"  lost {row['lost']:,}"
        )

    async def finish(self, report: dict[str, Any]) -> None:
        """Nothing: the table follows."""

    async def close(self) -> None:
        """Take the line away."""
        if self._live is not None:
            with contextlib.suppress(Exception):
                self._live.stop()
            self._live = None
