"""The views learn from the replayers' retained statuses which matches lost their replayer."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import signal
import sys

import pytest
from structlog.testing import capture_logs

from consumers import MAX_MATCHES
from consumers._latejoin import MAX_DISCOVERED_PER_STATUS
from events import Topics
from matchcast.app import run_replay
from matchcast.app.replayers import ReplayerBook, follow_replayers
from matchcast.contract.status import ReplayerStatus
from matchcast.transport.connection import BrokerURL
from simulator import ReplayOptions, resolve_matches

SEMI = resolve_matches(None)[0]
T0 = dt.datetime(2026, 7, 15, 19, tzinfo=dt.UTC)


def _status(rid: str, status: str, at: dt.datetime, *matches: str) -> ReplayerStatus:
    return ReplayerStatus.model_validate(
        {"status": status, "replayer_id": rid, "matches": list(matches), "at": at}
    )


def test_the_latest_replayer_of_a_match_decides_its_status() -> None:
    """An older replayer's will, delivered after a newer one's online, changes nothing."""
    book = ReplayerBook()
    later = T0 + dt.timedelta(minutes=5)
    assert book.update(_status("b", "online", later, "m1")) == [("m1", "online")]
    assert book.update(_status("a", "offline", T0, "m1", "m2")) == [("m2", "offline")]
    # b's will carries b's start, older than its online: still b's latest word.
    assert book.update(_status("b", "offline", later - dt.timedelta(seconds=1), "m1")) == [
        ("m1", "offline")
    ]
    assert book.update(_status("b", "offline", later, "m1")) == []


def test_a_status_listing_many_matches_keeps_the_book_bounded() -> None:
    """A hostile status listing 90,000 ids is read as far as the per-status limit; statuses of
    ever new ids make the book forget the least recently named, said once."""
    book = ReplayerBook()
    many = [f"m{i}" for i in range(90_000)]
    with capture_logs() as logs:
        changed = book.update(_status("x", "offline", T0, *many))
    assert changed == [(m, "offline") for m in many[:MAX_DISCOVERED_PER_STATUS]]
    assert [e["listed"] for e in logs if e["event"] == "replayer_status.matches_limited"] == [
        90_000
    ]
    statuses = [
        _status(f"r{r}", "offline", T0, *(f"r{r}-{i}" for i in range(MAX_DISCOVERED_PER_STATUS)))
        for r in range(MAX_MATCHES // MAX_DISCOVERED_PER_STATUS + 5)
    ]
    with capture_logs() as logs:
        for status in statuses:
            book.update(status)
    assert len(book) == MAX_MATCHES
    assert [e["limit"] for e in logs if e["event"] == "replayer_status.forgotten"] == [MAX_MATCHES]
    assert book.update(statuses[-1]) == []  # the latest named are still known
    assert book.update(_status("x", "offline", T0, "m0")) == [("m0", "offline")]  # forgotten


@pytest.mark.mosquitto
async def test_a_replayer_killed_is_reported_offline(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    """SIGKILL: no goodbye; its last will (published by the broker) says offline."""
    seen: list[tuple[str, str]] = []
    changed = asyncio.Event()

    def on_change(match_id: str, status: str) -> None:
        seen.append((match_id, status))
        changed.set()

    async def until(item: tuple[str, str]) -> None:
        while item not in seen:
            await changed.wait()
            changed.clear()

    args = ["replay", "--speed", "1", "--broker", str(mosquitto_url), "--root", topics.root]
    replayer = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "matchcast",
        *args,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "MATCHCAST_BROKER": ""},
    )
    try:
        async with asyncio.timeout(60), asyncio.TaskGroup() as tg:
            follower = tg.create_task(follow_replayers(mosquitto_url, topics, on_change))
            await until((SEMI.match_id, "online"))
            replayer.send_signal(signal.SIGKILL)
            await until((SEMI.match_id, "offline"))
            follower.cancel()
    finally:
        if replayer.returncode is None:
            replayer.kill()
        await replayer.wait()


async def test_a_replay_that_ends_leaves_its_matches_offline_for_a_late_viewer(
    broker_url: BrokerURL, topics: Topics
) -> None:
    await run_replay([SEMI], broker_url, ReplayOptions(speed=None, topics=topics))
    got = asyncio.Event()
    seen: list[tuple[str, str]] = []

    def on_change(match_id: str, status: str) -> None:
        seen.append((match_id, status))
        got.set()

    async with asyncio.timeout(30), asyncio.TaskGroup() as tg:
        follower = tg.create_task(follow_replayers(broker_url, topics, on_change))
        await got.wait()
        follower.cancel()
    assert seen == [(SEMI.match_id, "offline")]
