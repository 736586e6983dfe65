"""What a consumer puts on its dead-letter topic for each message it rejected, where, and
what became of it.

The topic is ``{root}/deadletter/{consumer}``, and it names the consumer:

- the runner's ``name`` when one is given (``Runner(name="scoreboard")``);
- else the broker user name the consumer logs in with, which is what a broker's ACL can
  grant per consumer (mosquitto: ``pattern write matchcast/deadletter/%u``, as in
  deploy/mosquitto/acl), so each consumer may write its own dead-letter topic and no other;
- else, anonymous, its subscribers' names (``terminal``, ``web``, ``scoreboard,ticker``).

A name is one topic level of a topic published to, so ``+``, ``#``, ``/`` and anything but
letters, digits and ``_.@-`` become ``-``.

A dead letter the broker refuses (MQTT 5: a PUBACK reason of 0x80 or more, 0x87 from an ACL)
is counted as refused (``dead_letters_refused``) with a ``deadletter.refused`` warning, never
as dead-lettered. Over MQTT 3.1.1 a broker acknowledges a publish it refuses and drops it
without a word: there a refused dead letter cannot be told from a delivered one.
"""

from __future__ import annotations

import base64
import datetime as dt
import re
from collections.abc import Iterable
from typing import Literal

import structlog
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from events import (
    MAX_PAYLOAD_BYTES,
    MESSAGE_LIMIT,
    MatchcastError,
    Message,
    Publisher,
    PublishRefusedError,
    Topics,
    clip,
    topic_spec,
)

__all__ = ["DeadLetter", "Outcome", "consumer_name", "send_dead_letter"]

_log = structlog.get_logger("consumers.deadletter")

#: What became of a dead letter: the broker has it, refused it, or could not be reached.
Outcome = Literal["published", "refused", "failed"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.@-]+")


def consumer_name(subscribers: Iterable[str], username: str | None = None) -> str:
    """The default name of a consumer, one topic level: the broker ``username`` if it has
    one, else its subscribers' names joined with ``,`` (``scoreboard,ticker``)."""
    if username:
        return _UNSAFE.sub("-", username)
    names = [_UNSAFE.sub("-", n).strip("-") for n in subscribers]
    return ",".join(n for n in names if n) or "consumer"


async def send_dead_letter(publisher: Publisher, topic: str, body: bytes) -> Outcome:
    """Publish one dead letter at QoS 1 and say what became of it (logged; never raises)."""
    try:
        await publisher.publish(topic, body, qos=topic_spec("deadletter").qos)
    except PublishRefusedError as err:
        _log.warning(
            "deadletter.refused",
            topic=topic,
            code=err.code,
            reason=err.name,
            hint="the broker does not let this consumer write its dead-letter topic; grant it "
            f"(mosquitto: pattern write {Topics().deadletter('%u')}, see "
            "deploy/mosquitto/acl) or name the consumer after its broker user",
        )
        return "refused"
    except MatchcastError as err:
        _log.warning("deadletter.not_published", topic=topic, reason=str(err))
        return "failed"
    return "published"


class DeadLetter(BaseModel):
    """A rejected message, the reason, and who rejected it, on ``{root}/deadletter/{consumer}``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    consumer: str = Field(description="The runner's name (`Runner(name=...)`)")
    topic: str = Field(
        description="The topic the message arrived on (past 200 characters cut: `…[+N chars]`)"
    )
    reason: str = Field(
        description="Why it was rejected, as in the `message.rejected` log line (every piece "
        "of input it quotes cut at 200 characters)"
    )
    payload_base64: str = Field(
        description="The payload as received (cut at the 256 KiB limit), base64-encoded"
    )
    received_at: AwareDatetime = Field(description="When the consumer received it (UTC)")

    @classmethod
    def of(cls, consumer: str, message: Message, reason: str) -> DeadLetter:
        """The dead letter of ``message``, received now."""
        return cls(
            consumer=consumer,
            topic=clip(message.topic),
            reason=clip(reason, MESSAGE_LIMIT),
            payload_base64=base64.b64encode(message.payload[:MAX_PAYLOAD_BYTES]).decode(),
            received_at=dt.datetime.now(dt.UTC),
        )
