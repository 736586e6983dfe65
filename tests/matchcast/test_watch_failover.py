"""run_watch through a failover whose re-subscription the new node refuses at first.

On NATS, a node still electing its JetStream leaders answers a SUBSCRIBE with 0x80; the fast
client re-subscribes inside ``reconnect()``, so the refusal comes out of the reconnect itself
(seen in benchmarks/failover_bench.py: the consumer crashed with ``subscribe ... refused
(code [128])``). The consumer must try again, as it does when the runner's subscribe fails.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from structlog.testing import capture_logs

import matchcast.app.watch as watch_module
from events import BrokerError, ConnectionLostError, Message, Topics
from matchcast.app import run_watch
from matchcast.transport.connection import BrokerURL

URL = BrokerURL("127.0.0.1", 1)


class _Flaky:
    """Loses its first connection; its first reconnect is refused the re-subscription."""

    def __init__(self) -> None:
        self.url = URL
        self.urls = (URL,)
        self.persistent = False
        self.reconnects = 0
        self.generation = 0

    async def subscribe(self, topic_filter: str, *, qos: int = 1) -> None:
        pass

    async def publish(self, topic: str, payload: bytes, **_: Any) -> None:
        pass

    async def messages(self) -> AsyncIterator[Message]:
        if self.generation == 0:
            raise ConnectionLostError(str(URL), "node killed")
        return
        yield  # an async generator that ends: the connection closed

    async def reconnect(self) -> None:
        self.reconnects += 1  # connected to another node ...
        self.generation += 1
        if self.reconnects == 1:  # ... which refuses the restored subscription
            raise BrokerError(str(URL), "subscribe to 'x/matches/+/events' refused (code [128])")


async def test_a_refused_resubscription_inside_reconnect_is_tried_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The consumer goes on (reconnecting again) instead of dying with the refusal."""
    flaky = _Flaky()

    @asynccontextmanager
    async def fake_client(*_: Any, **__: Any) -> AsyncIterator[_Flaky]:
        yield flaky

    monkeypatch.setattr(watch_module, "mqtt_client", fake_client)
    with capture_logs() as logs:
        await run_watch(URL, [], topics=Topics(root="t-watch-failover"))
    assert flaky.reconnects == 2
    failover = ("consumer.connection_lost", "consumer.resubscribe_failed")
    assert [e["event"] for e in logs if e["event"] in failover] == list(failover)
