"""A replayer's announcement on a new connection never holds its replay back.

After a failover the replayer subscribes to its control topic and republishes its retained
status on the new node. On NATS both wait for JetStream, which has no leader for 4-9 s after
the node that led it died (Raft's election timeout), while QoS 1 events may be acknowledged
at once. The announcement was awaited inside ``reconnect()``, so the events waited for it: the
replayer took 16.7 s in a failover_bench round. It now runs beside the replay.
"""

from __future__ import annotations

import asyncio
from typing import Any

from events import Topics
from matchcast.app.replay import _StatusTopic


class _SlowNode:
    """Takes publishes at once; holds a subscription until ``grant`` is set."""

    def __init__(self) -> None:
        self.grant = asyncio.Event()
        self.subscribing = asyncio.Event()
        self.published: list[str] = []
        self.started_clean = False

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
    await status.say_offline(node)  # type: ignore[arg-type]
    await asyncio.sleep(0)
    assert not status._announcing
    assert node.published == [Topics(root="t-announce").status("r1")]  # the offline status
