"""The replayer after a failover: resent events are the same events, and no state older than
what consumers already hold is sent (a consumer would take it for the match starting again)."""

from __future__ import annotations

import asyncio

from events import BrokerError, MessageProps, decode_event, decode_state
from simulator import Replayer, ReplayOptions, resolve_matches
from tests._fakes import FakeClock

SEMI = resolve_matches("semifinal")[0]
LOST_AT = 41


class LosingPublisher:
    """Takes every publish; the one of event LOST_AT reaches the broker but its acknowledgement
    is lost with the node (the publish raises), as when a node dies mid-replay."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes]] = []
        self.lost_at: int | None = None
        self.reconnects = 0
        self._lost = asyncio.Event()

    async def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        props: MessageProps | None = None,
    ) -> None:
        self.sent.append((topic, payload))
        if self.lost_at is None and topic.endswith("/events") and b'"seq":41,' in payload:
            self.lost_at = len(self.sent)
            self._lost.set()
            raise BrokerError("mqtt://node1:1883", "connection lost")

    async def wait_lost(self) -> None:
        await self._lost.wait()
        raise BrokerError("mqtt://node1:1883", "connection lost")

    async def reconnect(self) -> None:
        self.reconnects += 1
        self._lost = asyncio.Event()


async def test_resent_events_keep_their_time_and_no_older_state_follows_a_failover() -> None:
    pub = LosingPublisher()
    async with asyncio.timeout(30):
        # Timed (on a clock that jumps), as replays run: each resumed run has its own window.
        replayer = Replayer(pub, ReplayOptions(speed=60), clock=FakeClock())
        report = await replayer.run(SEMI)
    assert pub.reconnects == 1
    assert report.final_state is not None
    assert report.final_state.scoreline == "ARG 2-1 ENG"
    assert pub.lost_at is not None
    before, after = pub.sent[: pub.lost_at], pub.sent[pub.lost_at :]
    first_emitted = {}
    for topic, payload in before:
        if topic.endswith("/events"):
            event = decode_event(payload)
            first_emitted.setdefault(event.seq, event.emitted_at)
    resent = [decode_event(p) for t, p in after if t.endswith("/events")]
    again = [e for e in resent if e.seq in first_emitted]
    assert again, "the unacknowledged event is sent again"
    assert all(e.emitted_at == first_emitted[e.seq] for e in again)
    states_after = [decode_state(p).last_seq for t, p in after if t.endswith("/state")]
    assert min(states_after) >= min(e.seq for e in again)
