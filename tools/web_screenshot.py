"""Screenshots of the match page at full time, for the README (docs/web-fulltime.png).

Runs everything in one process: the embedded broker, the web server with its bridge, a browser
(the system Chromium, driven by Playwright) opened at kick-off, and a fast replay of the
semi-final; at full time it saves a desktop and a phone-width screenshot.

    python tools/web_screenshot.py [--out docs/web-fulltime.png] [--phone docs/web-phone.png]
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from playwright.async_api import async_playwright, expect

from consumers import Runner
from matchcast.app import run_replay, run_watch
from matchcast.transport.broker import embedded_broker
from matchcast.transport.connection import BrokerURL
from matchcast.web import Hub, WebServer, bridge
from simulator import ReplayOptions, resolve_matches

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


async def main(out: Path, phone: Path | None, speed: float) -> None:
    match = resolve_matches("semifinal")[0]
    async with embedded_broker() as broker, async_playwright() as pw:
        url = BrokerURL(broker.host, broker.port)
        hub = Hub()
        runner = Runner([bridge(hub)])
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        async with WebServer(hub, port=0) as server, asyncio.TaskGroup() as tg:
            watch = tg.create_task(run_watch(url, [], runner=runner))
            await runner.subscribed.wait()
            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            await page.goto(f"{server.url}?match={match.match_id}")
            await expect(page.locator("#conn")).to_have_attribute("data-state", "live")
            await run_replay([match], url, ReplayOptions(speed=speed, break_seconds=0.5))
            await expect(page.locator("#clock")).to_have_text("FT", timeout=60_000)
            await page.wait_for_timeout(2000)  # let the goal animation settle
            await page.screenshot(path=str(out), full_page=True)
            if phone is not None:
                mobile = await browser.new_page(
                    viewport={"width": 390, "height": 844}, device_scale_factor=2
                )
                await mobile.goto(f"{server.url}?match={match.match_id}")
                await expect(mobile.locator("#clock")).to_have_text("FT")
                await mobile.screenshot(path=str(phone), full_page=True)
            runner.stop()
            await watch
        await browser.close()
    print(f"saved {out}" + (f" and {phone}" if phone else ""))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/web-fulltime.png"))
    parser.add_argument("--phone", type=Path, default=None)
    parser.add_argument("--speed", type=float, default=600.0)
    args = parser.parse_args()
    asyncio.run(main(args.out, args.phone, args.speed))
