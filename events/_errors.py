"""The errors matchcast raises on purpose.

Every error a user can meet derives from :class:`MatchcastError` and carries its context as
attributes, with a message a person can act on::

    MatchcastError
     ├── DecodeError              bytes on a topic that are not a valid event or state
     │    ├── UnsupportedVersionError  a payload from a schema version this build cannot read
     │    └── UnknownEventTypeError    a newer minor's event of a type this build does not know
     ├── ControlCommandError      a control command (or reply) that cannot be read
     ├── MatchFileError           a match file that cannot be read or fails validation
     └── BrokerError              the broker cannot be reached or refused us
          ├── ConnectionLostError a working connection went away (reconnecting may help)
          └── PublishRefusedError the broker refused one publish (MQTT 5 reason >= 0x80)

Library exceptions (pydantic's ``ValidationError``, aiomqtt's ``MqttError``) are wrapped at the
edge with ``raise ... from err`` and never leak through the public API.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from events._quote import MESSAGE_LIMIT, clip, clip_bytes, quote

__all__ = [
    "BrokerError",
    "ConnectionLostError",
    "ControlCommandError",
    "DecodeError",
    "MatchFileError",
    "MatchcastError",
    "PublishRefusedError",
    "UnknownEventTypeError",
    "UnsupportedVersionError",
]


class MatchcastError(Exception):
    """Base class of every error matchcast raises on purpose."""


class DecodeError(MatchcastError):
    """A payload that is not a valid matchcast message.

    Attributes:
        topic: the topic the payload arrived on (empty when decoded off the wire).
        reason: what is wrong, in words; every piece of input it quotes is cut
            (:mod:`events._quote`), and so is the whole, to :data:`events.MESSAGE_LIMIT`.
        excerpt: the first bytes of the payload as text, cut (:func:`events.clip_bytes`),
            for the log line.
    """

    def __init__(self, reason: str, *, topic: str = "", payload: bytes = b"") -> None:
        self.topic = topic
        self.reason = clip(reason, MESSAGE_LIMIT)
        self.excerpt = clip_bytes(payload)
        where = f" on {quote(topic)}" if topic else ""
        super().__init__(f"undecodable payload{where}: {self.reason}")


class UnsupportedVersionError(DecodeError):
    """A payload whose schema version this build does not read."""

    def __init__(
        self, version: str, supported: str, *, topic: str = "", payload: bytes = b""
    ) -> None:
        self.version = clip(version)
        super().__init__(
            f"schema version {quote(version)} is not supported (this build reads {supported}); "
            "upgrade matchcast to read it",
            topic=topic,
            payload=payload,
        )


class UnknownEventTypeError(DecodeError):
    """An event of a newer minor version, of a type this build does not know.

    Not an error in the payload: the version rule says to skip it (a consumer counts it and
    moves its sequence past it; it is not dead-lettered). The envelope was valid, so its
    place in the match is known.

    Attributes:
        event_type: the ``type`` it carried, cut (:func:`events.clip`).
        version: its ``schema_version``.
        match_id, seq, run: its envelope.
    """

    def __init__(
        self,
        event_type: str,
        version: str,
        *,
        match_id: str,
        seq: int,
        run: int,
        topic: str = "",
        payload: bytes = b"",
    ) -> None:
        self.event_type = clip(event_type)
        self.version = clip(version)
        self.match_id = match_id
        self.seq = seq
        self.run = run
        super().__init__(
            f"event type {quote(event_type)} of schema version {self.version} is unknown to "
            "this build; skipped (upgrade matchcast to handle it)",
            topic=topic,
            payload=payload,
        )


class ControlCommandError(MatchcastError):
    """A control command that is not one: too large, not JSON, or not a valid command.

    Attributes:
        reason: what is wrong, for the error reply and the log.
        topic: where it arrived.
        request_id: the command's request id, when it could be read.
        reply_to: the topic to answer on, when it could be read.
    """

    def __init__(
        self,
        reason: str,
        *,
        topic: str = "",
        request_id: str | None = None,
        reply_to: str | None = None,
    ) -> None:
        self.reason = clip(reason, MESSAGE_LIMIT)
        self.topic = topic
        self.request_id = request_id
        self.reply_to = reply_to
        super().__init__(f"control command on {clip(topic) or '?'}: {self.reason}")


class MatchFileError(MatchcastError):
    """A match file that cannot be used.

    Attributes:
        path: the file.
        problems: one line per problem, each naming the field path and what was expected.
    """

    def __init__(self, path: Path | str, problems: Sequence[str]) -> None:
        self.path = Path(path)
        self.problems = [clip(p, MESSAGE_LIMIT) for p in problems]
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{self.path}: invalid match file\n{lines}")


class BrokerError(MatchcastError):
    """The broker could not be reached, or refused the connection.

    Attributes:
        url: the broker URL with any password removed.
    """

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = clip(reason, MESSAGE_LIMIT)  # may quote what a broker sent
        super().__init__(f"broker {url}: {self.reason}")


class ConnectionLostError(BrokerError):
    """A connection that worked went away: the broker restarted, or the network failed."""


class SubscribeRefusedError(BrokerError):
    """The broker refused a subscription: a SUBACK return code of 0x80 or more. An ACL says so
    for good; NATS also refuses a QoS 1 subscription while JetStream cannot create its
    consumer (a leader election, a busy young cluster), and a later try may be granted.

    Attributes:
        topic_filter: the refused filter.
        codes: the SUBACK's return codes.
    """

    def __init__(self, url: str, topic_filter: str, codes: list[int]) -> None:
        self.topic_filter = topic_filter
        self.codes = codes
        super().__init__(url, f"subscribe to {topic_filter!r} refused (code {codes})")


class SubscribeDroppedError(ConnectionLostError):
    """The broker closed the connection in answer to a SUBSCRIBE, instead of a SUBACK.

    RabbitMQ 3.10 does so to every SUBSCRIBE under a client id whose subscription queue lives
    on a node that is down (its log: ``not_found: home node ... of durable queue ... is
    down``), on every other node, with a persistent session or a clean one: the session of
    that client id cannot be resumed until the node returns, and a new client id is served at
    once. A broker may also close the connection on a subscription its ACL forbids.

    Attributes:
        topic_filter: the filter the broker answered by closing the connection.
    """

    def __init__(self, url: str, topic_filter: str) -> None:
        self.topic_filter = topic_filter
        BrokerError.__init__(
            self,
            url,
            f"closed the connection in answer to a subscribe to {topic_filter!r}",
        )


class PublishRefusedError(BrokerError):
    """The broker refused a publish: an MQTT 5 PUBACK or PUBREC with a reason code of 0x80 or
    more (0x87 Not authorized: the ACL). MQTT 3.1.1 has no way to say so: a broker drops a
    refused 3.1.1 publish silently and acknowledges it, so this is never raised there.

    Attributes:
        topic: the topic of the refused publish.
        code: the reason code, e.g. 0x87.
        name: its name, e.g. ``Not authorized``.
    """

    def __init__(self, url: str, topic: str, code: int, name: str) -> None:
        self.topic = topic
        self.code = code
        self.name = name
        super().__init__(url, f"publish to {topic!r} refused: {name} (0x{code:02x})")
