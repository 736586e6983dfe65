"""Controlling a replayer through mosquitto: each command's effect on the published stream.

The replayer runs at speed 60 on a clock the test moves by hand, so every assertion is on the
events' clocks and ``scheduled_at``, never on wall timing. Commands go the way
``matchcast control`` sends them (:func:`matchcast.cli.control.send_command`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from typing import Any

import pytest
from structlog.testing import capture_logs

from consumers import MAX_DISCOVERED_PER_STATUS, Runner, Subscriber
from events import Event, Goal, MatchState, Message, Topics, decode_event, decode_state
from matchcast.app import run_replay, run_watch
from matchcast.app.control import ControlError, find_replayers, send_command
from matchcast.contract.status import ReplayerStatus
from matchcast.transport.connection import BrokerURL
from matchcast.transport.mqtt import MqttClient
from simulator import Replayer, ReplayOptions, expand, lean_match, resolve_matches, wall_offsets
from tests._factories import SEMIFINAL_LEAN_EVENTS
from tests._fakes import ManualClock
from tests._proxies import QoS1Refuser

pytestmark = pytest.mark.mosquitto

#: The lean feed: the controls move the clock, whatever the events; its seqs are pinned below.
SEMI = lean_match(resolve_matches("semifinal")[0])
STREAM = expand(SEMI)


def _offsets(speed: float) -> list[float]:
    return wall_offsets(STREAM, ReplayOptions(speed=speed), SEMI.break_minutes)


class _Live:
    """A replay on mosquitto at speed 60, on a hand-moved clock, and what a watcher got."""

    def __init__(self, url: BrokerURL, topics: Topics, replayer_id: str) -> None:
        self.url, self.topics, self.replayer_id = url, topics, replayer_id
        self.clock = ManualClock()
        self.replayer: Replayer | None = None
        self.ready = asyncio.Event()
        self.received: list[Event | MatchState] = []
        self.task: asyncio.Task[Any] | None = None

    def _ready(self, replayer: Replayer) -> None:
        self.replayer = replayer
        self.ready.set()

    def start(self, tg: asyncio.TaskGroup) -> None:
        self.task = tg.create_task(
            run_replay(
                [SEMI],
                self.url,
                ReplayOptions(speed=60.0, break_seconds=2.0, topics=self.topics),
                replayer_id=self.replayer_id,
                on_ready=self._ready,
                clock=self.clock,
            )
        )

    async def collect(self, watcher: MqttClient) -> None:
        async for message in watcher.messages():
            if message.topic.endswith("/events"):
                event = decode_event(message.payload)
                self.received.append(event)
                if event.type == "full_time":
                    return
            else:
                self.received.append(decode_state(message.payload))

    def events(self) -> list[Event]:
        return [e for e in self.received if not isinstance(e, MatchState)]

    def where(self) -> tuple[int, int]:
        """(run, last seq published) at the replayer."""
        assert self.replayer is not None
        playback = self.replayer.playback()[0]
        return playback.run, playback.last_seq

    async def settle(self) -> float | None:
        assert self.task is not None
        sleeper = asyncio.ensure_future(self.clock.sleeper())
        await asyncio.wait({sleeper, self.task}, return_when=asyncio.FIRST_COMPLETED)
        if not sleeper.done():
            sleeper.cancel()
            return None
        return sleeper.result()

    async def until_seq(self, seq: int, *, newer_than: int = 0) -> float:
        while True:
            due = await self.settle()
            assert due is not None
            run, last = self.where()
            if last >= seq and run > newer_than:
                return due
            self.clock.advance(due)

    async def finish(self) -> None:
        while (due := await self.settle()) is not None:
            self.clock.advance(due)

    async def command(self, action: str, argument: str | None = None) -> Any:
        if action != "status":  # the replay wakes: wait for its next sleep, not the old one
            self.clock.mark()
        return await send_command(
            self.url, action, argument, replayer_id=self.replayer_id, topics=self.topics
        )


async def _statuses(url: BrokerURL, topics: Topics) -> dict[str, ReplayerStatus]:
    """The retained statuses of the replayers online, as a newcomer reads them."""
    inbox: asyncio.Queue[Message] = asyncio.Queue()
    async with MqttClient(url) as client:

        async def pump() -> None:
            async for message in client.messages():
                inbox.put_nowait(message)

        reader = asyncio.ensure_future(pump())
        try:
            return await find_replayers(client, topics, inbox)
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)


def _at(event: Event) -> dt.datetime:
    assert event.scheduled_at is not None
    return event.scheduled_at


async def test_pause_holds_the_stream_and_a_speed_change_re_spaces_it(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    live = _Live(mosquitto_url, topics, "ctl-pause")
    async with MqttClient(mosquitto_url) as watcher, asyncio.timeout(60):
        await watcher.subscribe(topics.events(SEMI.match_id))
        async with asyncio.TaskGroup() as tg:
            reader = tg.create_task(live.collect(watcher))
            live.start(tg)
            await live.ready.wait()
            due = await live.until_seq(10)
            live.clock.advance(due - 0.25)
            paused = await live.command("pause")
            assert (paused.state, paused.matches[0].state) == ("paused", "paused")
            retained = (await _statuses(mosquitto_url, topics))["ctl-pause"]
            assert (retained.state, retained.speed) == ("paused", 60.0)
            assert [(p.state, p.last_seq) for p in retained.playback] == [("paused", 10)]
            live.clock.advance(due + 600.0)  # every old deadline passes during the pause
            status = await live.command("status")
            assert status.matches[0].last_seq == 10  # nothing was scheduled while paused
            resumed = await live.command("resume")
            assert resumed.state == "playing"
            due = await live.until_seq(20)
            live.clock.advance(due - 1.0)
            faster = await live.command("speed", "120")
            assert faster.speed == 120.0
            await live.finish()
            await reader
    events = live.events()
    assert [e.seq for e in events] == list(range(1, SEMIFINAL_LEAN_EVENTS + 1))
    slow, fast = _offsets(60), _offsets(120)
    gap = (_at(events[10]) - _at(events[9])).total_seconds()
    assert gap == pytest.approx(slow[10] - slow[9] + 600.25, abs=1e-3)  # paused 600.25 s
    spacing = [
        (_at(events[j]) - _at(events[20])).total_seconds() for j in range(21, SEMIFINAL_LEAN_EVENTS)
    ]
    assert spacing == pytest.approx(
        [fast[j] - fast[20] for j in range(21, SEMIFINAL_LEAN_EVENTS)], abs=1e-3
    )
    assert (_at(events[20]) - _at(events[19])).total_seconds() == pytest.approx(
        slow[20] - slow[19] - 0.5, abs=1e-3
    )


async def test_seeks_back_and_forth_end_every_consumer_at_the_true_score(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    """A scoreboard, a --session consumer and the raw stream after pauses and seeks."""
    live = _Live(mosquitto_url, topics, "ctl-seek")
    scores: list[str] = []
    board = Subscriber("board")
    board.on_state(lambda state: scores.append(state.scoreline))
    board.on(Goal)(lambda _event, state: scores.append(state.scoreline))
    clean = Runner([board], topics=topics)
    session = Runner([], topics=topics)
    done = {SEMI.match_id}
    async with MqttClient(mosquitto_url) as watcher, asyncio.timeout(90):
        await watcher.subscribe(topics.events(SEMI.match_id))
        await watcher.subscribe(topics.state(SEMI.match_id))
        async with asyncio.TaskGroup() as tg:
            reader = tg.create_task(live.collect(watcher))
            clean_task = tg.create_task(
                run_watch(mosquitto_url, [], runner=clean, until_finished=set(done))
            )
            session_task = tg.create_task(
                run_watch(
                    mosquitto_url,
                    [],
                    runner=session,
                    until_finished=set(done),
                    client_id=f"{topics.root}-session",
                    clean_start=False,
                    session_expiry=300,
                )
            )
            await clean.subscribed.wait()
            await session.subscribed.wait()
            live.start(tg)
            await live.ready.wait()
            await live.until_seq(97)  # 1-1 after the 86' goal
            first_run, _ = live.where()
            back = await live.command("seek", "30")
            assert back.matches[0].clock is not None
            assert back.matches[0].clock.label == "30'"  # where it lands: the minute asked
            await live.until_seq(35, newer_than=first_run)
            second_run, _ = live.where()
            await live.command("pause")
            live.clock.advance(live.clock.t + 100.0)
            await live.command("seek", "88")
            await live.command("resume")
            await live.until_seq(98, newer_than=second_run)
            await live.command("seek", "56")
            await live.finish()
            await reader
            clean_states, session_states = await clean_task, await session_task
    assert clean_states[SEMI.match_id].scoreline == "ARG 2-1 ENG"
    assert session_states[SEMI.match_id].scoreline == "ARG 2-1 ENG"
    assert clean.stats.gaps == session.stats.gaps == 0
    assert "ARG 0-0 ENG" in scores[scores.index("ARG 1-1 ENG") :]  # the goals came off
    # The first event after the seek to 30': the new run's, right after its snapshot.
    snapshot = next(m for m in live.received if isinstance(m, MatchState) and m.run > first_run)
    after = next(e for e in live.events() if e.run == snapshot.run)
    assert (after.seq, after.clock.label) == (snapshot.last_seq + 1, "30'")
    assert snapshot.scoreline == "ARG 0-0 ENG"


async def test_a_minute_outside_the_match_and_an_unknown_replayer_are_clear_errors(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    live = _Live(mosquitto_url, topics, "ctl-errors")
    async with asyncio.timeout(60), asyncio.TaskGroup() as tg:
        live.start(tg)
        await live.ready.wait()
        await live.until_seq(3)
        past_end = r"the last minute played in wc2026-sf-arg-eng is 90\+5'"
        with pytest.raises(ControlError, match=rf"seek 100.*{past_end}|minute 100.*{past_end}"):
            await live.command("seek", "100")
        with pytest.raises(ControlError, match=rf"minute 200 is past the end: {past_end}"):
            await live.command("seek", "200")
        with pytest.raises(ControlError, match="no replayer 'nobody' is online"):
            await send_command(mosquitto_url, "pause", replayer_id="nobody", topics=topics)
        reply = await send_command(mosquitto_url, "stop", topics=topics)  # the only one online
        assert reply.state == "stopped"
        await live.finish()
    assert live.task is not None
    assert live.task.result()[0].last_seq == 3


async def test_hostile_commands_get_an_error_reply_and_the_replayer_goes_on(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    live = _Live(mosquitto_url, topics, "ctl-hostile")
    reply_topic = topics.reply("ctl-hostile", "evil")
    hostile = [
        b"{not json",
        b"[" * 3000 + b"]" * 3000,
        b"x" * 100_000,
        b'{"request_id": "evil", "command": "explode", "reply_to": "%s"}' % reply_topic.encode(),
        b'{"request_id": "evil", "command": "seek", "minute": "130", "reply_to": "%s"}'
        % reply_topic.encode(),
        # a reply topic outside the replayer's replies: answered nowhere
        b'{"request_id": "evil", "command": "status", "reply_to": "%s"}'
        % topics.events(SEMI.match_id).encode(),
    ]
    async with MqttClient(mosquitto_url) as client, asyncio.timeout(60):
        await client.subscribe(reply_topic)
        await client.subscribe(topics.events(SEMI.match_id))
        async with asyncio.TaskGroup() as tg:
            live.start(tg)
            await live.ready.wait()
            await live.until_seq(2)
            for payload in hostile:
                await client.publish(topics.control("ctl-hostile"), payload, qos=1)
            status = await live.command("status")  # still answering, after all of them
            assert status.ok
            await live.command("stop")
            await live.finish()
            replies = []
            async for message in client.messages():
                if message.topic == reply_topic:
                    replies.append(message.payload)
                    if len(replies) == 2:
                        break
                else:
                    assert b'"command"' not in message.payload  # nothing echoed into the stream
    assert b"explode" in replies[0] or b"command" in replies[0]
    assert b"minute 130 is past the end: the last minute played in" in replies[1]


async def test_with_several_replayers_online_the_command_lists_them(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    first, second = _Live(mosquitto_url, topics, "ctl-a"), _Live(mosquitto_url, topics, "ctl-b")
    async with asyncio.timeout(60), asyncio.TaskGroup() as tg:
        first.start(tg)
        second.start(tg)
        await first.ready.wait()
        await second.ready.wait()
        with pytest.raises(ControlError, match="2 replayers online, pick one with --replayer: "):
            await send_command(mosquitto_url, "pause", topics=topics)
        for live in (first, second):
            await live.command("stop")
            await live.finish()


async def test_one_after_another_plays_a_queue_in_order_and_stop_ends_it(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    second = resolve_matches("sim:7")[0]
    order: list[tuple[str, str]] = []
    async with MqttClient(mosquitto_url) as watcher, asyncio.timeout(60):
        await watcher.subscribe(topics.events("+"))
        reports = await run_replay(
            [SEMI, second],
            mosquitto_url,
            ReplayOptions(speed=None, topics=topics),
            replayer_id="ctl-queue",
            one_after_another=True,
        )
        async for message in watcher.messages():
            event = decode_event(message.payload)
            order.append((event.match_id, event.type))
            if (event.match_id, event.type) == (second.match_id, "full_time"):
                break
    assert [r.match_id for r in reports] == [SEMI.match_id, second.match_id]
    first_end = order.index((SEMI.match_id, "full_time"))
    assert {m for m, _ in order[: first_end + 1]} == {SEMI.match_id}
    assert {m for m, _ in order[first_end + 1 :]} == {second.match_id}
    # Stopped in the first match, the queue ends there.
    live = _Live(mosquitto_url, topics, "ctl-queue-stop")
    async with asyncio.timeout(60), asyncio.TaskGroup() as tg:
        live.task = tg.create_task(
            run_replay(
                [SEMI, second],
                mosquitto_url,
                ReplayOptions(speed=60.0, topics=topics),
                replayer_id=live.replayer_id,
                one_after_another=True,
                on_ready=live._ready,
                clock=live.clock,
            )
        )
        await live.ready.wait()
        await live.until_seq(4)
        assert (await live.command("stop")).state == "stopped"
        await live.finish()
    assert [r.match_id for r in live.task.result()] == [SEMI.match_id]


async def test_a_command_nobody_answers_says_so(mosquitto_url: BrokerURL, topics: Topics) -> None:
    """A replayer that says it is online but never answers (a dead one whose will did not
    come, or a command the broker dropped over MQTT 3.1.1): a clear error, not a hang."""
    ghost = (
        b'{"status": "online", "replayer_id": "ghost", "matches": [], "at": "2026-07-15T19:00:00Z"}'
    )
    async with MqttClient(mosquitto_url) as client:
        await client.publish(topics.status("ghost"), ghost, qos=1, retain=True)
    with pytest.raises(ControlError, match=r"no answer from replayer 'ghost' within 0.5s"):
        await send_command(mosquitto_url, "pause", topics=topics, reply_timeout=0.5)
    async with MqttClient(mosquitto_url) as client:  # leave no retained message behind
        await client.publish(topics.status("ghost"), b"", qos=1, retain=True)


class _Subscribes:
    """Stands in for the client: find_replayers only subscribes on it."""

    def __init__(self) -> None:
        self.filters: list[str] = []

    async def subscribe(self, topic_filter: str, *, qos: int = 1) -> None:
        self.filters.append(topic_filter)


def _status_bytes(replayer_id: str, status: str = "online") -> bytes:
    return json.dumps(
        {
            "status": status,
            "replayer_id": replayer_id,
            "matches": ["m1"],
            "at": "2026-07-15T19:00:00Z",
        }
    ).encode()


async def test_a_forged_status_names_no_replayer() -> None:
    """A status whose id is a wildcard, or another replayer's than its topic says, is not
    believed: control never sends a command to a topic the attacker chose."""
    topics = Topics("r")
    inbox: asyncio.Queue[Message] = asyncio.Queue()
    for topic_id, payload_id in (("evil", "#"), ("evil2", "a/+/b"), ("r1", "r2"), ("r3", "r3")):
        inbox.put_nowait(Message(topics.status(topic_id), _status_bytes(payload_id), retain=True))
    found = await find_replayers(_Subscribes(), topics, inbox)  # type: ignore[arg-type]
    assert set(found) == {"r3"}


async def test_a_flood_on_the_status_topics_does_not_hold_control_for_ever(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Non-retained messages keep coming: the search ends at its deadline all the same."""
    monkeypatch.setattr("matchcast.app.control.STATUS_SEARCH_S", 1.0)
    topics = Topics("r")
    inbox: asyncio.Queue[Message] = asyncio.Queue()
    inbox.put_nowait(Message(topics.status("r1"), _status_bytes("r1"), retain=True))

    async def flood() -> None:
        while True:
            inbox.put_nowait(Message(topics.status("junk"), b"x", retain=False))
            await asyncio.sleep(0.05)

    flooding = asyncio.create_task(flood())
    try:
        async with asyncio.timeout(10):  # before the deadline, this waited for ever
            found = await find_replayers(_Subscribes(), topics, inbox)  # type: ignore[arg-type]
    finally:
        flooding.cancel()
    assert set(found) == {"r1"}


async def test_many_forged_statuses_cost_control_bounded_memory() -> None:
    """Anyone who may publish on the status topics can leave thousands of 'online' statuses,
    each listing many matches; control keeps at most MAX_REPLAYERS_FOUND of them, each with
    at most MAX_DISCOVERED_PER_STATUS match ids, and says it skipped the rest."""
    from matchcast.app import control

    topics = Topics("r")
    inbox: asyncio.Queue[Message] = asyncio.Queue()
    many = [f"m{i}" for i in range(MAX_DISCOVERED_PER_STATUS + 50)]
    for i in range(control.MAX_REPLAYERS_FOUND + 5):
        payload = json.dumps(
            {
                "status": "online",
                "replayer_id": f"r{i}",
                "matches": many,
                "at": "2026-07-15T19:00:00Z",
            }
        ).encode()
        inbox.put_nowait(Message(topics.status(f"r{i}"), payload, retain=True))
    with capture_logs() as logs:
        found = await find_replayers(_Subscribes(), topics, inbox)  # type: ignore[arg-type]
    assert len(found) == control.MAX_REPLAYERS_FOUND
    assert {len(s.matches) for s in found.values()} == {MAX_DISCOVERED_PER_STATUS}
    [skipped] = [e for e in logs if e["event"] == "status.too_many"]
    assert skipped["skipped"] == 5


async def test_control_reaches_a_replayer_through_a_node_that_refuses_qos1_subscriptions(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    """A newcomer's NATS run: a surviving node refused QoS 1 subscriptions for minutes after a
    node loss (JetStream), and 5 ``control status`` of 10 failed with the refusal. control's
    subscriptions (the status search, the reply) are QoS 0, which such a node serves."""
    ready = asyncio.Event()
    options = ReplayOptions(speed=20.0, break_seconds=0.2, topics=topics)
    async with QoS1Refuser(mosquitto_url.port) as refuser, asyncio.timeout(60):
        through = BrokerURL("127.0.0.1", refuser.port)
        async with asyncio.TaskGroup() as tg:
            replay = tg.create_task(
                run_replay(
                    [SEMI],
                    mosquitto_url,
                    options,
                    replayer_id="ctl-refused",
                    on_ready=lambda _r: ready.set(),
                )
            )
            await ready.wait()
            status = await send_command(through, "status", topics=topics, protocol="3.1.1")
            assert (status.replayer_id, status.state) == ("ctl-refused", "playing")
            stopped = await send_command(through, "stop", topics=topics, protocol="3.1.1")
            assert stopped.state == "stopped"
            await replay
    assert refuser.subscribes, "the commands went through the refusing node"
    assert all(not refused for _, _, refused in refuser.subscribes)
