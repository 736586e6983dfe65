"""The system Chromium, as the browser tests launch it (Playwright drives it), and the waits
they share; the ``browser`` fixture in ``conftest.py`` starts it.

Skipped where Chromium or Playwright is missing, unless ``MATCHCAST_REQUIRE_BROWSER=1`` (as CI
sets it): then they fail. Never downloads a browser: ``apt-get install chromium`` provides it.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["CHROMIUM", "CHROMIUM_ARGS", "REQUIRE_BROWSER_ENV", "missing", "wait_live", "wait_text"]

REQUIRE_BROWSER_ENV = "MATCHCAST_REQUIRE_BROWSER"
CHROMIUM = os.environ.get("MATCHCAST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def missing() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    if not os.path.exists(CHROMIUM):
        return f"Chromium is not installed at {CHROMIUM} (apt-get install chromium)"
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[dev]')"
    return None


async def wait_text(page: Any, element_id: str, text: str, timeout_ms: float = 60_000) -> None:
    """Wait until the element shows ``text`` (Playwright's expect works under the page's CSP)."""
    from playwright.async_api import expect

    await expect(page.locator(f"#{element_id}")).to_have_text(text, timeout=timeout_ms)


async def wait_live(page: Any) -> None:
    """Wait until the page says its connection is live."""
    from playwright.async_api import expect

    await expect(page.locator("#conn")).to_have_attribute("data-state", "live", timeout=10_000)
