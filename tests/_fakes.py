"""In-memory stand-ins for the broker side, for tests that need no broker."""

from __future__ import annotations

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
