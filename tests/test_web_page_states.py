"""The match page says only what is true: a neutral state before it has a match, "Connected"
for the connection, one "Full time", the shoot-out's result, and the stretch of play a
possession share covers. In a real browser (see tests/_browser.py for the set-up)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from events import Event, MatchState, apply
from matchcast.web import Hub, WebServer
from simulator import expand, resolve_matches
from tests._browser import wait_live, wait_text
from tests._web import feed

pytestmark = pytest.mark.browser

SEMI = resolve_matches("semifinal")[0]
FINAL = resolve_matches("worldcup:2022/final")[0]  # 3-3, Argentina win 4-2 on penalties


def _text(page: Any, element_id: str) -> Any:
    return page.evaluate(f"document.getElementById('{element_id}').innerText")


async def test_before_it_has_a_match_the_page_shows_no_score(browser: Any) -> None:
    """No big 0-0, no "Not started" while it connects, or while the match has not begun."""
    from playwright.async_api import expect

    async with WebServer(Hub(), port=0) as server:
        page = await browser.new_page(viewport={"width": 390, "height": 844})

        async def hold(route: Any) -> None:  # the stream never answers: still connecting
            pass

        await page.route("**/events*", hold)
        await page.goto(f"{server.url}?match={SEMI.match_id}")
        await expect(page.locator("#loading-note")).to_have_text("Connecting…")
        await expect(page.locator("#score")).to_be_hidden()
        await expect(page.locator("#status")).to_be_hidden()
        assert "0" not in await _text(page, "board")

        fresh = await browser.new_page()
        await fresh.goto(f"{server.url}?match={SEMI.match_id}")
        await wait_live(fresh)
        await expect(fresh.locator("#conn")).to_have_text("Connected")
        await expect(fresh.locator("#loading-note")).to_have_text("Waiting for the match…")
        await expect(fresh.locator("#score")).to_be_hidden()


async def test_full_time_is_said_once_and_possession_names_its_stretch(
    browser: Any, tmp_path: Path
) -> None:
    from playwright.async_api import expect

    events = [s.event for s in expand(SEMI)]
    hub = Hub()
    state = feed(hub, events[:1])
    async with WebServer(hub, port=0) as server:
        page = await browser.new_page(viewport={"width": 390, "height": 844})
        await page.goto(f"{server.url}?match={SEMI.match_id}")
        await wait_text(page, "score", "0-0", timeout_ms=10_000)
        await expect(page.locator("#clock")).to_be_visible()
        feed(hub, events[1:], state)
        await wait_text(page, "status", "Full time", timeout_ms=10_000)
        await expect(page.locator("#clock")).to_be_hidden()
        assert "FT" not in await _text(page, "board")
        await expect(page.locator("#poss-span")).to_have_text("55'\u201386'")
        await expect(page.locator("#conn")).to_have_text("Connected")
        # The ticker stays newest first on a phone: its possession line once sank to the
        # bottom, caught by the layout's rule for the possession card.
        minutes = await page.evaluate(
            "[...document.querySelectorAll('#ticker li')]"
            ".sort((a, b) => a.getBoundingClientRect().top - b.getBoundingClientRect().top)"
            ".map(li => li.querySelector('.min').textContent)"
        )
        said, state = [], MatchState.new(SEMI.match_id)
        for e in (s.event for s in expand(SEMI)):
            state = apply(state, e)
            said += [c.minute] if (c := e.commentary(state)) is not None else []
        assert minutes[:8] == said[::-1][:8]
        assert minutes[:8] == ["90+5'", "90+4'", "90+4'", "90+2'", "88'", "88'", "86'", "86'"]
        await page.screenshot(path=str(tmp_path / "phone-fulltime.png"), full_page=True)

        late = await browser.new_page()
        await late.goto(f"{server.url}?match={SEMI.match_id}")
        await wait_text(late, "score", "2-1", timeout_ms=10_000)
        # A late joiner has the shares and, from the state (1.2), the stretch they cover.
        await expect(late.locator("#poss-span")).to_have_text("55'\u201386'")
        label = await late.locator("#poss-bar").get_attribute("aria-label")
        assert label is not None and label.startswith("Possession 55'\u201386':")


async def test_scorer_names_do_not_wrap_on_a_phone(browser: Any) -> None:
    """Each scorer's line stays one line at 390 px wide, the minute beside the name."""
    events = [s.event for s in expand(SEMI)]
    hub = Hub()
    feed(hub, events)
    async with WebServer(hub, port=0) as server:
        page = await browser.new_page(viewport={"width": 390, "height": 844})
        await page.goto(f"{server.url}?match={SEMI.match_id}")
        await wait_text(page, "score", "2-1", timeout_ms=10_000)
        lines = await page.evaluate(
            "[...document.querySelectorAll('.goal-list li')].map(li => {"
            " const h = parseFloat(getComputedStyle(li).lineHeight);"
            " return Math.round(li.getBoundingClientRect().height / h); })"
        )
        assert lines == [1, 1, 1]
        # One list under the other: each line says its team in text, not by colour alone.
        teams = await page.evaluate(
            "[...document.querySelectorAll('.goal-list li')]"
            ".map(li => getComputedStyle(li, '::before').content)"
        )
        assert teams == ['"ARG"', '"ARG"', '"ENG"']


async def test_a_shootout_shows_its_result(browser: Any) -> None:
    events = [s.event for s in expand(FINAL)]
    hub = Hub()
    feed(hub, events)
    async with WebServer(hub, port=0) as server:
        page = await browser.new_page(viewport={"width": 390, "height": 844})
        await page.goto(f"{server.url}?match={FINAL.match_id}")
        await wait_text(page, "score", "3-3", timeout_ms=10_000)
        await wait_text(page, "shootout", "Argentina win 4-2 on penalties")
        ticker = await _text(page, "ticker")
        assert "kicker" not in ticker


async def test_a_new_run_starts_the_ticker_again_live_and_from_a_snapshot(browser: Any) -> None:
    """A seek (a new run) or a restarted replay is another story: its ticker starts from the
    new run's rows, whether its first frame is an update (a page following live) or a
    snapshot (a page that reconnected during the seek), never keeping the old run's goals."""
    from playwright.async_api import expect

    events = [s.event for s in expand(SEMI)]
    gordon = next(e for e in events if e.type == "goal")
    hub = Hub()

    def run(n: int) -> tuple[list[Event], MatchState]:
        return [e.model_copy(update={"run": n}) for e in events], MatchState.new(
            SEMI.match_id, run=n
        )

    run1, start1 = run(1)
    feed(hub, run1[: gordon.seq], start1)  # through the 55' goal
    async with WebServer(hub, port=0) as server:
        page = await browser.new_page(viewport={"width": 390, "height": 844})
        await page.goto(f"{server.url}?match={SEMI.match_id}")
        await wait_text(page, "score", "0-1", timeout_ms=10_000)
        await expect(page.locator("#ticker")).to_contain_text("Gordon")

        # Live: run 2 replays the first half again (an update is its first frame).
        run2, start2 = run(2)
        state = feed(hub, run2[:30], start2)
        await wait_text(page, "score", "0-0", timeout_ms=10_000)
        await expect(page.locator("#ticker")).not_to_contain_text("Gordon")

        # A snapshot of run 3 (as a page reconnecting during a seek gets) after run 1's goal.
        feed(hub, run2[30 : gordon.seq], state)
        await wait_text(page, "score", "0-1", timeout_ms=10_000)
        await expect(page.locator("#ticker")).to_contain_text("Gordon")
        hub.adopt(state.model_copy(update={"run": 3}))
        await wait_text(page, "score", "0-0", timeout_ms=10_000)
        await expect(page.locator("#ticker")).not_to_contain_text("Gordon")
