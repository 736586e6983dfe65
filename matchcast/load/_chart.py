"""A PNG of a run: events/s (offered, sent, delivered) and latency percentiles per second."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from matchcast.redact import write_private

__all__ = ["write_chart"]


def write_chart(report: dict[str, Any], path: Path) -> None:
    """Draw ``report``'s per-second series into ``path`` (PNG).

    Raises:
        RuntimeError: matplotlib is not installed (``pip install 'matchcast[load]'``).
    """
    try:
        import matplotlib as mpl  # noqa: PLC0415

        mpl.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415
    except ImportError as err:
        raise RuntimeError("--chart needs matplotlib: pip install 'matchcast[load]'") from err
    rows = report["per_second"]
    t = [r["t"] for r in rows]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6.5), sharex=True)
    for key, style in (("offered", ":"), ("sent", "--"), ("delivered", "-")):
        top.plot(t, [r[key] for r in rows], style, marker=".", label=key)
    top.set_ylabel("events/s")
    top.legend(loc="upper right")
    top.grid(alpha=0.3)
    p = report["parameters"]
    top.set_title(
        f"matchcast load: {p.get('matches')} matches, {p.get('subscribers')} subscribers, "
        f"QoS {p.get('qos')}"
    )
    for key in ("latency_p50", "latency_p99", "latency_max"):
        values = [max(r.get(key, 0.0), 1e-3) for r in rows]
        bottom.plot(t, values, marker=".", label=key.removeprefix("latency_"))
    bottom.set_yscale("log")
    bottom.set_ylabel("latency from schedule, ms")
    bottom.set_xlabel("seconds since start")
    bottom.legend(loc="upper right")
    bottom.grid(alpha=0.3, which="both")
    fig.tight_layout()
    image = io.BytesIO()
    fig.savefig(image, dpi=100, format=path.suffix.lstrip(".") or "png")
    write_private(path, image.getvalue())  # owner-only, like the report
    plt.close(fig)
