"""The live outputs of a load run from its options: ``--dashboard``, ``--report-html``,
``--metrics-port``, each a :class:`~matchcast.load._live.LiveSink`.

:func:`live_outputs` checks the options together before the run (a ValueError is bad input:
exit 2) and gives the sinks to start; ports are bound by each sink's ``start()``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from aiohttp.typedefs import Middleware

from matchcast.load._dashboard import Dashboard
from matchcast.load._live import LiveSink
from matchcast.load._live_metrics import LoadMetrics
from matchcast.load._report_html import HtmlReport, check_html_path

__all__ = ["live_outputs"]


def live_outputs(
    *,
    dashboard: int | None = None,
    dashboard_host: str = "127.0.0.1",
    report_html: Path | None = None,
    metrics_port: int | None = None,
    metrics_addr: str = "127.0.0.1",
    middlewares: Sequence[Middleware] = (),
    title: str = "matchcast load",
    announce: TextIO | None = sys.stderr,
) -> list[LiveSink]:
    """The sinks the options ask for (none given: an empty list).

    Args:
        dashboard: ``--dashboard PORT`` (0: a free port, logged in ``dashboard.started``).
        dashboard_host: where the dashboard listens.
        report_html: ``--report-html FILE``, written at the end.
        metrics_port: ``--metrics-port PORT`` for Prometheus.
        metrics_addr: where the metrics listen.
        middlewares: put in front of both servers (the host check and connection limits of
            ``matchcast web``).
        title: the dashboard's heading.
        announce: where the servers write their address once listening.

    Raises:
        ValueError: a message for the user: an HTML file that cannot be written, or the
            dashboard and the metrics asked to share a port.
    """
    if (
        dashboard is not None
        and dashboard == metrics_port
        and dashboard != 0
        and dashboard_host == metrics_addr
    ):
        raise ValueError(
            f"--dashboard and --metrics-port are both {dashboard}: give each its own port"
        )
    if report_html is not None:
        check_html_path(report_html)
    sinks: list[LiveSink] = []
    if dashboard is not None:
        sinks.append(
            Dashboard(
                dashboard_host, dashboard, middlewares=middlewares, title=title, announce=announce
            )
        )
    if metrics_port is not None:
        sinks.append(
            LoadMetrics(metrics_port, metrics_addr, middlewares=middlewares, announce=announce)
        )
    if report_html is not None:
        sinks.append(HtmlReport(report_html))
    return sinks
