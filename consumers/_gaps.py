"""Gap repair in the consumer runner: how long a match waits for a missing seq (the reorder
timer, :meth:`_Gaps.release`), and the retained snapshot asked for again after a gap.

Also the runner's errands, which the reader starts and never waits for (a resync request here,
a dead letter or a discovered match's subscription in consumers/_intake.py). A layer of
:class:`~consumers._runner.Runner`, on consumers/_lanes.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import structlog

from consumers._lanes import _Dispatch, _Lane
from events import MatchcastError, MessageSource, Topics

_log = structlog.get_logger("matchcast.consumer")

#: Seconds an event that came past a missing seq waits for it, by default.
REORDER_WAIT_S = 0.5


class _Gaps(_Dispatch):
    """Waits for missing seqs and asks for the snapshot after a gap; runs errands."""

    topics: Topics
    reorder_wait: float
    _lanes: dict[str, _Lane]
    _source: MessageSource | None
    _errands: set[asyncio.Task[None]]

    def _ask_for_snapshot(self, lane: _Lane) -> None:
        """After a gap, ask the broker for the retained snapshot again (by subscribing anew).

        The next live snapshot usually repairs the state anyway; asking matters when the
        broker dropped the snapshots too (a full queue), or the gap came at the end.
        """
        if lane.seq.resync_from is None:
            lane.resync_asked = False
            return
        if lane.resync_asked or self._source is None:
            return
        lane.resync_asked = True
        # The exact topic: RabbitMQ 3.10 gives a wildcard no retained messages (_latejoin).
        source, topic = self._source, self.topics.state(lane.match_id)

        async def ask() -> None:
            try:
                await source.subscribe(topic, qos=1)
            except MatchcastError as err:
                _log.warning("state.resync_not_asked", match_id=lane.match_id, reason=str(err))
            else:
                _log.info("state.resync_asked", match_id=lane.match_id, topic=topic)

        self._start_errand(ask())

    def _start_errand(self, errand: Coroutine[Any, Any, None]) -> None:
        """Run ``errand`` beside the reader, which must not wait on the broker for it; the
        runner waits for what is left of it (2 s at most) when it stops."""
        task = asyncio.ensure_future(errand)
        self._errands.add(task)
        task.add_done_callback(self._errands.discard)

    def _wait(self, lane: _Lane, waiting: bool) -> None:
        """Start (or stop) the timer that ends ``lane``'s wait for a missing seq."""
        if lane.wait is not None:
            lane.wait.cancel()
            lane.wait = None
        if waiting:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # fed outside a loop: the count bound and drain still end it
                return
            lane.wait = loop.call_later(self.reorder_wait, self.release, lane.match_id)

    def release(self, match_id: str) -> None:
        """Stop waiting for the missing seqs of ``match_id``: what is held is handled past a
        gap (what the reorder timer calls; a test may call it instead of waiting)."""
        lane = self._lanes.get(match_id)
        if lane is None:
            return
        try:  # the wait ended: on_wait(False) stops the timer (a no-op once it fired)
            self._enqueue(lane, lane.seq.release())
            if lane.seq.resync_from is not None:
                self._ask_for_snapshot(lane)
        except Exception:  # a bug: it must not end the loop's callback silently
            _log.exception("consumer.release_failed", match_id=match_id)
