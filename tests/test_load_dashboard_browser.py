"""The load dashboard and the HTML report in a real browser: the charts draw, and grow while
seconds are published (see tests/_browser.py for the set-up: the system Chromium)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from matchcast.load._dashboard import Dashboard
from matchcast.load._report_html import write_report_html
from tests._load_report import REPORT, row

pytestmark = pytest.mark.browser

CHARTS = ("throughput", "latency", "lag", "loss", "live", "conns")


@pytest.fixture
async def dashboard() -> AsyncIterator[Dashboard]:
    dash = Dashboard(port=0)
    await dash.start()
    try:
        yield dash
    finally:
        await dash.close()


async def _points(page: Any, chart: str) -> int:
    return int(await page.get_attribute(f"#chart-{chart}", "data-points") or 0)


async def _wait_points(page: Any, chart: str, n: int) -> None:
    from playwright.async_api import expect

    await expect(page.locator(f"#chart-{chart}")).to_have_attribute(
        "data-points", str(n), timeout=10_000
    )


async def _drawn(page: Any, chart: str) -> bool:
    """The chart's canvas has pixels of a series' colour (not only axes and background)."""
    return bool(
        await page.evaluate(
            """(id) => {
                const canvas = document.querySelector('#chart-' + id + ' canvas');
                if (!canvas || !canvas.width) return false;
                const px = canvas.getContext('2d')
                    .getImageData(0, 0, canvas.width, canvas.height).data;
                for (let i = 0; i < px.length; i += 4) {
                    // a saturated pixel: a series line (axes and grid are grey)
                    const hi = Math.max(px[i], px[i + 1], px[i + 2]);
                    const lo = Math.min(px[i], px[i + 1], px[i + 2]);
                    if (px[i + 3] > 0 && hi - lo > 80) return true;
                }
                return false;
            }""",
            chart,
        )
    )


async def test_the_charts_draw_and_grow_while_seconds_arrive(
    browser: Any, dashboard: Dashboard
) -> None:
    errors: list[str] = []
    page = await browser.new_page(viewport={"width": 1280, "height": 900})
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    dashboard.second(row(0))
    dashboard.second(row(1))
    await page.goto(dashboard.url)
    for chart in CHARTS:
        await _wait_points(page, chart, 2)
    assert await page.get_attribute("body", "data-state") == "live"
    for t in range(2, 6):
        dashboard.second(row(t, delivered=50 * t))
        await _wait_points(page, "throughput", t + 1)  # one more point each second
    for chart in CHARTS:
        assert await _points(page, chart) == 6
        assert await _drawn(page, chart), chart
    assert await page.text_content("#elapsed") == "t = 5 s"
    # A broker list: a chart per node figure appears, one series per node.
    nodes = {"mqtt://a:1883": {"delivered": 10, "latency_p99": 2.0},
             "mqtt://b:1883": {"delivered": 12, "latency_p99": 3.0}}  # fmt: skip
    dashboard.second(row(6, nodes=nodes))
    await _wait_points(page, "node_delivered", 7)
    legend = await page.text_content("#chart-node_p99 .u-legend")
    assert "mqtt://a:1883" in (legend or "") and "mqtt://b:1883" in (legend or "")
    await dashboard.finish(REPORT)
    from playwright.async_api import expect

    await expect(page.locator("body")).to_have_attribute("data-state", "finished")
    summary = await page.text_content("#summary") or ""
    assert "failed (1 check)" in summary and "1/2" in summary
    assert errors == []


async def test_a_reloaded_page_gets_the_whole_run_at_once(
    browser: Any, dashboard: Dashboard
) -> None:
    for t in range(30):
        dashboard.second(row(t))
    page = await browser.new_page()
    await page.goto(dashboard.url)
    await _wait_points(page, "latency", 30)
    await page.reload()
    await _wait_points(page, "latency", 30)
    dashboard.second(row(30))
    await _wait_points(page, "latency", 31)


async def test_the_html_report_draws_from_disk(browser: Any, tmp_path: Path) -> None:
    path = tmp_path / "r.html"
    write_report_html({**REPORT, "per_second": [row(t) for t in range(20)]}, path)
    page = await browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    requests: list[str] = []
    page.on("request", lambda req: requests.append(req.url))
    await page.goto(path.as_uri())
    for chart in CHARTS:
        await _wait_points(page, chart, 20)
        assert await _drawn(page, chart), chart
    assert await page.get_attribute("body", "data-state") == "report"
    assert "checks passed" in (await page.text_content("#summary") or "")
    assert requests == [path.as_uri()]  # nothing fetched: the file holds it all
    assert errors == []


async def test_the_html_report_of_a_report_without_the_live_keys_draws_what_it_has(
    browser: Any, tmp_path: Path
) -> None:
    """A report whose rows have only throughput and latency (one written by an earlier
    version, or merged from one): those two draw; the other charts say they are not in it."""
    rows = [
        {"t": t, "offered": 200, "sent": 200, "delivered": 200 - t, "latency_p50": 1.9,
         "latency_p99": 8.0, "latency_max": 8.5}
        for t in range(5)
    ]  # fmt: skip
    path = tmp_path / "old.html"
    write_report_html({"per_second": rows}, path)
    page = await browser.new_page(viewport={"width": 1280, "height": 900})
    await page.goto(path.as_uri())
    await _wait_points(page, "throughput", 5)
    for chart in ("throughput", "latency"):
        assert await page.get_attribute(f"#chart-{chart}", "data-empty") == "false"
        assert await _drawn(page, chart), chart
    for chart in ("lag", "loss", "live", "conns"):
        assert await page.get_attribute(f"#chart-{chart}", "data-empty") == "true"
        assert await page.is_visible(f"#chart-{chart} .empty-note")
