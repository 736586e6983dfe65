"""A real `matchcast load` run watched as a user would: the dashboard in Chromium grows while
the run goes and says finished at the end, /metrics exposes every metric the Grafana dashboard
charts during the run, and the HTML report is written.

Runs once `matchcast load` has the options (--dashboard, --metrics-port, --report-html); until
then it says so and is skipped.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from typer.testing import CliRunner

from matchcast.cli import app
from matchcast.testbroker import Mosquitto
from tests._grafana import dashboard_exprs, metric_names

pytestmark = [pytest.mark.slow, pytest.mark.mosquitto, pytest.mark.browser]

OPTIONS = ("--dashboard", "--metrics-port", "--report-html")


@pytest.fixture(scope="module")
def _wired() -> None:
    help_text = CliRunner().invoke(app, ["load", "--help-all"], terminal_width=200).output
    missing = [o for o in OPTIONS if o not in help_text]
    if missing:
        pytest.skip(f"matchcast load has no {', '.join(missing)} yet")


async def _address(stderr: asyncio.StreamReader, seen: list[str]) -> dict[str, str]:
    """The lines ``dashboard: URL`` and ``metrics: URL`` the command prints at the start."""
    found: dict[str, str] = {}
    async with asyncio.timeout(60):
        while len(found) < 2:
            line = (await stderr.readline()).decode()
            if not line:
                raise AssertionError("the command ended before it printed its addresses")
            seen.append(line)
            name, _, url = line.strip().partition(": ")
            if name in ("dashboard", "metrics") and url.startswith("http://"):
                found[name] = url
    return found


async def _exposed(url: str) -> set[str]:
    async with aiohttp.ClientSession() as http, http.get(url) as resp:
        text = await resp.text()
    return {
        line.split("{")[0].split(" ")[0]
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


@pytest.mark.usefixtures("_wired")
async def test_a_run_watched_in_the_dashboard_and_by_prometheus(
    browser: Any, mosquitto: Mosquitto, tmp_path: Path
) -> None:
    from playwright.async_api import expect

    html = tmp_path / "run.html"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "matchcast", "load",
        "--broker", mosquitto.url, "--root", f"mctest-live-{tmp_path.name}",
        "--matches", "10", "--speed", "120", "--duration", "8", "--subscribers", "2",
        "--dashboard", "0", "--metrics-port", "0", "--report-html", str(html),
        "--report", str(tmp_path / "r.json"), "--no-progress",
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    seen: list[str] = []
    try:
        urls = await _address(proc.stderr, seen)
        drain = asyncio.ensure_future(proc.stderr.read())
        page = await browser.new_page(viewport={"width": 1280, "height": 900})
        await page.goto(urls["dashboard"])
        chart = page.locator("#chart-throughput")
        await expect(chart).to_have_attribute("data-points", "2", timeout=20_000)
        await expect(chart).to_have_attribute("data-points", "4", timeout=20_000)  # it grows
        assert await page.get_attribute("#chart-throughput", "data-empty") == "false"
        exposed = await _exposed(urls["metrics"])
        for expr in dashboard_exprs():
            # One broker: no per-node series (test_load_live_metrics.py feeds a broker list).
            names = {n for n in metric_names(expr) if not n.startswith("matchcast_load_node_")}
            assert names <= exposed, expr
        await expect(page.locator("body")).to_have_attribute(
            "data-state", "finished", timeout=60_000
        )
        async with asyncio.timeout(60):
            assert await proc.wait() == 0, "".join(seen) + (await drain).decode()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert "window.MATCHCAST_REPORT" in html.read_text()
