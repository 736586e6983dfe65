"""Where the fast client's received messages go, across its connections: a queue that
:meth:`matchcast.transport.fastmqtt.FastClient.messages` reads, or a batch handler that takes
each read's messages in one call (:class:`events.BatchSource`)."""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable

import structlog

from events import Message

__all__ = ["BatchHandler", "Inbox"]

_log = structlog.get_logger("matchcast.fastmqtt")

#: Takes every message that arrived in one read from the socket.
BatchHandler = Callable[[list[Message]], None]


class Inbox:
    """The queue of received messages, or the batch handler that takes them instead."""

    def __init__(self) -> None:
        self.queue: collections.deque[Message] = collections.deque()
        #: Set: each read's messages go to it, not to :attr:`queue`.
        self.handler: BatchHandler | None = None
        self._waiter: asyncio.Future[None] | None = None

    def wake(self) -> None:
        """Wake the reader waiting in :meth:`wait` (messages came, or the connection ended)."""
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        """Until :meth:`wake`."""
        self._waiter = asyncio.get_running_loop().create_future()
        await self._waiter

    def set_handler(self, handler: BatchHandler | None, where: str) -> None:
        """Hand messages to ``handler`` from now on (those queued first); None: to the queue."""
        self.handler = handler
        if handler is not None and self.queue:
            queued = list(self.queue)
            self.queue.clear()
            self.hand_over(handler, queued, where)

    def hand_over(self, handler: BatchHandler, batch: list[Message], where: str) -> None:
        """Give ``batch`` to ``handler``; an exception from it is logged, never raised."""
        try:
            handler(batch)
        except Exception as err:  # a handler bug must not drop the connection
            _log.error(
                "broker.batch_handler_failed",
                broker=where,
                messages=len(batch),
                error=str(err),
                exc_info=err,
            )
