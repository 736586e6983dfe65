"""The page's live match stats: a bar per stat and team, and the expected-goals timeline with
the goals on it; what the server sends for them, and in a real browser (see
tests/_browser.py for the set-up)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from events import MatchState, apply, replay_state
from matchcast.web import Hub, WebServer
from matchcast.web._view import page_view, timeline_x, xg_point
from simulator import expand, lean_match, resolve_matches
from tests._browser import wait_text
from tests._web import feed

SEMI = resolve_matches("semifinal")[0]
EVENTS = [s.event for s in expand(SEMI)]


def _final() -> MatchState:
    return replay_state(SEMI.match_id, EVENTS)


def test_the_view_has_a_row_per_stat_home_first() -> None:
    rows = page_view(_final())["stats"]
    assert [(r["key"], r["home"], r["away"]) for r in rows] == [  # type: ignore[index]
        ("shots", "22", "8"),
        ("on_target", "8", "3"),
        ("xg", "2.16", "0.72"),
        ("corners", "11", "3"),
        ("fouls", "12", "16"),
        ("offsides", "3", "2"),
    ]


def test_a_lean_feed_has_no_stats_to_show() -> None:
    state = MatchState.new(SEMI.match_id)
    for e in (s.event for s in expand(lean_match(SEMI))):
        state = apply(state, e)
    assert page_view(state)["stats"] == []


def test_every_shot_is_a_point_of_the_timeline_and_a_late_browser_gets_them_all() -> None:
    hub = Hub(clock=lambda: 0.0)
    state = feed(hub, EVENTS)
    client = hub.connect(SEMI.match_id)  # a browser that opens the page at full time
    (snapshot,) = [f for f in client.backlog if f.data.startswith(b"event: state")]
    data = json.loads(snapshot.data.split(b"data: ", 1)[1])
    points = data["view"]["xg"]
    assert len(points) == 30 and [p["goal"] for p in points].count(True) == 3
    last = {p["team"]: p["xg"] for p in points}
    assert last == {"ARG": state.stats["ARG"].xg, "ENG": state.stats["ENG"].xg}
    gordon = next(p for p in points if p["goal"])
    assert (gordon["minute"], gordon["team"], gordon["x"]) == ("55'", "ENG", 55)
    assert xg_point(EVENTS[0], state) is None  # the kick-off is no shot


def test_added_time_sits_before_the_next_period_on_the_timeline() -> None:
    from events import MatchClock

    assert timeline_x(MatchClock.at(45, 3)) == 45.3 < timeline_x(MatchClock.at(46))
    assert timeline_x(MatchClock.at(90, 2)) == 90.2


@pytest.mark.browser
async def test_the_page_shows_the_stats_panel_and_the_xg_timeline(
    browser: Any, tmp_path: Path
) -> None:
    from playwright.async_api import expect

    hub = Hub()
    state = feed(hub, EVENTS[:1])
    async with WebServer(hub, port=0) as server:
        page = await browser.new_page(viewport={"width": 1280, "height": 900})
        await page.goto(f"{server.url}?match={SEMI.match_id}")
        await wait_text(page, "score", "0-0", timeout_ms=10_000)
        await expect(page.locator("#stats")).to_be_hidden()  # no stat yet
        feed(hub, EVENTS[1:], state)
        await wait_text(page, "status", "Full time", timeout_ms=10_000)
        await expect(page.locator("#stats")).to_be_visible()
        rows = await page.evaluate(
            "[...document.querySelectorAll('#stat-rows li')].map(li => ["
            " li.dataset.stat, li.querySelector('.sv.home').textContent,"
            " li.querySelector('.sv.away').textContent,"
            " Math.round(li.querySelector('.sb-home').getBoundingClientRect().width /"
            "  li.querySelector('.stat-bar').getBoundingClientRect().width * 100)])"
        )
        assert [r[:3] for r in rows] == [
            ["shots", "22", "8"],
            ["on_target", "8", "3"],
            ["xg", "2.16", "0.72"],
            ["corners", "11", "3"],
            ["fouls", "12", "16"],
            ["offsides", "3", "2"],
        ]
        shots_bar = rows[0][3]
        assert 70 <= shots_bar <= 76  # 22 of 30 shots: the home bar is 73% of the row
        await expect(page.locator("#xg-totals")).to_have_text("ARG 2.16 · ENG 0.72")
        chart = await page.evaluate(
            "[[...document.querySelectorAll('#xg-chart path')].map(p => [p.dataset.team,"
            " p.dataset.xg]), [...document.querySelectorAll('#xg-chart circle.goal')]"
            ".map(c => [c.dataset.minute, c.getAttribute('class')])]"
        )
        assert chart == [
            [["ARG", "2.16"], ["ENG", "0.72"]],
            [["55'", "goal away"], ["86'", "goal home"], ["90+2'", "goal home"]],
        ]
        await page.screenshot(path=str(tmp_path / "stats.png"), full_page=True)

        late = await browser.new_page(viewport={"width": 390, "height": 844})
        await late.goto(f"{server.url}?match={SEMI.match_id}")
        await wait_text(late, "status", "Full time", timeout_ms=10_000)
        late_chart = await late.evaluate(
            "[...document.querySelectorAll('#xg-chart path')].map(p => p.getAttribute('d'))"
        )
        on_time = await page.evaluate(
            "[...document.querySelectorAll('#xg-chart path')].map(p => p.getAttribute('d'))"
        )
        assert late_chart and late_chart == on_time  # the whole timeline, from the hub
