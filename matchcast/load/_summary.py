"""The end summary of a run, in k6's style: thresholds first, then one line a figure.

::

      ✓ p99 < 50ms
      ✗ lost == 0 (actual 12)

      events_offered.......: 12,000   400.0/s
      latency..............: avg=1.2ms min=0.3ms med=1.0ms p(90)=2.0ms p(99)=4.0ms max=9.0ms
      sender_lag...........: max=0.4ms late=0 (sent > 10 ms late, k6's dropped_iterations)
"""

from __future__ import annotations

from typing import Any

__all__ = ["render_summary"]

_WIDTH = 22


def _line(name: str, value: str) -> str:
    return f"  {name} {'.' * max(_WIDTH - len(name), 2)}: {value}"


def _rate(n: int, seconds: float) -> str:
    return f"{n:,}  {n / seconds:,.1f}/s" if seconds > 0 else f"{n:,}"


def _series_max(report: dict[str, Any], key: str) -> int | None:
    values = [r[key] for r in report.get("per_second") or () if r.get(key) is not None]
    return max(values) if values else None


def render_summary(report: dict[str, Any]) -> str:
    """The summary of ``report`` as lines of text (no markup)."""
    s, d, lat = report["sender"], report["delivery"], report["latency_ms"]
    seconds = float(s.get("send_seconds") or 0.0)
    lines = []
    for c in report.get("checks") or ():
        mark = "✓" if c["passed"] else "✗"
        lines.append(
            f"  {mark} {c['check']}" + ("" if c["passed"] else f" (actual {c['actual']:g})")
        )
    aborted = report.get("aborted")
    if aborted:
        lines.append(f"  ABORTED at {aborted['t']} s: --check {aborted['check']} failed")
    if lines:
        lines.append("")
    offered = sum(r.get("offered", 0) for r in report.get("per_second") or ())
    lines += [
        _line("events_offered", _rate(offered, seconds)),
        _line("events_sent", _rate(s["events_published"], seconds)),
        _line("events_delivered", f"{d['received']:,}  {d['delivered_events_per_s']:,.1f}/s"),
        _line(
            "latency",
            f"avg={lat['mean']}ms min={lat['min']}ms med={lat['p50']}ms p(90)={lat['p90']}ms "
            f"p(99)={lat['p99']}ms max={lat['max']}ms",
        ),
    ]
    if s.get("scheduled", True):
        lines.append(
            _line(
                "sender_lag",
                f"max={s.get('lag_max_ms', 0.0)}ms late={s['overruns']:,} (sent > "
                f"{s['overrun_threshold_ms']:g} ms late, k6's dropped_iterations)"
                + ("  SENDER FELL BEHIND" if s["overruns"] else ""),
            )
        )
    else:
        lines.append(_line("sender_lag", "n/a: --speed max; latency includes the sender's backlog"))
    lines += [
        _line("lost", f"{d['lost']:,}"),
        _line("duplicates", f"{d['duplicates']:,}"),
        _line("reordered", f"{d['reordered']:,}"),
    ]
    for key in ("live_matches", "subscribers"):
        peak = _series_max(report, key)
        if peak is not None:
            lines.append(_line(key, f"max={peak:,}"))
    return "\n".join(lines)
