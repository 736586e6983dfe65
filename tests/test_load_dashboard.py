"""The load dashboard's server and the HTML report, in process (the browser tests draw them)."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from matchcast.load._dashboard import QUEUE_FRAMES, Dashboard, headline
from matchcast.load._live import LiveSink
from matchcast.load._report_html import HtmlReport, check_html_path, render_report_html
from tests._load_report import REPORT, row


@pytest.fixture
async def dashboard() -> AsyncIterator[Dashboard]:
    dash = Dashboard(port=0, keepalive=0.2)
    await dash.start()
    try:
        yield dash
    finally:
        await dash.close()


async def read_events(resp: aiohttp.ClientResponse, n: int) -> list[tuple[str, Any]]:
    """The next ``n`` events (kind, data) of an SSE response; comments skipped."""
    out: list[tuple[str, Any]] = []
    kind, data = "message", None
    async with asyncio.timeout(10):
        while len(out) < n:
            line = (await resp.content.readline()).decode().rstrip("\n")
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
            elif line == "" and data is not None:
                out.append((kind, data))
                kind, data = "message", None
    return out


def test_the_sinks_follow_the_live_sink_protocol() -> None:
    sinks: list[LiveSink] = [Dashboard(), HtmlReport(Path("x.html"))]
    assert len(sinks) == 2


async def test_a_browser_gets_the_history_then_each_second_then_the_end(
    dashboard: Dashboard,
) -> None:
    dashboard.second(row(0))
    dashboard.second(row(1))
    async with aiohttp.ClientSession() as http, http.get(dashboard.url + "events") as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        ((kind, history),) = await read_events(resp, 1)
        assert kind == "history"
        assert [r["t"] for r in history] == [0, 1]
        dashboard.second(row(2, latency_p99=float("nan")))
        ((kind, second),) = await read_events(resp, 1)
        assert (kind, second["t"], second["latency_p99"]) == ("second", 2, None)
        await dashboard.finish(REPORT)
        ((kind, end),) = await read_events(resp, 1)
        assert kind == "end"
        assert end["status"] == "failed (1 check)"
        assert end["checks passed"] == "1/2"


async def test_a_reconnecting_browser_gets_only_what_it_missed(dashboard: Dashboard) -> None:
    for t in range(5):
        dashboard.second(row(t))
    headers = {"Last-Event-ID": "2"}
    async with (
        aiohttp.ClientSession() as http,
        http.get(dashboard.url + "events", headers=headers) as resp,
    ):
        ((kind, history),) = await read_events(resp, 1)
        assert [r["t"] for r in history] == [3, 4]


async def test_rows_out_of_order_or_without_t_are_left_out(dashboard: Dashboard) -> None:
    dashboard.second(row(3))
    dashboard.second(row(3))
    dashboard.second({"t": "4"})
    dashboard.second(row(1))
    dashboard.second(row(4))
    cyclic = row(5)
    cyclic["nodes"] = {"n": cyclic}
    dashboard.second(cyclic)
    assert [t for t, _ in dashboard.rows] == [3, 4]
    assert dashboard.refused_rows == 4


async def test_the_page_its_files_and_the_json_are_served(dashboard: Dashboard) -> None:
    dashboard.second(row(0))
    async with aiohttp.ClientSession() as http:
        async with http.get(dashboard.url) as resp:
            page = await resp.text()
            assert "static/uPlot.iife.min.js" in page
            assert "default-src 'self'" in resp.headers["Content-Security-Policy"]
        for name in ("uPlot.iife.min.js", "uPlot.min.css", "dashboard.js", "dashboard.css"):
            async with http.get(dashboard.url + "static/" + name) as resp:
                assert resp.status == 200, name
                assert len(await resp.read()) > 100
        async with http.get(dashboard.url + "static/../_dashboard.py") as resp:
            assert resp.status == 404
        async with http.get(dashboard.url + "api/seconds") as resp:
            doc = await resp.json()
            assert [r["t"] for r in doc["seconds"]] == [0]
            assert doc["summary"] is None


async def test_a_foreign_host_name_is_refused_on_loopback(dashboard: Dashboard) -> None:
    """DNS rebinding: a page served as evil.example resolving to 127.0.0.1 gets nothing."""
    async with aiohttp.ClientSession() as http:
        for host, status in (
            ("evil.example", 403),
            (f"evil.example:{dashboard.port}", 403),
            (f"localhost:{dashboard.port}", 200),
            (f"127.0.0.1:{dashboard.port}", 200),
            (f"[::1]:{dashboard.port}", 200),
        ):
            async with http.get(dashboard.url + "api/seconds", headers={"Host": host}) as resp:
                assert resp.status == status, host


async def test_streams_past_the_cap_get_503() -> None:
    dash = Dashboard(port=0, max_streams=1)
    await dash.start()
    try:
        async with aiohttp.ClientSession() as http, http.get(dash.url + "events") as first:
            assert first.status == 200
            async with asyncio.timeout(5):
                while dash.streams < 1:
                    await asyncio.sleep(0.01)
            async with http.get(dash.url + "events") as second:
                assert second.status == 503
                assert "at most 1" in await second.text()
    finally:
        await dash.close()


async def test_a_browser_that_falls_behind_is_cut_off_not_waited_for(
    dashboard: Dashboard,
) -> None:
    """second() never blocks: a stream whose queue is full is dropped instead."""
    async with aiohttp.ClientSession() as http, http.get(dashboard.url + "events") as resp:
        assert resp.status == 200
        async with asyncio.timeout(5):
            while dashboard.streams < 1:
                await asyncio.sleep(0.01)
        stream = next(iter(dashboard._streams))
        for t in range(QUEUE_FRAMES + 5):  # no await: the stream cannot drain in between
            dashboard.second(row(t))
        assert stream.cut
        async with asyncio.timeout(5):
            while dashboard.streams:
                await asyncio.sleep(0.01)


async def test_middlewares_given_run_in_front() -> None:
    seen: list[str] = []

    @web.middleware
    async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
        seen.append(request.path)
        response: web.StreamResponse = await handler(request)
        return response

    dash = Dashboard(port=0, middlewares=[guard])
    await dash.start()
    try:
        async with aiohttp.ClientSession() as http, http.get(dash.url + "api/seconds") as resp:
            assert resp.status == 200
    finally:
        await dash.close()
    assert seen == ["/api/seconds"]


async def test_a_taken_port_raises_and_close_is_safe() -> None:
    first = Dashboard(port=0)
    await first.start()
    try:
        second = Dashboard(port=first.port)
        with pytest.raises(OSError, match=f"--dashboard: cannot listen on 127.0.0.1:{first.port}"):
            await second.start()
        await second.close()
    finally:
        await first.close()
    await first.close()


def test_headline_says_how_the_run_ended() -> None:
    assert headline({"aborted": {"check": "lost == 0"}})["status"] == "aborted"
    assert headline({"interrupted": True}) == {"status": "interrupted"}
    assert headline({}) == {"status": "finished"}
    passed = [{"check": "lost == 0", "passed": True}]
    assert headline({"checks": passed}) == {"status": "passed", "checks passed": "1/1"}
    failed = [{"passed": False}, {"passed": False}, {"passed": True}]
    assert headline({"checks": failed})["status"] == "failed (2 checks)"
    assert headline(REPORT)["latency p99 ms"] == 4.0


def test_the_html_report_is_self_contained() -> None:
    hostile = {**REPORT, "per_second": [row(0, nodes={"</script><b>": {"delivered": 1}})]}
    page = render_report_html(hostile, title="<i>run</i>")
    assert "<script src=" not in page
    assert 'rel="stylesheet"' not in page
    assert "http://" not in page.replace("http://www.w3.org", "")  # no network
    assert "uPlot" in page
    assert page.count("</script>") == 3  # the data, the library, the charts: nothing else closes
    assert "<i>run</i>" not in page
    assert "default-src 'none'" in page  # it may fetch nothing
    start = page.index("window.MATCHCAST_REPORT = ") + len("window.MATCHCAST_REPORT = ")
    data = json.loads(page[start : page.index(";</script>", start)])
    assert data["seconds"][0]["nodes"] == {"</script><b>": {"delivered": 1}}
    assert not math.isnan(data["summary"]["latency p50 ms"])


async def test_the_html_report_sink_writes_the_file_and_survives_a_bad_path(
    tmp_path: Path,
) -> None:
    good = HtmlReport(tmp_path / "r.html")
    await good.start()
    good.second(row(0))
    await good.finish(REPORT)
    await good.close()
    assert "MATCHCAST_REPORT" in (tmp_path / "r.html").read_text()
    bad = HtmlReport(tmp_path / "missing" / "r.html")
    await bad.finish(REPORT)
    assert bad.error is not None and "r.html" in bad.error


def test_a_bad_html_path_is_refused_before_the_run(tmp_path: Path) -> None:
    check_html_path(tmp_path / "ok.html")
    with pytest.raises(ValueError, match="does not exist"):
        check_html_path(tmp_path / "nope" / "r.html")
    with pytest.raises(ValueError, match="is a directory"):
        check_html_path(tmp_path)


async def test_a_run_of_days_keeps_only_the_latest_seconds_for_the_page() -> None:
    dash = Dashboard(port=0, history=3)
    await dash.start()
    try:
        for t in range(10):
            dash.second(row(t))
        async with aiohttp.ClientSession() as http, http.get(dash.url + "api/seconds") as resp:
            assert [r["t"] for r in (await resp.json())["seconds"]] == [7, 8, 9]
    finally:
        await dash.close()
