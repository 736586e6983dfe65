"""The views learn from the replayers' retained statuses which matches lost their replayer."""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import json
import os
import signal
import sys
import threading
import uuid
from collections.abc import Callable, Sequence

import pytest
from structlog.testing import capture_logs

from consumers import MAX_MATCHES, Runner
from consumers._latejoin import MAX_DISCOVERED_PER_STATUS
from events import Topics
from matchcast.app import run_replay
from matchcast.app.replay import OFFLINE_STATUS_EXPIRY_S, _StatusTopic
from matchcast.app.replayers import ReplayerBook, Rivals, follow_replayers
from matchcast.app.retained import find_retained
from matchcast.cli.common import replayer_hint
from matchcast.contract.status import ReplayerStatus
from matchcast.testbroker import FaultProxy, Mosquitto
from matchcast.transport.connection import BrokerURL
from matchcast.transport.mqtt import MqttClient
from simulator import ReplayOptions, resolve_matches
from tests._cli import run_cli

SEMI = resolve_matches(None)[0]
T0 = dt.datetime(2026, 7, 15, 19, tzinfo=dt.UTC)


def _status(rid: str, status: str, at: dt.datetime, *matches: str) -> ReplayerStatus:
    return ReplayerStatus.model_validate(
        {"status": status, "replayer_id": rid, "matches": list(matches), "at": at}
    )


class _Changes:
    """What ``follow_replayers`` said, and a wait for a given change."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self._changed = asyncio.Event()

    def on_change(self, match_id: str, status: str) -> None:
        self.seen.append((match_id, status))
        self._changed.set()

    async def until(self, item: tuple[str, str]) -> None:
        while item not in self.seen:
            await self._changed.wait()
            self._changed.clear()


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
    changes = _Changes()

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
            follower = tg.create_task(follow_replayers(mosquitto_url, topics, changes.on_change))
            await changes.until((SEMI.match_id, "online"))
            replayer.send_signal(signal.SIGKILL)
            await changes.until((SEMI.match_id, "offline"))
            follower.cancel()
    finally:
        if replayer.returncode is None:
            replayer.kill()
        await replayer.wait()


async def test_a_replay_that_ends_removes_its_status_and_its_matches_tell_how_they_ended(
    broker_url: BrokerURL, topics: Topics
) -> None:
    """Nothing of a replayer that ended is left retained (``clear`` found a status per replay
    with a generated id); the match's own retained state says it finished."""
    await run_replay([SEMI], broker_url, ReplayOptions(speed=None, topics=topics))
    found = await find_retained(broker_url, topics)
    assert [(t.kind, t.match_id) for t in found] == [("state", SEMI.match_id)]
    assert "FT" in found[0].summary or "finished" in found[0].summary, found[0].summary


def test_the_last_will_says_offline_and_expires_where_mqtt_5_can() -> None:
    will = _StatusTopic(Topics("t"), "r1", ["m1"]).will()
    assert json.loads(will.payload)["status"] == "offline"
    assert (will.retain, will.expiry) == (True, OFFLINE_STATUS_EXPIRY_S)


@pytest.mark.mosquitto
@pytest.mark.parametrize("command", [["watch"], ["consume", "scoreboard"]])
def test_a_watch_says_when_its_replayer_is_not_there_and_again_when_it_comes(
    mosquitto: Mosquitto, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    """``watch --replayer late-rep`` (or ``consume``) before that replayer runs: after the wait
    (0 here, not REPLAYER_WAIT_S) one warning and one hint line name the id and how to list
    the replayers; it goes on, says when the replayer turns up, and sees its match through."""
    root = f"mctest-{uuid.uuid4().hex[:10]}"
    topics, url = Topics(root), BrokerURL.parse(mosquitto.url)
    module = f"matchcast.cli.{command[0]}"
    monkeypatch.setattr(f"{module}.Runner", functools.partial(Runner, replayer_wait=0))
    hinted = threading.Event()
    real_hint = replayer_hint

    def hint(where: BrokerURL | Sequence[BrokerURL], tree: Topics) -> Callable[[str, bool], None]:
        say = real_hint(where, tree)

        def said(replayer_id: str, found: bool) -> None:
            say(replayer_id, found)
            if not found:
                hinted.set()

        return said

    monkeypatch.setattr(f"{module}.replayer_hint", hint)

    def replay_once_hinted() -> None:
        hinted.wait(timeout=30)  # on a timeout the replay still ends the watch; asserts fail
        options = ReplayOptions(speed=None, topics=topics)
        asyncio.run(run_replay([SEMI], url, options, replayer_id="late-rep"))

    replayer = threading.Thread(target=replay_once_hinted)
    replayer.start()
    try:
        result = run_cli(
            *command, "--broker", mosquitto.url, "--root", root, "--match", SEMI.match_id,
            "--replayer", "late-rep", "--exit-at-full-time", "--log-format", "json",
        )  # fmt: skip
    finally:
        replayer.join(timeout=60)
    assert result.code == 0, result.stderr
    assert hinted.is_set()
    waiting = (
        f"waiting for replayer late-rep: no status of it on {url} under {root}/ yet; still "
        "waiting (it may start later). `matchcast control status` (same --broker and --root) "
        "lists the replayers online."
    )
    lines = result.stderr.splitlines()
    logs = [json.loads(line) for line in lines if line.startswith("{")]
    assert lines.count(waiting) == 1, result.stderr
    assert lines.count("replayer late-rep is there now: its status arrived") == 1
    assert lines.index(waiting) < lines.index("replayer late-rep is there now: its status arrived")
    [missing] = [e for e in logs if e["event"] == "replayer.not_found"]
    assert (missing["replayer_id"], missing["level"]) == ("late-rep", "warning")
    assert [e["replayer_id"] for e in logs if e["event"] == "replayer.found"] == ["late-rep"]
    if command == ["watch"]:
        assert "ARG 2-1 ENG" in result.stdout


@pytest.mark.mosquitto
async def test_the_follower_reads_on_after_its_connection_is_lost(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    """It ended at the first lost connection (``replayer_status.lost``): a view then kept a
    replayer's last status for good, an ``offline`` from a will among them, though the
    replayer came back online (a newcomer's NATS failover run). It reconnects and reads on."""
    changes = _Changes()

    now = dt.datetime.now(dt.UTC)

    async def say(status: str) -> None:
        payload = b""  # a cleared status
        if status:
            payload = _status("r-lost", status, now, SEMI.match_id).model_dump_json().encode()
        async with MqttClient(mosquitto_url) as client:
            await client.publish(topics.status("r-lost"), payload, qos=1, retain=True)

    async with FaultProxy(mosquitto_url.host, mosquitto_url.port) as proxy:
        through = BrokerURL("127.0.0.1", proxy.port)
        with capture_logs() as logs:
            async with asyncio.timeout(30), asyncio.TaskGroup() as tg:
                follower = tg.create_task(follow_replayers(through, topics, changes.on_change))
                await say("offline")
                await changes.until((SEMI.match_id, "offline"))
                proxy.drop()  # the follower's connection is lost; new ones get through
                await say("online")
                await changes.until((SEMI.match_id, "online"))
                follower.cancel()
    await say("")  # no retained status left behind
    assert "replayer_status.reconnecting" in [e["event"] for e in logs]
    assert "replayer_status.lost" not in [e["event"] for e in logs]


async def test_a_second_replayer_on_a_match_says_who_else_plays_it_and_what_consumers_do(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    """Two replays of the semi-final on one broker: each names the other, once, and says
    which run consumers follow."""
    first_ready = asyncio.Event()
    with capture_logs() as logs:
        async with asyncio.timeout(60), asyncio.TaskGroup() as tg:
            first = tg.create_task(
                run_replay(
                    [SEMI],
                    mosquitto_url,
                    ReplayOptions(speed=600, topics=topics),
                    replayer_id="first",
                    on_ready=lambda _r: first_ready.set(),
                )
            )
            await first_ready.wait()
            await asyncio.sleep(0.2)  # its status is out (retained) with its playback
            await run_replay(
                [SEMI],
                mosquitto_url,
                ReplayOptions(speed=None, topics=topics),
                replayer_id="second",
            )
            first.cancel()
    said = [e for e in logs if e["event"] == "replayer.match_shared"]
    by_second = [e for e in said if e["replayer_id"] == "second"]
    assert len(by_second) == 1, said
    (warning,) = by_second
    assert warning["log_level"] == "warning"
    assert (warning["match_id"], warning["other_replayer"]) == (SEMI.match_id, "first")
    assert "follow this replay's newer run and drop first's events" in warning["consumers"]
    by_first = [e for e in said if e["replayer_id"] == "first"]
    assert [e["other_replayer"] for e in by_first] == ["second"]
    assert "follow second's newer run and drop this replay's events" in by_first[0]["consumers"]


def test_a_replayer_names_no_rival_for_itself_an_offline_one_or_another_match() -> None:
    rivals = Rivals("me", ["m1"], started_ms=1000)
    assert rivals.take(_status("me", "online", T0, "m1")) == []
    assert rivals.take(_status("x", "offline", T0, "m1")) == []
    assert rivals.take(_status("x", "online", T0, "m2")) == []
    assert [w["other_replayer"] for w in rivals.take(_status("x", "online", T0, "m1"))] == ["x"]
    assert rivals.take(_status("x", "online", T0, "m1")) == []  # said once
