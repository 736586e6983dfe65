"""The lanes of the consumer runner: each match's bounded queue, its worker, and the calls
of its handlers, in seq order, with their timeouts, outcomes and observer.

:class:`_Dispatch` is the lowest layer of :class:`~consumers._runner.Runner` (the runner's
docstring says how the layers stack); it knows nothing of topics, payloads or the broker.
"""

from __future__ import annotations

import asyncio
import collections
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

import structlog

from consumers._sequencer import Delivery, RunnerStats, Sequencer
from consumers._subscriber import Registration, Subscriber, handler_name
from events import Event, MatchState

_log = structlog.get_logger("matchcast.consumer")

#: Event routes (event class x match) remembered before starting afresh.
_ROUTES_CACHED = 10_000

#: A sync handler that runs this long (seconds) blocked every match; the runner says so.
BLOCKING_WARN_S = 0.2


@dataclass(frozen=True, slots=True)
class HandlerCall:
    """One call of one handler, as an observer of the runner sees it.

    Attributes:
        handler: ``subscriber.function``, as in the logs.
        event: the event, or None for an ``on_state`` call.
        state: the state after the event, or the state adopted.
        outcome: ``ok``, ``error`` (it raised ``error``) or ``timeout``.
    """

    subscriber: str
    handler: str
    match_id: str
    event: Event | None
    state: MatchState
    outcome: Literal["ok", "error", "timeout"]
    error: BaseException | None = None


_Fn = Callable[..., Awaitable[None] | None]
#: One handler to call: its subscriber, function, name and timeout (None: the runner's).
_Call = tuple[Subscriber, _Fn, str, float | None]
#: What a lane queues: a delivery, the index of the next handler to call, and the awaitable
#: of the handler before it when that one is still running (handed over by the reader).
_Item = tuple[Event | None, MatchState, int, Awaitable[None] | None]


@dataclass(slots=True)
class _Lane:
    """One match: its sequencer, its bounded queue of deliveries and the worker draining it.

    A deque and a wake-up future rather than an ``asyncio.Queue``: this is the consumer's hot
    path, and the queue's getter bookkeeping cost more than the no-op handler it fed.
    """

    match_id: str
    limit: int
    seq: Sequencer
    items: collections.deque[_Item] = field(default_factory=collections.deque)
    worker: asyncio.Task[None] | None = None
    wake: asyncio.Future[None] | None = None  # the idle worker waits on it
    #: Set when nothing is pending; made when first waited for (an Event per match is memory
    #: a flood of match ids would pay for: see benchmarks/memory_flood.py).
    idle: asyncio.Event | None = None
    behind: bool = False
    finished: bool = False  # its full time is known and it waits for its grace to pass
    active: int = 0  # the runner's message count when this match last had one: idleness
    skipped: int = 0
    pending: int = 0  # queued or being handled
    resync_asked: bool = False  # the retained snapshot was asked for again after a gap
    wait: asyncio.TimerHandle | None = None  # ends the wait for a missing seq

    def put(self, item: _Item) -> bool:
        """Queue ``item``; False (and nothing queued) when the queue is full."""
        if len(self.items) >= self.limit:
            return False
        self.items.append(item)
        if not self.pending and self.idle is not None:
            self.idle.clear()
        self.pending += 1
        wake = self.wake
        if wake is not None:
            self.wake = None
            if not wake.done():
                wake.set_result(None)
        return True

    def done(self) -> None:
        self.pending -= 1
        if not self.pending and self.idle is not None:
            self.idle.set()

    async def wait_idle(self) -> None:
        """Return once nothing is pending."""
        if not self.pending:
            return
        if self.idle is None:
            self.idle = asyncio.Event()
        await self.idle.wait()


class _Dispatch:
    """Queues deliveries on lanes and calls the handlers: the attributes below are the
    :class:`~consumers._runner.Runner`'s, set by its constructor."""

    subscribers: list[Subscriber]
    stats: RunnerStats
    observer: Callable[[HandlerCall], None] | None
    queue_size: int
    handler_timeout: float
    _registrations: list[list[Registration]]
    _routes: dict[tuple[type[Event], str], tuple[_Call, ...]]
    _routes_version: int

    def _put(self, lane: _Lane, item: _Item) -> bool:
        """Queue ``item`` on ``lane``, starting its worker the first time it is needed (most
        lanes with sync handlers never need one)."""
        if lane.worker is None:
            lane.worker = asyncio.ensure_future(self._work(lane))
        return lane.put(item)

    def _enqueue(self, lane: _Lane, deliveries: list[Delivery]) -> None:
        for event, state in deliveries:
            if not lane.pending:
                # Nothing queued or running for this match: call its handlers now rather than
                # through the queue. A sync handler would block the loop from the worker just
                # the same; the first one that returns an awaitable hands over to the worker.
                calls = self._calls(event)
                args = (state,) if event is None else (event, state)
                left = self._call_sync(calls, 0, args, event, state)
                if left is not None:
                    self._put(lane, (event, state, *left))
                continue
            if not lane.behind:
                if self._put(lane, (event, state, 0, None)):
                    continue
                lane.behind = True
                _log.warning(
                    "consumer.fell_behind",
                    match_id=lane.match_id,
                    seq=state.last_seq,
                    queued=len(lane.items),
                )
            # Behind: the sequencer keeps the state; the worker hands it over on catching up.
            if event is not None:
                lane.skipped += 1
                self.stats.overflowed += 1

    async def _work(self, lane: _Lane) -> None:
        items = lane.items
        loop = asyncio.get_running_loop()
        while True:
            if not items:
                lane.wake = loop.create_future()
                await lane.wake
                continue
            event, state, index, running = items.popleft()
            try:
                calls = self._calls(event)
                args = (state,) if event is None else (event, state)
                while True:
                    if running is not None:
                        sub, _, name, timeout = calls[index - 1]
                        await self._finish(running, sub, name, timeout, event, state)
                    left = self._call_sync(calls, index, args, event, state)
                    if left is None:
                        break
                    index, running = left
            except Exception:  # pragma: no cover - _start/_finish catch what handlers raise
                _log.exception("consumer.dispatch_failed", match_id=lane.match_id)
            finally:
                if lane.behind and len(items) <= self.queue_size // 2:
                    self._catch_up(lane)
                lane.done()

    def _calls(self, event: Event | None) -> tuple[_Call, ...]:
        """The handlers ``event`` goes to (the state handlers for None), in order."""
        if event is None:
            return tuple(
                (sub, fn, handler_name(fn), None)
                for sub in self.subscribers
                for fn in sub.state_handlers
            )
        version = sum(map(len, self._registrations))
        if version != self._routes_version:
            self._routes.clear()
            self._routes_version = version
        key = (type(event), event.match_id)
        calls = self._routes.get(key)
        if calls is None:
            if len(self._routes) >= _ROUTES_CACHED:
                self._routes.clear()
            calls = self._routes[key] = tuple(
                (sub, r.handler, r.name, r.timeout)
                for sub in self.subscribers
                for r in sub.handlers_for(event)
            )
        return calls

    def _call_sync(
        self,
        calls: tuple[_Call, ...],
        index: int,
        args: tuple[object, ...],
        event: Event | None,
        state: MatchState,
    ) -> tuple[int, Awaitable[None]] | None:
        """Call ``calls[index:]`` in order until one returns an awaitable; then the index of
        the next call and that awaitable, for the worker to await. None when all are done."""
        while index < len(calls):
            sub, fn, name, _ = calls[index]
            index += 1
            running = self._start(sub, fn, name, args, event, state)
            if running is not None:
                return index, running
        return None

    def _catch_up(self, lane: _Lane) -> None:
        state = lane.seq.state
        assert state is not None
        lane.behind = False
        self.stats.catch_ups += 1
        _log.info(
            "consumer.caught_up", match_id=lane.match_id, seq=state.last_seq, skipped=lane.skipped
        )
        lane.skipped = 0
        lane.put((None, state, 0, None))

    def _start(
        self,
        sub: Subscriber,
        fn: _Fn,
        name: str,
        args: tuple[object, ...],
        event: Event | None,
        state: MatchState,
    ) -> Awaitable[None] | None:
        """Call one handler; the awaitable it returned (for :meth:`_finish`), or None when it
        is done (a sync handler: its outcome is recorded here)."""
        t0 = time.monotonic()
        try:
            result = fn(*args)
        except Exception as err:
            self._record(sub, name, event, state, "error", err)
            return None
        finally:
            if (blocked := time.monotonic() - t0) > BLOCKING_WARN_S:
                _log.warning(
                    "handler.blocked_loop",
                    handler=f"{sub.name}.{name}",
                    match_id=state.match_id,
                    seq=event.seq if event else state.last_seq,
                    blocked_s=round(blocked, 3),
                    hint="a sync handler stalls every match; make it async (asyncio.to_thread)",
                )
        if result is None and self.observer is None:  # the usual case, kept short
            self.stats.handled += 1
            return None
        if result is None or not inspect.isawaitable(result):
            self._record(sub, name, event, state, "ok", None)
            return None
        return result

    async def _finish(
        self,
        result: Awaitable[None],
        sub: Subscriber,
        name: str,
        limit_s: float | None,
        event: Event | None,
        state: MatchState,
    ) -> None:
        """Await what an async handler returned, within its timeout, and record the outcome."""
        timeout = limit_s or self.handler_timeout
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                await result
        except Exception as err:
            if isinstance(err, TimeoutError) and deadline.expired():
                self.stats.handler_timeouts += 1
                _log.error(
                    "handler.timed_out",
                    handler=f"{sub.name}.{name}",
                    match_id=state.match_id,
                    seq=event.seq if event else state.last_seq,
                    timeout_s=timeout,
                )
                self._record(sub, name, event, state, "timeout", err)
            else:
                self._record(sub, name, event, state, "error", err)
        else:
            self._record(sub, name, event, state, "ok", None)

    def _record(
        self,
        sub: Subscriber,
        name: str,
        event: Event | None,
        state: MatchState,
        outcome: Literal["ok", "error", "timeout"],
        error: BaseException | None,
    ) -> None:
        if outcome == "ok":
            self.stats.handled += 1
        elif outcome == "error":
            self.stats.handler_errors += 1
            _log.error(
                "handler.failed",
                handler=f"{sub.name}.{name}",
                match_id=state.match_id,
                seq=event.seq if event else state.last_seq,
                event_type=event.type if event else "state",
                payload=event.model_dump(mode="json", exclude_none=True) if event else None,
                exc_info=error,
            )
        if self.observer is not None:
            call = HandlerCall(
                sub.name, f"{sub.name}.{name}", state.match_id, event, state, outcome, error
            )
            try:
                self.observer(call)
            except Exception:
                _log.exception("consumer.observer_failed", handler=f"{sub.name}.{name}")
