"""In-memory stand-ins for the broker side, for tests that need no broker."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from events import MessageProps


@dataclass
class FakeClock:
    """A monotonic clock that jumps to each deadline instead of sleeping."""

    t: float = 1000.0
    deadlines: list[float] = field(default_factory=list)

    def now(self) -> float:
        return self.t

    async def sleep_until(self, deadline: float) -> None:
        self.deadlines.append(deadline)
        self.t = max(self.t, deadline)


@dataclass
class Published:
    at: float
    topic: str
    payload: bytes
    qos: int
    retain: bool
    props: MessageProps | None


@dataclass
class RecordingPublisher:
    """Keeps every publish, stamped with the (fake) clock's time."""

    clock: FakeClock | None = None
    sent: list[Published] = field(default_factory=list)

    async def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        props: MessageProps | None = None,
    ) -> None:
        at = self.clock.now() if self.clock else 0.0
        self.sent.append(Published(at, topic, payload, qos, retain, props))


class ManualClock:
    """A monotonic clock that moves only when the test moves it.

    ``sleep_until`` waits until :meth:`advance` passes the deadline; :meth:`sleeper` waits
    until something sleeps on the clock and returns its deadline, so a test steps a replay
    one deadline at a time without any wall-clock wait.
    """

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t
        self._sleepers: list[tuple[float, asyncio.Future[None], int]] = []
        self._changed = asyncio.Event()
        self._generation = 0

    def now(self) -> float:
        return self.t

    async def sleep_until(self, deadline: float) -> None:
        if deadline <= self.t:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (deadline, future, self._generation)
        self._sleepers.append(entry)
        self._changed.set()
        try:
            await future
        finally:
            if entry in self._sleepers:
                self._sleepers.remove(entry)

    def advance(self, to: float) -> None:
        """Move the clock to ``to``, waking every sleeper whose deadline has come."""
        self.t = max(self.t, to)
        for deadline, future, _gen in list(self._sleepers):
            if deadline <= self.t and not future.done():
                future.set_result(None)

    def mark(self) -> None:
        """Forget who sleeps now for :meth:`sleeper` (after a change that wakes them)."""
        self._generation += 1

    async def sleeper(self) -> float:
        """The earliest deadline slept on since the last :meth:`mark`, once something sleeps."""
        while True:
            live = [d for d, f, g in self._sleepers if not f.done() and g == self._generation]
            if live:
                return min(live)
            self._changed.clear()
            await self._changed.wait()
