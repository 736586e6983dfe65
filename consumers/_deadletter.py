"""What a consumer puts on its dead-letter topic for each message it rejected."""

from __future__ import annotations

import base64
import datetime as dt

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from events import MAX_PAYLOAD_BYTES, Message

__all__ = ["DeadLetter"]


class DeadLetter(BaseModel):
    """A rejected message, the reason, and who rejected it, on ``{root}/deadletter/{consumer}``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    consumer: str = Field(description="The runner's name (`Runner(name=...)`)")
    topic: str = Field(description="The topic the message arrived on")
    reason: str = Field(description="Why it was rejected, as in the `message.rejected` log line")
    payload_base64: str = Field(
        description="The payload as received (cut at the 256 KiB limit), base64-encoded"
    )
    received_at: AwareDatetime = Field(description="When the consumer received it (UTC)")

    @classmethod
    def of(cls, consumer: str, message: Message, reason: str) -> DeadLetter:
        """The dead letter of ``message``, received now."""
        return cls(
            consumer=consumer,
            topic=message.topic,
            reason=reason,
            payload_base64=base64.b64encode(message.payload[:MAX_PAYLOAD_BYTES]).decode(),
            received_at=dt.datetime.now(dt.UTC),
        )
