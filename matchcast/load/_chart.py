"""A PNG of a run: events/s (offered, sent, delivered) and latency percentiles per second."""

from __future__ import annotations

import io
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matchcast.redact import write_private

__all__ = ["Rates", "rates", "write_chart"]


@dataclass(frozen=True, slots=True)
class Rates:
    """Events/s of one series over bins ``edges[i]``-``edges[i + 1]`` (seconds since start)."""

    edges: list[float]
    values: list[float]


def _series(rows: list[dict[str, Any]], key: str, end: float) -> Rates:
    """``key`` per second as a rate; the last bin is as wide as the run lasted in it, so a run of
    half a second shows its real rate (twice its count), as the table does, not its count."""
    edges: list[float] = []
    values: list[float] = []
    for row in rows:
        t = float(row["t"])
        width = min(1.0, end - t) if end > t else 1.0
        edges.append(t)
        values.append(row[key] / width)
        if width < 1.0:
            edges.append(t + width)
            break
    else:
        edges.append(edges[-1] + 1.0 if edges else 1.0)
    return Rates(edges, values)


def rates(report: dict[str, Any]) -> dict[str, Rates]:
    """The chart's throughput series: offered, sent, delivered (summed over subscribers)."""
    rows = report["per_second"]
    send_s = float(report["sender"].get("send_seconds") or 0.0)
    d = report["delivery"]
    rx_rate = float(d.get("delivered_events_per_s") or 0.0)
    # The table's delivered rate is received / (last receive - start): the same span here.
    rx_s = d["received"] / rx_rate if rx_rate else float(len(rows))
    return {
        "offered": _series(rows, "offered", send_s or float(len(rows))),
        "sent": _series(rows, "sent", send_s or float(len(rows))),
        "delivered": _series(rows, "delivered", rx_s),
    }


def write_chart(report: dict[str, Any], path: Path) -> None:
    """Draw ``report``'s per-second series into ``path`` (PNG).

    Raises:
        RuntimeError: matplotlib is not installed (``pip install 'matchcast[load]'``).
    """
    try:
        import matplotlib as mpl  # noqa: PLC0415

        mpl.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
        from matplotlib.ticker import FuncFormatter  # noqa: PLC0415
    except ImportError as err:
        raise RuntimeError("--chart needs matplotlib: pip install 'matchcast[load]'") from err
    rows = report["per_second"]
    p = report["parameters"]
    plain = FuncFormatter(lambda v, _pos: f"{v:,.0f}" if abs(v) >= 10 else f"{v:g}")
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6.5), sharex=True)
    labels = {"delivered": f"delivered (summed over the {p.get('subscribers')} subscriber(s))"}
    for (key, series), style in zip(rates(report).items(), (":", "--", "-"), strict=True):
        top.stairs(series.values, series.edges, linestyle=style, label=labels.get(key, key))
    top.set_ylabel("events/s")
    top.yaxis.set_major_formatter(plain)
    top.set_ylim(bottom=0)
    top.legend(loc="upper right")
    top.grid(alpha=0.3)
    speed = p.get("speed") or (p.get("merged_from") or [{}])[0].get("speed")
    title = (
        f"matchcast load: {p.get('matches')} matches, {p.get('subscribers')} subscriber(s), "
        f"QoS {p.get('qos')}, speed {speed}"
    )
    top.set_title(title + ("  (INTERRUPTED)" if report.get("interrupted") else ""))
    delivered = rates(report)["delivered"].edges
    # Each second's latencies at the middle of the time delivered in it.
    t = [(a + b) / 2 for a, b in itertools.pairwise(delivered)]
    t += [r["t"] + 0.5 for r in rows[len(t) :]]
    for key in ("latency_p50", "latency_p99", "latency_max"):
        values = [max(r.get(key, 0.0), 1e-3) for r in rows]
        bottom.plot(t, values, marker=".", label=key.removeprefix("latency_"))
    bottom.set_yscale("log")
    bottom.yaxis.set_major_formatter(plain)
    bottom.yaxis.set_minor_formatter(plain)
    bottom.xaxis.set_major_formatter(plain)
    bottom.set_ylabel("latency from schedule, ms")
    bottom.set_xlabel("seconds since start")
    bottom.legend(loc="upper right")
    bottom.grid(alpha=0.3, which="both")
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, dpi=100, format=path.suffix.lstrip(".") or "png")
    write_private(path, image.getvalue())  # owner-only, like the report
    plt.close(fig)
