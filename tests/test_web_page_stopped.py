"""The page shows a stopped replay as stopped, a match whose replayer died as offline, and the
match's competition, stage, venue and kickoff. In a real browser (see tests/_browser.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from events import ReplayStopped
from matchcast.web import Hub, WebServer
from simulator import expand, resolve_matches
from tests._browser import wait_text
from tests._web import feed

pytestmark = pytest.mark.browser

SEMI = resolve_matches("semifinal")[0]
EVENTS = [s.event for s in expand(SEMI)]


async def test_a_stopped_replay_is_shown_stopped_with_the_match_info(
    browser: Any, tmp_path: Path
) -> None:
    from playwright.async_api import expect

    hub = Hub()
    state = feed(hub, EVENTS[:8])
    assert state.clock is not None
    async with WebServer(hub, port=0) as server:
        page = await browser.new_page(viewport={"width": 390, "height": 844})
        await page.goto(f"{server.url}?match={SEMI.match_id}")
        await wait_text(page, "status", "Live", timeout_ms=10_000)
        await expect(page.locator("#about")).to_have_text(
            "FIFA World Cup 2026 · Semi-final · Mercedes-Benz Stadium, Atlanta · 2026-07-15 15:00"
        )
        stop = ReplayStopped(
            match_id=SEMI.match_id,
            seq=state.last_seq + 1,
            clock=state.clock,
            emitted_at=EVENTS[8].emitted_at,
            reason="interrupted",
        )
        feed(hub, [stop], state)
        await wait_text(page, "status", "Replay stopped", timeout_ms=10_000)
        await expect(page.locator("#clock")).to_have_text(f"at 1H {state.clock.label}")
        await expect(page.locator("#ticker li").first).to_contain_text("REPLAY STOPPED")
        await expect(page.locator("#ticker li").first).to_contain_text("not a final score")
        await page.screenshot(path=str(tmp_path / "stopped.png"), full_page=True)

        late = await browser.new_page()  # a late joiner, from the retained (stopped) state
        await late.goto(f"{server.url}?match={SEMI.match_id}")
        await wait_text(late, "status", "Replay stopped", timeout_ms=10_000)
        await expect(late.locator("#about")).to_contain_text("Semi-final")
        await expect(late.locator("#ticker li").first).to_contain_text("the replay stopped here")


async def test_a_match_whose_replayer_died_is_shown_offline(browser: Any) -> None:
    """The last will says offline: the page says so instead of a live clock forever; events
    coming again (a new replayer) put it back to live."""
    from playwright.async_api import expect

    hub = Hub()
    state = feed(hub, EVENTS[:8])
    async with WebServer(hub, port=0) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}?match={SEMI.match_id}")
        await wait_text(page, "status", "Live", timeout_ms=10_000)
        hub.replayer_status(SEMI.match_id, "offline")
        await wait_text(page, "status", "Replayer offline", timeout_ms=10_000)
        await expect(page.locator("#status")).to_have_attribute("data-status", "offline")

        joiner = await browser.new_page()  # told on connecting, not only live
        await joiner.goto(f"{server.url}?match={SEMI.match_id}")
        await wait_text(joiner, "status", "Replayer offline", timeout_ms=10_000)

        feed(hub, EVENTS[8:9], state)
        await wait_text(page, "status", "Live", timeout_ms=10_000)
