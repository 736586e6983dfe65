"""What a message is and what publishing one takes, without any MQTT client.

``simulator`` and ``consumers`` talk to these protocols; the one module that imports the MQTT
client (``matchcast.transport.mqtt``) implements them, and tests use in-memory fakes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import NamedTuple, Protocol, runtime_checkable

__all__ = [
    "BatchSource",
    "Message",
    "MessageProps",
    "MessageSource",
    "Publisher",
    "Reconnectable",
]


@dataclass(frozen=True, slots=True)
class MessageProps:
    """MQTT 5 properties of a message; dropped where the broker speaks 3.1.1."""

    content_type: str | None = None
    message_expiry: int | None = None
    user: tuple[tuple[str, str], ...] = ()


class Message(NamedTuple):
    """A message as received.

    A named tuple rather than a frozen dataclass: one is made for every message received, and
    a frozen dataclass's ``__init__`` took about 1 us of the consumer's budget per event.
    """

    topic: str
    payload: bytes
    qos: int = 0
    retain: bool = False


@runtime_checkable
class Publisher(Protocol):
    """Anything that can publish a message and wait until the broker has it (per QoS)."""

    async def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        props: MessageProps | None = None,
    ) -> None:
        """Publish; returns when QoS 0 is written, QoS 1 acknowledged, QoS 2 completed."""
        ...


class MessageSource(Protocol):
    """Anything that can subscribe to topic filters and yield the messages that arrive."""

    async def subscribe(self, topic_filter: str, *, qos: int = 1) -> None:
        """Subscribe; returns once the broker confirmed."""
        ...

    def messages(self) -> AsyncIterator[Message]:
        """Messages in arrival order; ends when the connection is closed."""
        ...


@runtime_checkable
class Reconnectable(Protocol):
    """A connection that can tell it was lost and replace itself."""

    async def wait_lost(self) -> None:
        """Raise :class:`events.BrokerError` when the connection is lost; never return."""
        ...

    async def reconnect(self) -> None:
        """Connect again, with backoff; raise :class:`events.BrokerError` on giving up."""
        ...


@runtime_checkable
class BatchSource(Protocol):
    """A source that can hand messages over in batches, one call per read from the socket.

    A consumer that takes them this way skips a queue and a task switch per message, about
    a tenth of what a lean consumer spends (``matchcast.transport.fastmqtt.FastClient``
    implements it; the consumer runner and the load probes use it where they can).
    """

    def set_batch_handler(self, handler: Callable[[list[Message]], None] | None) -> None:
        """Deliver messages to ``handler`` instead of ``messages()``; None goes back."""
        ...

    async def wait_closed(self) -> None:
        """Wait until the connection ends; raise :class:`events.BrokerError` if it was lost."""
        ...
