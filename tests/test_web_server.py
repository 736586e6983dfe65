"""The web server over real sockets: the page, its assets, and SSE streams with resume."""

from __future__ import annotations

import asyncio
import re

import pytest

from consumers import Runner
from events import Event, Topics
from matchcast.app import run_replay, run_watch
from matchcast.transport.connection import BrokerURL
from matchcast.web import Hub, WebServer, bridge
from simulator import ReplayOptions, expand, lean_match, resolve_matches
from tests._sse import SSEClient, get, open_stream
from tests._web import feed

#: The lean feed: the hub's frames, whatever the events; its seqs are pinned below.
SEMI = lean_match(resolve_matches("semifinal")[0])
EVENTS: list[Event] = [s.event for s in expand(SEMI)]


@pytest.fixture
async def server() -> WebServer:
    async with WebServer(Hub(), port=0) as srv:
        yield srv  # type: ignore[misc]


async def test_page_and_assets_are_served_by_the_package(server: WebServer) -> None:
    """Everything the page loads comes from this server: no CDN, so it works offline."""
    status, headers, html = await get(server.port, "/")
    assert status == 200
    assert headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in headers["content-security-policy"]
    text = html.decode()
    assert 'id="score"' in text and 'aria-live="polite"' in text
    assets = re.findall(r'(?:href|src)="([^"]+)"', text)
    assert assets and all(a.startswith("/") for a in assets)
    for asset in assets:
        status, _, body = await get(server.port, asset)
        assert status == 200, asset
        # The SVG namespace names a vocabulary; nothing is fetched from it.
        body = body.replace(b'xmlns="http://www.w3.org/2000/svg"', b"")
        body = body.replace(b'"http://www.w3.org/2000/svg"', b"")
        assert b"http://" not in body and b"https://" not in body, asset
    assert (await get(server.port, "/static/../cli.py"))[0] == 404
    assert (await get(server.port, "/nope"))[0] == 404
    assert (await get(server.port, "/", method="POST"))[0] == 405
    assert (await get(server.port, "/events", method="HEAD"))[0] == 405


async def test_api_lists_matches(server: WebServer) -> None:
    feed(server.hub, EVENTS[:62])
    status, headers, body = await get(server.port, "/api/matches")
    assert status == 200 and headers["content-type"] == "application/json"
    assert b'"score": {"ARG": 0, "ENG": 1}' in body


async def test_stream_starts_with_snapshot_then_follows_live(server: WebServer) -> None:
    state = feed(server.hub, EVENTS[:62])
    client = await open_stream(server.port, SEMI.match_id)
    assert client.status == 200
    assert client.headers["content-type"].startswith("text/event-stream")
    assert (await client.next()).kind == "matches"
    snap = await client.next()
    assert (snap.kind, snap.id, snap.data["state"]["score"]) == ("state", 62, {"ARG": 0, "ENG": 1})
    feed(server.hub, EVENTS[62:64], state)
    assert [(await client.next()).id for _ in range(2)] == [63, 64]
    client.close()


async def test_reconnect_with_last_event_id_misses_nothing(server: WebServer) -> None:
    state = feed(server.hub, EVENTS[:30])
    first = await open_stream(server.port, SEMI.match_id)
    await first.next()
    assert (await first.next()).id == 30
    first.close()
    state = feed(server.hub, EVENTS[30:40], state)  # published while it was away
    again = await open_stream(server.port, SEMI.match_id, last_event_id=30)
    assert (await again.next()).kind == "matches"
    feed(server.hub, EVENTS[40:42], state)
    assert [(await again.next()).id for _ in range(11)] == list(range(31, 42))
    again.close()


async def test_bad_match_id_is_refused(server: WebServer) -> None:
    client = await open_stream(server.port, "../x")
    assert client.status == 400
    client.close()


async def test_stalled_browser_is_dropped_and_others_get_everything() -> None:
    """A browser that stops reading fills its queue and is disconnected; the others carry on."""
    hub = Hub(queue_size=8)
    async with WebServer(hub, port=0) as server:
        state = feed(hub, EVENTS[:1])
        stalled = await open_stream(server.port, SEMI.match_id, rcvbuf=4096)
        reader = await open_stream(server.port, SEMI.match_id)
        got: list[int] = []

        async def read_all(client: SSEClient, upto: int) -> None:
            while not got or got[-1] < upto:
                event = await client.next()
                if event.kind == "update":
                    got.append(event.id or 0)

        tick = EVENTS[2]
        seq = 1
        async with asyncio.timeout(30):
            while hub.stats.clients_dropped == 0:
                for _ in range(5):
                    seq += 1
                    event = tick.model_copy(update={"seq": seq})
                    state = state.model_copy(update={"last_seq": seq})
                    hub.publish(event, state)
                await read_all(reader, seq)
        assert got == list(range(2, seq + 1))
        assert hub.stats.clients_connected == 1
        stalled.close()
        reader.close()


@pytest.mark.mosquitto
async def test_two_hundred_browsers_each_get_every_update_in_order(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    """200 concurrent SSE clients on one server during a replay: every seq, in order, to all."""
    hub = Hub()
    runner = Runner([bridge(hub)], topics=topics)
    async with WebServer(hub, port=0) as server, asyncio.timeout(90):
        watch = asyncio.ensure_future(run_watch(mosquitto_url, [], runner=runner))
        await runner.subscribed.wait()
        clients = await asyncio.gather(
            *(open_stream(server.port, SEMI.match_id) for _ in range(200))
        )
        assert hub.stats.clients_connected == 200

        async def collect(client: SSEClient) -> list[int]:
            seqs: list[int] = []
            while True:
                event = await client.next()
                if event.kind == "update":
                    seqs.append(event.id or 0)
                    if event.data["event"]["type"] == "full_time":
                        client.close()
                        return seqs

        readers = [asyncio.ensure_future(collect(c)) for c in clients]
        options = ReplayOptions(speed=2400, break_seconds=0.2, topics=topics)
        await run_replay([SEMI], mosquitto_url, options)
        results = await asyncio.gather(*readers)
        runner.stop()
        await watch
    expected = list(range(1, len(EVENTS) + 1))
    assert all(seqs == expected for seqs in results)
    assert hub.stats.clients_dropped == 0
    assert hub.stats.frames_sent == 200 * len(EVENTS)


def test_page_script_never_parses_wire_text_as_html() -> None:
    """Names reach the page as text nodes (textContent, append of strings), never as markup:
    the script has no HTML sink at all, so a scorer called ``<img onerror=...>`` stays text."""
    from importlib import resources

    script = (resources.files("matchcast.web") / "static" / "app.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script, sink
    assert "textContent" in script


async def test_an_idle_stream_gets_keepalive_comments() -> None:
    """Silence on a stream is broken by a comment line, so proxies keep it and a dead browser
    is found; the comment is not an event."""
    async with WebServer(Hub(), port=0, keepalive=0.05) as server:
        client = await open_stream(server.port, SEMI.match_id)
        async with asyncio.timeout(10):
            while b": keepalive" not in client.buffer:
                await client._more()
        client.close()
