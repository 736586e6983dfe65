"""A replayer's announcement on a new connection never holds its replay back.

After a failover the replayer subscribes to its control topic and republishes its retained
status on the new node. On NATS both wait for JetStream, which has no leader for 4-9 s after
the node that led it died (Raft's election timeout), while QoS 1 events may be acknowledged
at once. The announcement was awaited inside ``reconnect()``, so the events waited for it: the
replayer took 16.7 s in a failover_bench round. It now runs beside the replay.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from structlog.testing import capture_logs

import matchcast.app.replay as replay_module
from events import BrokerError, SubscribeRefusedError, Topics
from matchcast.app import run_replay
from matchcast.app.control import ControlError, send_command
from matchcast.app.replay import _StatusTopic
from matchcast.transport import failover, mqtt311
from matchcast.transport.connection import BrokerURL
from simulator import ReplayOptions, resolve_matches
from tests._fake_broker import fake_broker, read_packet
from tests._proxies import QoS1Refuser, SubscribeCloser


class _SlowNode:
    """Takes publishes at once; holds a subscription until ``grant`` is set."""

    def __init__(self) -> None:
        self.grant = asyncio.Event()
        self.subscribing = asyncio.Event()
        self.published: list[str] = []
        self.started_clean = False
        self.reconnects = 1
        self.url = "mqtt://slow-node"

    async def subscribe(self, topic_filter: str, *, qos: int = 1) -> None:
        self.subscribing.set()
        await self.grant.wait()

    async def publish(self, topic: str, payload: bytes, **_: Any) -> None:
        self.published.append(topic)

    def start_clean(self) -> None:
        self.started_clean = True


async def test_the_announcement_after_a_failover_runs_beside_the_replay() -> None:
    topics = Topics(root="t-announce")
    status = _StatusTopic(topics, "r1", ["m1"])
    node = _SlowNode()
    async with asyncio.timeout(10):  # a hang guard: before the fix this call never returned
        await status.announce_again(node)  # type: ignore[arg-type]
        await node.subscribing.wait()
    assert node.published == [], "nothing announced while the subscription is held"
    node.grant.set()
    async with asyncio.timeout(10):
        while not node.published:
            await asyncio.sleep(0)
    assert node.published == [topics.status("r1")]


async def test_an_announcement_still_under_way_at_the_end_is_cancelled() -> None:
    status = _StatusTopic(Topics(root="t-announce"), "r1", ["m1"])
    node = _SlowNode()
    async with asyncio.timeout(10):  # a hang guard
        await status.announce_again(node)  # type: ignore[arg-type]
        await node.subscribing.wait()
    await status.say_gone(node)  # type: ignore[arg-type]
    await asyncio.sleep(0)
    assert not status._announcing
    assert node.published == [Topics(root="t-announce").status("r1")]  # the status removed


class _RefusingNode:
    """Refuses a QoS 1 subscription ``refusals`` times, grants QoS 0; takes publishes."""

    def __init__(self, refusals: int) -> None:
        self.url = "mqtt://node"
        self.reconnects = 1
        self.refusals = refusals
        self.subscribes: list[int] = []
        self.published: list[str] = []

    async def subscribe(self, topic_filter: str, *, qos: int = 1) -> None:
        self.subscribes.append(qos)
        if qos == 1 and self.refusals:
            self.refusals -= 1
            raise SubscribeRefusedError(self.url, topic_filter, [0x80])

    async def publish(self, topic: str, payload: bytes, **_: Any) -> None:
        self.published.append(topic)

    def start_clean(self) -> None:
        raise AssertionError("a refusal is no reason for a new client id")


async def test_a_refused_control_subscription_is_asked_for_again_until_granted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A newcomer's NATS run: the replayer's control subscription was refused after its
    failover and never asked for again, so ``control status`` said no replayer was online for
    the rest of the replay. It listens at QoS 0 meanwhile and asks for QoS 1 again."""
    monkeypatch.setattr(replay_module, "CONTROL_RETRY_S", 0.01)
    topics = Topics(root="t-announce")
    status = _StatusTopic(topics, "r1", ["m1"])
    node = _RefusingNode(refusals=3)
    with capture_logs() as logs:
        async with asyncio.timeout(10):  # a hang guard
            await status.announce_again(node)  # type: ignore[arg-type]
            while not any(e["event"] == "replayer.control_subscribed" for e in logs):
                await asyncio.sleep(0.01)
    assert node.subscribes == [1, 0, 1, 1, 1]
    assert node.published == [topics.status("r1")], "online said at once, granted or not"
    said = [e["event"] for e in logs if e["event"].startswith("replayer.control")]
    assert said == [
        "replayer.control_refused",
        "replayer.control_degraded",
        "replayer.control_subscribed",
    ]
    await asyncio.sleep(0)  # the task's done callback
    assert not status._announcing


async def test_a_replay_whose_control_subscription_is_refused_plays_and_takes_commands(
    mosquitto_url: BrokerURL, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refusal at the start ended the replay with the error; the replay now goes on, takes
    commands at QoS 0 meanwhile, and at QoS 1 once granted."""
    monkeypatch.setattr(replay_module, "CONTROL_RETRY_S", 0.05)
    monkeypatch.setattr(replay_module, "CONTROL_RETRY_MAX_S", 0.2)
    topics = Topics(root="t-announce-refused")
    semi = resolve_matches("semifinal")[0]
    async with QoS1Refuser(mosquitto_url.port) as refuser:
        through = BrokerURL("127.0.0.1", refuser.port)
        ready = asyncio.Event()
        options = ReplayOptions(speed=20.0, break_seconds=0.2, topics=topics)
        with capture_logs() as logs:
            async with asyncio.timeout(60), asyncio.TaskGroup() as tg:
                replay = tg.create_task(
                    run_replay(
                        [semi],
                        through,
                        options,
                        replayer_id="refused",
                        protocol="3.1.1",
                        on_ready=lambda _r: ready.set(),
                    )
                )
                await ready.wait()
                paused = await send_command(mosquitto_url, "pause", topics=topics)
                assert paused.state == "paused"
                refuser.refusing = False
                while not any(e["event"] == "replayer.control_subscribed" for e in logs):
                    await asyncio.sleep(0.05)
                stopped = await send_command(mosquitto_url, "stop", topics=topics)
                assert stopped.state == "stopped"
                (report,) = await replay
    control = topics.control("refused")
    assert [s for s in refuser.subscribes if s[0] == control][:2] == [
        (control, 1, True),
        (control, 0, False),
    ]
    assert refuser.subscribes[-1] == (control, 1, False)
    assert report.final_state is not None and report.final_state.status == "stopped"


class _TimingOutNode(_RefusingNode):
    """Grants the control subscription; its first ``timeouts`` status publishes time out (a
    NATS node's retained store while JetStream elects)."""

    def __init__(self, timeouts: int) -> None:
        super().__init__(refusals=0)
        self.timeouts = timeouts

    async def publish(self, topic: str, payload: bytes, **_: Any) -> None:
        if self.timeouts:
            self.timeouts -= 1
            raise BrokerError(self.url, f"publish to {topic!r} failed: timed out")
        self.published.append(topic)


async def test_a_status_not_taken_is_published_again_until_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A newcomer's NATS run: the status after a failover timed out and was not published
    again, so ``watch`` showed the replayer offline (the will of the connection a node had
    dropped) for the rest of the replay."""
    monkeypatch.setattr(replay_module, "CONTROL_RETRY_S", 0.01)
    topics = Topics(root="t-announce")
    status = _StatusTopic(topics, "r1", ["m1"])
    node = _TimingOutNode(timeouts=2)
    with capture_logs() as logs:
        async with asyncio.timeout(10):  # a hang guard
            await status.announce_again(node)  # type: ignore[arg-type]
            while not node.published:
                await asyncio.sleep(0.01)
    assert node.published == [topics.status("r1")]
    said = [e["event"] for e in logs if e["event"].startswith("replayer.")]
    assert said == ["replayer.status_not_published", "replayer.status_published"]


async def test_a_replayer_id_a_node_will_not_serve_goes_on_under_one_of_its_own(
    mosquitto_url: BrokerURL,
) -> None:
    """``replay --replayer X`` again on RabbitMQ after the node of X's last connection died:
    every other node closes the connection at the control subscription under that client id.
    The replay ended with the error; it goes on under a client id of its own."""
    topics = Topics(root="t-announce-id")
    semi = resolve_matches("semifinal")[0]
    async with SubscribeCloser(mosquitto_url.port, "matchcast-poisoned") as closer:
        through = BrokerURL("127.0.0.1", closer.port)
        options = ReplayOptions(speed=None, topics=topics)
        with capture_logs() as logs:
            async with asyncio.timeout(30):
                (report,) = await run_replay(
                    [semi], through, options, replayer_id="poisoned", protocol="3.1.1"
                )
    assert closer.closed == 1
    assert "replayer.client_id_refused" in [e["event"] for e in logs]
    assert report.final_state is not None and report.final_state.scoreline == "ARG 2-1 ENG"


async def test_a_node_that_closes_every_control_subscription_is_played_on_without_control(
    mosquitto_url: BrokerURL,
) -> None:
    """A tester's node that closed every control subscription: the replayer reconnected ten
    times a second, re-sent the same events each time and never finished. It now asks twice
    (under a client id of its own the second time), then plays on there without commands."""
    topics = Topics(root="t-announce-closer")
    semi = resolve_matches("semifinal")[0]
    async with SubscribeCloser(mosquitto_url.port, topic_part=b"/control") as closer:
        through = BrokerURL("127.0.0.1", closer.port)
        options = ReplayOptions(speed=800.0, break_seconds=0.2, topics=topics)
        with capture_logs() as logs:
            async with asyncio.timeout(60):  # a hang guard: before, it never finished
                (report,) = await run_replay([semi], through, options, protocol="3.1.1")
    assert report.final_state is not None and report.final_state.scoreline == "ARG 2-1 ENG"
    assert closer.closed == 2
    assert closer.connects <= 4, "a handful of connections, not a reconnect loop"
    (unavailable,) = [e for e in logs if e["event"] == "replayer.control_unavailable"]
    assert unavailable["broker"] == str(through)


async def test_a_replay_leaves_a_node_that_closes_its_control_subscription_for_the_next(
    mosquitto_url: BrokerURL,
) -> None:
    """``replay --broker X,GOOD`` where X closes the control subscription: it exited 1 at the
    start and never tried GOOD. It moves to GOOD, where it takes commands."""
    topics = Topics(root="t-announce-next")
    semi = resolve_matches("semifinal")[0]
    ready = asyncio.Event()
    async with SubscribeCloser(mosquitto_url.port, topic_part=b"/control") as closer:
        urls = [BrokerURL("127.0.0.1", closer.port), mosquitto_url]
        options = ReplayOptions(speed=20.0, break_seconds=0.2, topics=topics)
        async with asyncio.timeout(60), asyncio.TaskGroup() as tg:
            replay = tg.create_task(
                run_replay(
                    [semi],
                    urls,
                    options,
                    replayer_id="next",
                    protocol="3.1.1",
                    on_ready=lambda _r: ready.set(),
                )
            )
            await ready.wait()
            while True:  # until it has moved to GOOD and listens there
                try:
                    status = await send_command(
                        mosquitto_url, "status", topics=topics, reply_timeout=1.0
                    )
                    break
                except ControlError:
                    await asyncio.sleep(0.2)
            assert status.replayer_id == "next"
            await send_command(mosquitto_url, "stop", topics=topics)
            (report,) = await replay
    assert report.final_state is not None and report.final_state.status == "stopped"
    assert closer.closed >= 1


async def test_a_replayer_whose_connections_die_at_once_reconnects_with_a_growing_wait(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A node that takes each connection and drops it at once: the replayer reconnected as
    fast as the node answered. Each loss in a row with nothing acknowledged now waits twice
    as long as the one before, up to a cap, by the one failover policy (recorded, not slept);
    the replayer adds no wait of its own on top."""
    waits: list[float] = []

    async def backoff(seconds: float) -> None:
        waits.append(seconds)
        await asyncio.sleep(0)

    monkeypatch.setattr(failover, "backoff", backoff)

    async def accept_then_drop(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_packet(reader)
        writer.write(mqtt311.ConnAck(False, 0).encode())
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.close()

    semi = resolve_matches("semifinal")[0]
    options = ReplayOptions(speed=None, topics=Topics(root="t-quick-loss"))
    async with fake_broker(accept_then_drop) as url:
        with capture_logs() as logs:
            replay = asyncio.create_task(run_replay([semi], url, options, protocol="3.1.1"))
            async with asyncio.timeout(30):  # a hang guard
                while len(waits) < 6:
                    await asyncio.sleep(0.02)
            replay.cancel()
            with contextlib.suppress(asyncio.CancelledError, BrokerError):
                await replay
    assert waits[:6] == [0.1, 0.2, 0.4, 0.8, 1.6, 3.2]
    assert not [e for e in logs if e["event"] == "replay.reconnect_delayed"]
