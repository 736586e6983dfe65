"""A consumer under load: the runner, its metrics, and its reported final states.

``matchcast load-consumer`` runs this: a :class:`consumers.Runner` on one connection, with a
:class:`StateReporter` (its state after every change, so ``matchcast load --verify-state`` and
``matchcast verify`` can check it) and any other
subscribers, every handler instrumented by :class:`RunnerMetrics`.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import structlog

from consumers import Runner, Subscriber
from events import BatchSource, Message, MessageSource, Topics
from matchcast.load._metrics import RunnerMetrics
from matchcast.load._run import LoadClient
from matchcast.load._verify import StateReporter

__all__ = ["SharedSource", "run_consumer"]

_log = structlog.get_logger("matchcast.consumer")

#: Seconds a stopping consumer waits for its reports in flight.
REPORT_FLUSH_S = 5.0


class SharedSource:
    """A message source whose subscriptions join the shared group ``group``."""

    def __init__(self, source: MessageSource, group: str) -> None:
        self.source = source
        self.group = group

    async def subscribe(self, topic_filter: str, *, qos: int = 1) -> None:
        """Subscribe to ``$share/{group}/{topic_filter}``."""
        await self.source.subscribe(f"$share/{self.group}/{topic_filter}", qos=qos)

    def messages(self) -> AsyncIterator[Message]:
        """The underlying source's messages."""
        return self.source.messages()

    @staticmethod
    def over(source: MessageSource, group: str) -> SharedSource:
        """A shared source over ``source``, taking batches where ``source`` can."""
        if isinstance(source, BatchSource):
            return SharedBatchSource(source, group)
        return SharedSource(source, group)


class SharedBatchSource(SharedSource):
    """A :class:`SharedSource` over a source that can hand messages over in batches."""

    def __init__(self, source: MessageSource, group: str) -> None:
        super().__init__(source, group)
        if not isinstance(source, BatchSource):
            raise TypeError(f"{type(source).__name__} cannot hand messages over in batches")
        self.batches: BatchSource = source

    def set_batch_handler(self, handler: Callable[[list[Message]], None] | None) -> None:
        """See :class:`events.BatchSource`."""
        self.batches.set_batch_handler(handler)

    async def wait_closed(self) -> None:
        """See :class:`events.BatchSource`."""
        await self.batches.wait_closed()


async def run_consumer(
    client: LoadClient,
    topics: Topics,
    consumer_id: str,
    *,
    subscribers: Sequence[Subscriber] = (),
    metrics: RunnerMetrics | None = None,
    report_state: bool = True,
    shared_group: str | None = None,
    qos: int = 1,
    idle_exit_s: float | None = None,
    ready: asyncio.Event | None = None,
) -> dict[str, Any]:
    """Run until cancelled, or until nothing arrived for ``idle_exit_s`` after the first message.

    Returns the final figures (also logged as ``consumer.finished``).
    """
    metrics = metrics or RunnerMetrics()
    subs = list(subscribers)
    reporter = StateReporter(client, topics, consumer_id) if report_state else None
    if reporter is not None:
        subs.append(reporter.subscriber)
    # Its dead letters are named after it, like its reported states (consumers/<id>/...).
    runner = Runner(
        [metrics.instrument(s) for s in subs],
        topics=topics,
        queue_size=100_000,
        name=consumer_id,
    )
    metrics.watch(runner)
    source: MessageSource = SharedSource.over(client, shared_group) if shared_group else client
    task = asyncio.ensure_future(runner.run(source, qos=qos))
    try:
        await runner.subscribed.wait()
        if ready is not None:
            ready.set()
        if idle_exit_s is None:
            await task
        else:
            seen, changed = -1, time.monotonic()
            while not task.done():
                await asyncio.sleep(min(0.1, idle_exit_s / 4))
                if runner.stats.received != seen:
                    seen, changed = runner.stats.received, time.monotonic()
                elif seen > 0 and time.monotonic() - changed >= idle_exit_s:
                    break
            runner.stop()
            await task
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if reporter is not None:  # its last reports, the final states among them
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(REPORT_FLUSH_S):
                    await reporter.flush()
        summary = metrics.summary()
        summary["states_reported"] = reporter.reported if reporter is not None else 0
        _log.info("consumer.finished", consumer_id=consumer_id, **summary)
    return summary
