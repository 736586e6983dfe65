"""A test kit for subscriber authors: run subscribers on a match, with no broker.

In the spirit of FastStream's ``TestBroker``: the messages go through the same runner as in
production (decoding, ordering, de-duplication, gap handling, per-handler isolation), only fed
from memory instead of a connection. From a plain (synchronous) test::

    from matchcast.testing import play

    def test_alerts_on_each_goal() -> None:
        h = play(sub, "semifinal")
        assert len(h.seen(Goal)) == 3

and from an async one (pytest-asyncio), with more control::

    from matchcast.testing import Harness
    from events import Goal

    from goal_alerts import sub

    async def test_alerts_on_each_goal() -> None:
        async with Harness(sub) as h:
            await h.play("semifinal")
        assert [e.scorer for e in h.seen(Goal)] == ["Anthony Gordon", ...]
        assert h.errors == []

See docs/subscribers.md for the whole kit. For tests against a real broker,
:class:`Mosquitto` runs one of your own and :class:`FaultProxy` breaks the network on demand
(both from :mod:`matchcast.testbroker`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Container, Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import structlog

from consumers import HandlerCall, Runner, RunnerStats, Subscriber, as_subscriber
from events import (
    BaseEvent,
    Event,
    MatchClock,
    MatchState,
    Message,
    Topics,
    apply,
    encode_event,
    encode_state,
    parse_minute,
)
from matchcast.testbroker import REQUIRE_ENV, FaultProxy, Mosquitto, mosquitto_binary, wait_port
from simulator import Recording, expand, resolve_sources

__all__ = [
    "REQUIRE_ENV",
    "FaultProxy",
    "Harness",
    "Mosquitto",
    "match_events",
    "mosquitto_binary",
    "play",
    "wait_port",
]


def match_events(match: str | Path = "semifinal") -> list[Event]:
    """Every event of a match as the replayer would publish it.

    Args:
        match: a bundled match name, a match file, or a recording (``.jsonl``).
    """
    events: list[Event] = []
    for source in resolve_sources(str(match)):
        if isinstance(source, Recording):
            events += source.events
        else:
            events += [item.event for item in expand(source)]
    return events


def _clock(start: str | int | MatchClock) -> MatchClock:
    if isinstance(start, MatchClock):
        return start
    return parse_minute(str(start))


class Harness:
    """Runs subscribers on events fed from memory and records what their handlers did.

    Use as ``async with Harness(sub) as h:``; leaving the block lets the handlers finish and
    runs the stop hooks, like a consumer shutting down.

    Args:
        subscribers: :class:`~consumers.Subscriber` objects (or objects with ``.subscriber``).
        topics: the topic tree the messages are put on.
        match_filter, queue_size, handler_timeout, drain_timeout: as for
            :class:`~consumers.Runner`.
        capture_logs: capture the runner's structlog entries into :attr:`logs` (they are not
            printed then).

    Attributes:
        calls: every handler call, in the order they finished.
        logs: the captured log entries (dicts with an ``event`` key, e.g. ``handler.failed``).
    """

    __test__ = False  # not a test class, whatever pytest thinks of its name

    def __init__(
        self,
        *subscribers: Subscriber | object,
        topics: Topics | None = None,
        match_filter: str = "+",
        queue_size: int = 1000,
        handler_timeout: float = 10.0,
        drain_timeout: float = 30.0,
        capture_logs: bool = True,
    ) -> None:
        subs = [as_subscriber(s, getattr(s, "name", repr(s))) for s in subscribers]
        self.topics = topics or Topics()
        self.calls: list[HandlerCall] = []
        self.logs: list[dict[str, Any]] = []
        self.runner = Runner(
            subs,
            topics=self.topics,
            match_filter=match_filter,
            queue_size=queue_size,
            handler_timeout=handler_timeout,
            drain_timeout=drain_timeout,
            observer=self.calls.append,
        )
        self._capture = capture_logs
        self._capturing: Any = None
        self._published: dict[str, MatchState] = {}  # per match, as the publisher has it

    async def __aenter__(self) -> Self:
        if self._capture:
            self._capturing = structlog.testing.capture_logs()
            self.logs = self._capturing.__enter__()
        try:
            await self.runner.start()
        except BaseException:
            self._stop_capture()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await self.runner.close()
        finally:
            self._stop_capture()

    def _stop_capture(self) -> None:
        if self._capturing is not None:
            self._capturing.__exit__(None, None, None)
            self._capturing = None

    # ------------------------------------------------------------ feeding

    def message(self, item: Event | MatchState | Message, *, retain: bool = True) -> Message:
        """The message a subscriber receives for an event or a state snapshot.

        Args:
            retain: for a snapshot, whether it arrives as the broker's retained message (as
                on joining) or as published live, right after its event.
        """
        if isinstance(item, Message):
            return item
        if isinstance(item, MatchState):
            topic = self.topics.state(item.match_id)
            return Message(topic, encode_state(item), qos=1, retain=retain)
        return Message(self.topics.events(item.match_id), encode_event(item), qos=1)

    async def send(
        self, *items: Event | MatchState | Message, wait: bool = True, retain: bool = True
    ) -> None:
        """Feed events, state snapshots or raw messages, in order, as if they had arrived.

        Args:
            wait: return once every handler has finished with them (else at once).
            retain: snapshots arrive as retained messages (as on joining), else as live ones.
        """
        for item in items:
            await self.runner.feed(self.message(item, retain=retain))
        if wait:
            await self.idle()

    async def play(
        self,
        match: str | Path | Iterable[Event] = "semifinal",
        *,
        start: str | int | MatchClock | None = None,
        lose: Container[int] = (),
        snapshots: bool = True,
        wait: bool = True,
    ) -> None:
        """Feed a match the way the replayer publishes it: each event, then the state after it.

        The states are the publisher's: they continue from what this harness played of the
        match before, and an event whose seq is not past them starts the match again, as a
        replayer started again would.

        Args:
            match: a bundled match name, a match file, a recording, or the events themselves.
            start: join at this minute (``60``, ``"90+2"``): the retained state at that point
                comes first, as a subscriber joining mid-match gets it.
            lose: seqs whose event and state never arrive (the publisher's state still has
                them), to make a gap.
            snapshots: follow each event with the state after it, as the replayer does.
            wait: return once every handler has finished (else at once).

        Raises:
            ValueError: ``start`` is no minute of play (1 to 120, added minutes after 45, 90,
                105 and 120), as :func:`events.parse_minute` reads it.
        """
        events = match_events(match) if isinstance(match, str | Path) else list(match)
        joined: set[str] = set()
        key = _clock(start).sort_key if start is not None else None
        for event in events:
            state = self._published.get(event.match_id)
            if state is None or event.run != state.run or event.seq <= state.last_seq:
                state = MatchState.new(event.match_id, run=event.run)
            if key is not None and event.clock.sort_key < key:
                self._published[event.match_id] = apply(state, event)
                continue
            if key is not None and event.match_id not in joined:
                joined.add(event.match_id)
                await self.send(state, wait=False)
            self._published[event.match_id] = state = apply(state, event)
            if event.seq in lose:
                continue
            await self.send(event, wait=False)
            if snapshots:
                await self.send(state, wait=False, retain=False)
        if wait:
            await self.idle()

    async def idle(self) -> None:
        """Wait until every handler has finished with what was fed so far."""
        await self.runner.join()

    # ------------------------------------------------------------ what happened

    @property
    def stats(self) -> RunnerStats:
        """The runner's counters: duplicates, gaps, handler errors, ..."""
        return self.runner.stats

    @property
    def states(self) -> dict[str, MatchState]:
        """The runner's state of every match seen."""
        return self.runner.states

    def state(self, match_id: str | None = None) -> MatchState:
        """The state of ``match_id``, or of the one match seen."""
        if match_id is None:
            if len(self.states) != 1:
                raise LookupError(f"say which match: {sorted(self.states)}")
            return next(iter(self.states.values()))
        return self.states[match_id]

    @property
    def errors(self) -> list[HandlerCall]:
        """The calls that raised; ``call.error`` is the exception, with its traceback."""
        return [c for c in self.calls if c.outcome == "error"]

    @property
    def timeouts(self) -> list[HandlerCall]:
        """The calls abandoned at their timeout."""
        return [c for c in self.calls if c.outcome == "timeout"]

    def calls_to(self, handler: str) -> list[HandlerCall]:
        """The calls of one handler, named ``function``, ``Class.method`` or ``sub.function``."""
        return [
            c
            for c in self.calls
            if c.handler == handler or c.handler.endswith(("." + handler, ":" + handler))
        ]

    def seen(self, *types: type[BaseEvent]) -> list[Event]:
        """The events handed to at least one handler, once each, in order (of these types)."""
        out: list[Event] = []
        done: set[tuple[str, int]] = set()
        for c in self.calls:
            e = c.event
            if e is None or (e.match_id, e.seq) in done:
                continue
            if not types or isinstance(e, types):
                done.add((e.match_id, e.seq))
                out.append(e)
        return out

    def logged(self, name: str) -> list[dict[str, Any]]:
        """The captured log entries named ``name``, e.g. ``handler.failed``."""
        return [entry for entry in self.logs if entry.get("event") == name]

    def __repr__(self) -> str:
        names: Sequence[str] = [s.name for s in self.runner.subscribers]
        return f"Harness({', '.join(names)}, calls={len(self.calls)})"


def play(
    *subscribers: Subscriber | object,
    match: str | Path | Iterable[Event] = "semifinal",
    start: str | int | MatchClock | None = None,
    **options: Any,
) -> Harness:
    """Play a match through subscribers from synchronous code; returns the finished harness.

    The same as ``async with Harness(*subscribers, **options) as h: await h.play(match,
    start=start)``, run with :func:`asyncio.run`, so a plain pytest test can use it. Not from
    inside a running event loop: use :class:`Harness` there.
    """

    async def go() -> Harness:
        async with Harness(*subscribers, **options) as h:
            await h.play(match, start=start)
        return h

    return asyncio.run(go())
