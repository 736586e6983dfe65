"""A replay stopped before full time says so: ``replay_stopped``, then a ``stopped`` state."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys

import pytest

from events import MessageProps, Topics, decode_event, decode_state
from matchcast.transport.connection import BrokerURL
from matchcast.transport.mqtt import MqttClient
from simulator import Replayer, ReplayOptions, resolve_matches
from tests._fakes import FakeClock, RecordingPublisher

SEMIFINAL = resolve_matches(None)[0]


class StallingClock(FakeClock):
    """Jumps to each deadline until ``stall_after`` of them, then waits until cancelled."""

    def __init__(self, stall_after: int) -> None:
        super().__init__()
        self.stall_after = stall_after
        self.stalled = asyncio.Event()

    async def sleep_until(self, deadline: float) -> None:
        if len(self.deadlines) >= self.stall_after:
            self.stalled.set()
            await asyncio.Event().wait()
        await super().sleep_until(deadline)


def _last_two(pub: RecordingPublisher) -> tuple[dict[str, object], dict[str, object]]:
    event, state = pub.sent[-2], pub.sent[-1]
    assert event.topic == Topics().events(SEMIFINAL.match_id)
    assert (state.topic, state.retain) == (Topics().state(SEMIFINAL.match_id), True)
    return json.loads(event.payload), json.loads(state.payload)


async def test_an_interrupted_replay_publishes_replay_stopped_and_a_stopped_state() -> None:
    """Ctrl-C at about 5': the retained state says ``stopped`` there, not ``live`` forever."""
    clock = StallingClock(stall_after=8)
    pub = RecordingPublisher(clock)
    replayer = Replayer(pub, ReplayOptions(speed=60), clock=clock)
    task = asyncio.create_task(replayer.run(SEMIFINAL))
    async with asyncio.timeout(10):
        await clock.stalled.wait()
    published = [decode_event(m.payload) for m in pub.sent if m.topic.endswith("/events")]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    event, state = _last_two(pub)
    assert event["type"] == "replay_stopped"
    assert event["reason"] == "interrupted"
    assert event["seq"] == published[-1].seq + 1
    assert event["run"] == published[-1].run
    assert event["clock"] == json.loads(pub.sent[-4].payload)["clock"]
    stopped = decode_state(pub.sent[-1].payload)
    assert (stopped.status, stopped.last_seq, stopped.display_clock) == (
        "stopped",
        event["seq"],
        "STOPPED",
    )
    assert stopped.info is not None
    assert stopped.info.competition == "FIFA World Cup 2026"


class FailingPublisher(RecordingPublisher):
    """Fails the ``fail_at``-th publish with a bug, once."""

    def __init__(self, fail_at: int) -> None:
        super().__init__()
        self.calls = 0
        self.fail_at = fail_at

    async def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        props: MessageProps | None = None,
    ) -> None:
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("disk full")
        await super().publish(topic, payload, qos=qos, retain=retain, props=props)


async def test_a_replay_ended_by_an_error_says_stopped_with_the_error() -> None:
    pub = FailingPublisher(fail_at=41)
    replayer = Replayer(pub, ReplayOptions(speed=None))
    with pytest.raises(ExceptionGroup):
        await replayer.run(SEMIFINAL)
    event, state = _last_two(pub)
    assert (event["type"], event["reason"]) == ("replay_stopped", "error")
    assert "RuntimeError: disk full" in str(event["detail"])
    assert state["status"] == "stopped"


async def test_a_replay_that_reaches_full_time_says_nothing_more() -> None:
    pub = RecordingPublisher()
    await Replayer(pub, ReplayOptions(speed=None)).run(SEMIFINAL)
    event, state = _last_two(pub)
    assert event["type"] == "full_time"
    assert state["status"] == "finished"
    assert not any(b'"replay_stopped"' in m.payload for m in pub.sent)


async def test_a_replay_cancelled_before_its_first_event_publishes_nothing() -> None:
    """Nothing of the run is on the wire: nothing to say stopped (an earlier run's state
    stays as that run left it)."""
    clock = StallingClock(stall_after=0)
    pub = RecordingPublisher(clock)
    task = asyncio.create_task(Replayer(pub, ReplayOptions(speed=60), clock=clock).run(SEMIFINAL))
    async with asyncio.timeout(10):
        await clock.stalled.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert pub.sent == []


@pytest.mark.mosquitto
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
async def test_matchcast_replay_stopped_by_a_signal_leaves_a_stopped_state(
    mosquitto_url: BrokerURL, topics: Topics, sig: signal.Signals
) -> None:
    """The issue's case, end to end: Ctrl-C (or SIGTERM) at a few minutes in; the retained
    state a late joiner gets says ``stopped`` there, and the exit code is still 130."""
    args = ["replay", "--speed", "60", "--broker", str(mosquitto_url), "--root", topics.root]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "matchcast",
        *args,
        "--log-format",
        "json",
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "MATCHCAST_BROKER": ""},
    )
    try:
        assert proc.stderr is not None
        async with asyncio.timeout(60):
            async for line in proc.stderr:  # kick-off published: the replay is under way
                if b'"event.published"' in line:
                    break
            async with MqttClient(mosquitto_url) as client:
                await client.subscribe(topics.state(SEMIFINAL.match_id))
                proc.send_signal(sig)
                await proc.wait()
                async for message in client.messages():
                    state = decode_state(message.payload)
                    if state.status != "live":
                        break
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 130
    assert state.status == "stopped"
    assert state.last_seq > 1
    assert state.clock is not None
    assert state.clock.period == 1


@pytest.mark.parametrize(("cancel_is_stop", "level"), [(False, "warning"), (True, "info")])
async def test_a_cancel_that_is_how_the_program_ends_is_no_warning(
    cancel_is_stop: bool, level: str
) -> None:
    """``web --demo`` ends with Ctrl-C: its replay's end is logged as info; ``replay``'s, a
    cut-short replay, as a warning."""
    from structlog.testing import capture_logs

    clock = StallingClock(stall_after=3)
    pub = RecordingPublisher(clock)
    replayer = Replayer(pub, ReplayOptions(speed=60, cancel_is_stop=cancel_is_stop), clock=clock)
    with capture_logs() as logs:
        task = asyncio.create_task(replayer.run(SEMIFINAL))
        async with asyncio.timeout(10):
            await clock.stalled.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    (said,) = [e for e in logs if e["event"] == "replay.interrupted"]
    assert said["log_level"] == level
