"""``matchcast load --report-html FILE``: the dashboard's charts in one self-contained file.

The file holds everything it draws with: the page, its styles, the chart library (uPlot) and
the report's ``per_second`` rows with its headline figures, all inlined, so it opens from disk,
attached to a CI run or mailed, with no server and no network. :class:`HtmlReport` is a
:class:`~matchcast.load._live.LiveSink` that writes it from the final report;
:func:`render_report_html` is the page itself.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any

import structlog

from matchcast.load._dashboard import headline, jsonable, static_file

__all__ = ["HtmlReport", "check_html_path", "render_report_html", "write_report_html"]

_log = structlog.get_logger("matchcast.load.report_html")


_CSP = (
    '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
    "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">"
)


def _script_json(doc: object) -> str:
    """JSON safe inside a <script> element: no ``</script>``, no ``<!--``."""
    text = json.dumps(jsonable(doc), separators=(",", ":"), default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _inline_script(source: str) -> str:
    return source.replace("</script", "<\\/script")


def render_report_html(report: dict[str, Any], title: str = "matchcast load report") -> str:
    """The charts of ``report`` (a ``matchcast load`` report dict) as one HTML document."""
    rows = report.get("per_second")
    data = {
        "seconds": rows if isinstance(rows, list) else [],
        "summary": headline(report),
    }
    page = static_file("dashboard.html").replace("{{title}}", html.escape(title))
    # The file fetches nothing and runs only its own inline scripts, wherever it is opened.
    page = page.replace('<meta charset="utf-8">', f'<meta charset="utf-8">\n{_CSP}', 1)
    styles = static_file("uPlot.min.css") + "\n" + static_file("dashboard.css")
    page = page.replace(
        '<link rel="stylesheet" href="static/uPlot.min.css">\n'
        '<link rel="stylesheet" href="static/dashboard.css">',
        f"<style>\n{styles}\n</style>",
    )
    scripts = (
        f"<script>window.MATCHCAST_REPORT = {_script_json(data)};</script>\n"
        f"<script>\n{_inline_script(static_file('uPlot.iife.min.js'))}\n</script>\n"
        f"<script>\n{_inline_script(static_file('dashboard.js'))}\n</script>"
    )
    page = page.replace(
        '<script src="static/uPlot.iife.min.js"></script>\n'
        '<script src="static/dashboard.js"></script>',
        scripts,
    )
    return page.replace('data-state="connecting"', 'data-state="report"')


def check_html_path(path: Path) -> None:
    """Raise ValueError (a message for the user) when ``path`` cannot be written, before the
    run rather than after it."""
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise ValueError(f"--report-html {path}: is a directory; give a file name")
    if not parent.is_dir():
        raise ValueError(f"--report-html {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise ValueError(f"--report-html {path}: directory {parent} is not writable")


def write_report_html(report: dict[str, Any], path: Path, title: str | None = None) -> None:
    """Write the page of ``report`` to ``path`` (through a temporary file, then renamed)."""
    text = render_report_html(report, title or f"matchcast load report: {path.name}")
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


class HtmlReport:
    """Writes ``--report-html`` from the final report (a :class:`~matchcast.load._live.LiveSink`).

    A file that cannot be written is logged (``report_html.failed``) and kept in :attr:`error`;
    the run's other outputs go on.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.error: str | None = None

    async def start(self) -> None:
        """Nothing to open: the file is written once, at the end."""

    def second(self, row: dict[str, Any]) -> None:
        """Nothing per second: the report's own rows are what the file shows."""

    async def finish(self, report: dict[str, Any]) -> None:
        try:
            write_report_html(report, self.path)
        except OSError as err:
            self.error = f"{self.path}: {err.strerror or err}"
            _log.error("report_html.failed", path=str(self.path), error=self.error)
        else:
            _log.info("report_html.written", path=str(self.path))

    async def close(self) -> None:
        """Nothing held open."""
