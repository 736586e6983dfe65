"""After a reconnect the replayer re-sends its recent window: a broker killed loses what it
acknowledged since its last save, and consumers drop by seq what they already had."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from events import BrokerError, MessageProps, decode_event, decode_state
from simulator import RESEND_WINDOW_S, Replayer, ReplayOptions, new_run, resolve_matches
from tests._fakes import FakeClock, RecordingPublisher

SEMI = resolve_matches("semifinal")[0]


@dataclass
class DroppingPublisher(RecordingPublisher):
    """Loses its connection once, on publishing the event of seq ``drop_at``."""

    drop_at: int = 50
    dropped: bool = False
    reconnects: int = 0
    lost: asyncio.Event = field(default_factory=asyncio.Event)

    async def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        props: MessageProps | None = None,
    ) -> None:
        if self.lost.is_set():
            raise BrokerError("mqtt://fake", "connection lost")
        if (
            not self.dropped
            and topic.endswith("/events")
            and b'"seq":%d,' % self.drop_at in payload
        ):
            self.dropped = True
            self.lost.set()
            raise BrokerError("mqtt://fake", "connection lost")
        await super().publish(topic, payload, qos=qos, retain=retain, props=props)

    async def wait_lost(self) -> None:
        await self.lost.wait()
        raise BrokerError("mqtt://fake", "connection lost")

    async def reconnect(self) -> None:
        self.reconnects += 1
        self.lost = asyncio.Event()


def _event_seqs(pub: RecordingPublisher) -> list[int]:
    return [decode_event(p.payload).seq for p in pub.sent if p.topic.endswith("/events")]


async def _replay(window: float) -> tuple[DroppingPublisher, int, int]:
    clock = FakeClock()
    pub = DroppingPublisher(clock=clock)
    options = ReplayOptions(speed=60, resend_window=window)
    report = await Replayer(pub, options, clock=clock).run(SEMI)
    assert pub.reconnects == report.reconnects == 1
    return pub, report.resent, report.run


@pytest.mark.parametrize("window", [10.0, RESEND_WINDOW_S])
async def test_after_a_reconnect_the_recent_window_is_sent_again(window: float) -> None:
    pub, resent, run = await _replay(window)
    seqs = _event_seqs(pub)
    last = max(seqs)
    assert set(seqs) == set(range(1, last + 1))  # nothing missing
    first_again = seqs[49]  # the first event published after the reconnect
    assert first_again < 50
    assert resent >= 49 - first_again + 1  # and those in flight when it dropped
    if window == RESEND_WINDOW_S:
        assert first_again == 1  # the whole match so far is inside the default window
    else:  # 10 wall seconds at speed 60: the last ten minutes of play before seq 50
        assert first_again > 1
    assert {decode_event(p.payload).run for p in pub.sent if p.topic.endswith("/events")} == {run}
    # the retained state ends at the last event, whatever was re-sent before it
    last_state = decode_state(
        next(p.payload for p in reversed(pub.sent) if p.topic.endswith("/state"))
    )
    assert last_state.last_seq == last
    assert last_state.run == run


async def test_a_zero_window_resends_only_what_was_not_acknowledged() -> None:
    pub, resent, _ = await _replay(0.0)
    seqs = _event_seqs(pub)
    assert seqs == list(range(1, max(seqs) + 1))
    assert resent <= 2  # only the two in flight (event and state window) when it dropped


def test_runs_grow_even_within_one_millisecond() -> None:
    """A run is its start in ms; two runs of one process never share one."""
    import datetime as dt

    now = dt.datetime(2026, 7, 15, 19, 0, tzinfo=dt.UTC)
    first, second = new_run(now), new_run(now)
    assert first >= int(now.timestamp() * 1000)
    assert second > first
