"""Bounded memory in the consumer runner: the lane made for a match new to it, a finished
match forgotten once its grace has passed, and the longest-idle matches evicted at
``max_matches`` (see the module docstring of consumers/_runner.py). A layer of
:class:`~consumers._runner.Runner`, on consumers/_gaps.py.
"""

from __future__ import annotations

import collections
import heapq
from collections.abc import Callable
from typing import Literal

import structlog

from consumers._gaps import _Gaps
from consumers._lanes import _Lane
from consumers._sequencer import Sequencer

_log = structlog.get_logger("matchcast.consumer")

#: Matches tracked at once by default: well above the 10,000 live matches a load test runs.
MAX_MATCHES = 50_000
#: Seconds a finished match stays in memory after its full time, by default.
FINISHED_GRACE_S = 300.0
#: At the bound, 1/this of it is evicted at once (the longest idle), to amortise the scan.
_EVICT_SHARE = 20
#: Messages between two sweeps of the finished matches past their grace.
_SWEEP_EVERY = 4096


class _Memory(_Gaps):
    """Makes, forgets and evicts the lanes of matches, within ``max_matches``."""

    max_matches: int
    finished_grace_s: float
    reorder_window: int
    _clock: Callable[[], float]
    _finished: collections.deque[tuple[float, str]]
    _ended_runs: collections.OrderedDict[str, int]

    def _lane(self, match_id: str) -> _Lane:
        """The lane of ``match_id``, made if new."""
        lanes = self._lanes
        lane = lanes.get(match_id)
        if lane is not None:
            return lane
        if self._finished and self._finished[0][0] <= self._clock():
            self._sweep()
        if len(lanes) >= self.max_matches:
            self._make_room()
        sequencer = Sequencer(match_id, self.stats, window=self.reorder_window)
        lane = _Lane(match_id, self.queue_size, sequencer, active=self.stats.received)
        sequencer.on_end = lambda: self._finish_lane(lane)
        sequencer.on_wait = lambda waiting: self._wait(lane, waiting)
        lanes[match_id] = lane
        if (ended := self._ended_runs.pop(match_id, None)) is not None:
            sequencer.run, sequencer.ended = ended, True  # what it was told: still over
            self._finish_lane(lane)
        return lane

    def _finish_lane(self, lane: _Lane) -> None:
        """A run of ``lane`` ended: forget the match once its grace has passed."""
        if not lane.finished:
            lane.finished = True
            self._finished.append((self._clock() + self.finished_grace_s, lane.match_id))

    def _sweep(self) -> None:
        """Forget the finished matches whose grace has passed (and are not busy)."""
        now = self._clock()
        finished = self._finished
        busy: list[tuple[float, str]] = []
        while finished and finished[0][0] <= now:
            item = finished.popleft()
            lane = self._lanes.get(item[1])
            if lane is None:
                continue  # evicted already
            if not lane.seq.ended:  # a new run started since
                lane.finished = False
                continue
            if lane.pending:
                busy.append(item)
                continue
            self._evict(lane, "finished")
        finished.extendleft(reversed(busy))

    def _make_room(self) -> None:
        """At ``max_matches``: evict the longest-idle matches (idle ones before busy ones), a
        twentieth of the bound at a time, so one scan is paid for many new matches."""
        self._sweep()
        lanes = self._lanes
        if len(lanes) < self.max_matches:
            return
        count = len(lanes) - self.max_matches + max(1, self.max_matches // _EVICT_SHARE)
        for lane in heapq.nsmallest(
            count, lanes.values(), key=lambda lane: (lane.pending > 0, lane.active)
        ):
            self._evict(lane, "bound")

    def _evict(self, lane: _Lane, reason: Literal["finished", "bound"]) -> None:
        del self._lanes[lane.match_id]
        seq = lane.seq
        if seq.ended and seq.run:  # remember that the run is over, in a few bytes (schema
            # 1.0's run 0 cannot be told from the next replay's, so nothing is kept of it)
            self._ended_runs[lane.match_id] = seq.run
            self._ended_runs.move_to_end(lane.match_id)
            while len(self._ended_runs) > self.max_matches:
                self._ended_runs.popitem(last=False)
        if lane.worker is not None and not lane.worker.done():
            lane.worker.cancel()
        if lane.wait is not None:
            lane.wait.cancel()
        self.stats.evicted += 1
        log = _log.info if reason == "finished" else _log.warning
        log(
            "match.evicted",
            match_id=lane.match_id,
            reason=reason,
            run=seq.run,
            last_seq=seq.state.last_seq if seq.state is not None else 0,
            dropped=lane.pending,
            tracked=len(self._lanes),
        )
