"""The match page in a real browser (the system Chromium, driven by Playwright; see
``tests/_browser.py`` for when these skip and the ``browser`` fixture in ``conftest.py``).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from events import Event, MatchState, Topics, apply
from matchcast.app import run_replay
from matchcast.testing import wait_port
from matchcast.transport.broker import free_port
from matchcast.transport.connection import BrokerURL
from matchcast.web import Hub, WebServer
from simulator import ReplayOptions, expand, lean_match, resolve_matches
from tests._browser import wait_live, wait_text

pytestmark = pytest.mark.browser

SEMI = resolve_matches("semifinal")[0]
#: Its lean feed, for the tests that pin seqs (62: Gordon's goal) on a hub fed directly.
LEAN = lean_match(SEMI)


@pytest.fixture
def web_url(mosquitto_url: BrokerURL, topics: Topics) -> Iterator[str]:
    """``matchcast web`` as its own process, on the test's broker and topic root."""
    yield from _web_process(mosquitto_url, topics)


@pytest.fixture
def control_url(mosquitto_url: BrokerURL, topics: Topics) -> Iterator[str]:
    """``matchcast web --control``: the page with its replay controls."""
    yield from _web_process(mosquitto_url, topics, "--control")


def _web_process(mosquitto_url: BrokerURL, topics: Topics, *extra: str) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "matchcast",
            "web",
            "--broker",
            f"mqtt://{mosquitto_url.host}:{mosquitto_url.port}",
            "--port",
            str(port),
            "--root",
            topics.root,
            "--log-format",
            "json",
            *extra,
        ],
        stderr=subprocess.PIPE,
    )
    try:
        wait_port("127.0.0.1", port, timeout=20)
        yield f"http://127.0.0.1:{port}/?match={SEMI.match_id}"
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
        assert proc.returncode in (0, -15), err.decode()


def _score(page: Any) -> Any:
    return page.evaluate("document.getElementById('score').textContent")


@pytest.mark.mosquitto
async def test_page_follows_the_semifinal_live(
    browser: Any, web_url: str, mosquitto_url: BrokerURL, topics: Topics, tmp_path: Path
) -> None:
    """The score reaches 2-1 and the goals show with their minutes; a page opened after 55'
    shows 0-1 at once (from the retained snapshot), before the next goal arrives."""
    page = await browser.new_page(viewport={"width": 1280, "height": 860})
    await page.goto(web_url)
    await wait_live(page)
    options = ReplayOptions(speed=240, break_seconds=0.5, topics=topics)
    replay = asyncio.ensure_future(run_replay([SEMI], mosquitto_url, options))
    try:
        await wait_text(page, "score", "0-1")
        late = await browser.new_page(viewport={"width": 390, "height": 844})
        await late.goto(web_url)
        await wait_text(late, "score", "0-1", timeout_ms=5_000)
        # Read score and goals in one go: the page showed 0-1 with one goal, so that came
        # before Fernández's equaliser (86'), not after it.
        seen = await late.evaluate(
            "[document.getElementById('score').textContent,"
            " [...document.querySelectorAll('#goals li .min')].map(e => e.textContent)]"
        )
        assert seen == ["0-1", ["55'"]]

        await wait_text(page, "clock", "FT")
        await replay
    finally:
        replay.cancel()
    assert await _score(page) == "2-1"
    goals = await page.evaluate(
        "[...document.querySelectorAll('#goals li')].map(li =>"
        " [li.querySelector('.min').textContent, li.querySelector('.team-tag').textContent,"
        "  li.querySelector('.who').firstChild.textContent])"
    )
    assert goals == [
        ["55'", "ENG", "Anthony Gordon"],
        ["86'", "ARG", "Enzo Fernández"],
        ["90+2'", "ARG", "Lautaro Martínez"],
    ]
    ticker = await page.evaluate("document.getElementById('ticker').innerText")
    assert "FULL TIME" in ticker and "KICK-OFF" in ticker
    assert await page.evaluate("document.getElementById('status').textContent") == "Full time"
    await wait_text(late, "score", "2-1", timeout_ms=5_000)
    await page.screenshot(path=str(tmp_path / "fulltime.png"))


@pytest.mark.mosquitto
async def test_page_without_a_match_picks_the_live_one(
    browser: Any, web_url: str, mosquitto_url: BrokerURL, topics: Topics
) -> None:
    """Opened with no match chosen, the page waits, then follows the first match that starts."""
    page = await browser.new_page()
    await page.goto(web_url.split("?", maxsplit=1)[0])
    await wait_live(page)
    options = ReplayOptions(speed=None, topics=topics)
    await run_replay([SEMI], mosquitto_url, options)
    await wait_text(page, "clock", "FT", timeout_ms=20_000)
    assert await _score(page) == "2-1"
    assert SEMI.match_id in page.url


@pytest.mark.mosquitto
async def test_page_controls_pause_and_seek_to_85_then_the_86th_minute_goal_arrives(
    browser: Any, control_url: str, mosquitto_url: BrokerURL, topics: Topics, tmp_path: Path
) -> None:
    """Pause, a click on the timeline at 85', play: the equaliser of 86' arrives next, long
    before the replay would have reached it (at speed 60 from kickoff: about 90 s)."""
    import re

    from playwright.async_api import expect

    page = await browser.new_page(viewport={"width": 1280, "height": 860})
    await page.goto(control_url)
    await wait_live(page)
    await expect(page.locator("#control")).to_be_visible(timeout=10_000)
    options = ReplayOptions(speed=60, break_seconds=0.5, topics=topics)
    replay = asyncio.ensure_future(
        run_replay([SEMI], mosquitto_url, options, replayer_id="browser-ctl")
    )
    try:
        await wait_text(page, "clock", re.compile(r"1H \d+'"), timeout_ms=20_000)  # type: ignore[arg-type]
        await page.click("#ctl-toggle")
        await expect(page.locator("#ctl-toggle")).to_have_text("Play", timeout=10_000)
        await expect(page.locator("#ctl-note")).to_have_text(re.compile("^Paused"))
        box = await page.locator("#ctl-timeline").bounding_box()
        assert box is not None
        x = box["x"] + box["width"] * (85 - 1) / (90 - 1)
        await page.mouse.click(x, box["y"] + box["height"] / 2)
        # The new run's snapshot: the state just before 85', 0-1 after the 55' goal.
        await wait_text(page, "clock", re.compile(r"2H 8[45]'"), timeout_ms=10_000)  # type: ignore[arg-type]
        assert await _score(page) == "0-1"
        await expect(page.locator("#ctl-timeline .ctl-goal")).to_have_count(1, timeout=10_000)
        await page.click("#ctl-toggle")
        await expect(page.locator("#ctl-toggle")).to_have_text("Pause", timeout=10_000)
        await wait_text(page, "score", "1-1", timeout_ms=20_000)
        await page.screenshot(path=str(tmp_path / "control.png"))
        goals = await page.evaluate(
            "[...document.querySelectorAll('#goals li .min')].map(e => e.textContent)"
        )
        assert goals == ["55'", "86'"]
        await wait_text(page, "clock", "FT", timeout_ms=30_000)
        [report] = await replay
    finally:
        replay.cancel()
    assert await _score(page) == "2-1"
    assert report.final_state is not None and report.final_state.scoreline == "ARG 2-1 ENG"


def _feed(hub: Hub, events: list[Event], match_id: str) -> None:
    state = MatchState.new(match_id)
    for original in events:
        e = original.model_copy(update={"match_id": match_id})
        state = apply(state, e)
        hub.publish(e, state)


async def test_match_picker_switches_between_live_matches(browser: Any) -> None:
    """With two matches live, the picker lists both (score and status as text) and switches."""
    from playwright.async_api import expect

    events = [s.event for s in expand(LEAN)]
    hub = Hub()
    _feed(hub, events[:62], "day1-arg-eng")
    _feed(hub, events[:20], "day1-other")
    async with WebServer(hub, port=0) as server:
        page = await browser.new_page(viewport={"width": 390, "height": 844})
        await page.goto(server.url)
        await wait_text(page, "score", "0-1", timeout_ms=10_000)
        picker = page.locator("#picker")
        await expect(picker).to_be_visible()
        await expect(picker.locator("option")).to_have_text(
            ["ARG 0-1 ENG · Live", "ARG 0-0 ENG · Live"]
        )
        await picker.select_option("day1-other")
        await wait_text(page, "score", "0-0", timeout_ms=10_000)
        assert "match=day1-other" in page.url
        await wait_text(page, "clock", "1H 19'")


async def test_dropped_page_reconnects_and_resumes_without_gaps(browser: Any) -> None:
    """A page dropped for a full queue reconnects by itself with Last-Event-ID and gets
    exactly the updates it missed: nothing lost, nothing twice."""
    events = [s.event for s in expand(LEAN)]
    hub = Hub(queue_size=2)
    _feed(hub, events[:1], SEMI.match_id)
    async with WebServer(hub, port=0) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}?match={SEMI.match_id}")
        await wait_live(page)
        state = hub.state(SEMI.match_id)
        assert state is not None
        for event in events[1:62]:  # one burst: far more than the page's queue holds
            state = apply(state, event)
            hub.publish(event, state)
        assert hub.stats.clients_dropped == 1
        await wait_text(page, "score", "0-1", timeout_ms=10_000)
        assert hub.stats.resumed == 1
        ticker = await page.evaluate("document.getElementById('ticker').innerText")
        assert ticker.count("HALF TIME") == 1
        assert ticker.count("GOAL") == 1
        assert ticker.count("2H under way") == 1


async def test_names_are_shown_as_text_never_as_markup(browser: Any) -> None:
    """A scorer or team named like HTML is shown literally: no element, no script runs."""
    from events import Goal, KickOff

    evil = '<img src=x onerror="document.body.dataset.pwned=1">'
    events = []
    for s in expand(LEAN):
        event = s.event
        if isinstance(event, Goal):
            event = event.model_copy(update={"scorer": evil})
        elif isinstance(event, KickOff):
            home = event.home.model_copy(update={"name": "<b>Argentina</b>"})
            event = event.model_copy(update={"home": home})
        events.append(event)
    hub = Hub()
    _feed(hub, events[:1], SEMI.match_id)
    async with WebServer(hub, port=0) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}?match={SEMI.match_id}")
        await wait_live(page)
        state = hub.state(SEMI.match_id)
        assert state is not None
        for event in events[1:62]:  # through Gordon's goal
            state = apply(state, event)
            hub.publish(event, state)
        await wait_text(page, "score", "0-1", timeout_ms=10_000)
        goals = await page.evaluate("document.getElementById('goals').textContent")
        assert evil in goals
        assert await page.evaluate("document.querySelectorAll('main img, main b').length") == 0
        assert await page.evaluate("document.body.dataset.pwned") is None
        assert await page.evaluate("document.getElementById('home-name').textContent") == (
            "<b>Argentina</b>"
        )
