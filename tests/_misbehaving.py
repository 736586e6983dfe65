"""A network that loses, repeats and reorders, as a wrapper round a publisher: the load
tester's accounting must count each of them exactly."""

from __future__ import annotations

from events import MessageProps, Publisher
from matchcast.load import parse_probe_fields

__all__ = ["Misbehaving"]


class Misbehaving:
    """Wraps a publisher: drops, repeats and swaps events by seq, in every match alike."""

    def __init__(
        self, inner: Publisher, *, skip: set[int], repeat: set[int], swap: set[int]
    ) -> None:
        self.inner = inner
        self.skip, self.repeat, self.swap = skip, repeat, swap
        self.held: dict[str, tuple[str, bytes, int]] = {}

    async def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        props: MessageProps | None = None,
    ) -> None:
        if not topic.endswith("/events"):
            await self.inner.publish(topic, payload, qos=qos, retain=retain)
            return
        seq, _ = parse_probe_fields(payload)
        if seq in self.skip:
            return
        if seq in self.swap:  # hold it back and send it after the next one
            self.held[topic] = (topic, payload, qos)
            return
        await self.inner.publish(topic, payload, qos=qos)
        if seq in self.repeat:
            await self.inner.publish(topic, payload, qos=qos)
        held = self.held.pop(topic, None)
        if held is not None:
            await self.inner.publish(held[0], held[1], qos=held[2])
