"""The topic tree, in one place.

Every topic matchcast uses is one :class:`TopicSpec` in :data:`TOPIC_TREE`: its address
under the root, who publishes it and who reads it, what it holds, and the MQTT flags it is
published with. Everything else is built from it: :class:`Topics` (building and parsing
names), the replayer's and the last will's QoS and retain defaults, the AsyncAPI document
(``matchcast.contract.asyncapi``), the channels the contract documents
(``matchcast.contract.channels``) and docs/wire-format.md. Adding a topic is one entry here
and one method on :class:`Topics`.

Under a root (default ``matchcast``; ``matchcast load`` uses ``matchcast-load``)::

    {root}/matches/{match_id}/events     every event, in seq order      QoS 1, not retained
    {root}/matches/{match_id}/state      MatchState after each event    QoS 1, retained
    {root}/replayers/{replayer_id}/status  online; offline (last will)  QoS 1, retained
    {root}/replayers/{replayer_id}/control   commands to the replayer     QoS 1, not retained
    {root}/replayers/{replayer_id}/replies/{request_id}  its answers     QoS 1, not retained
    {root}/deadletter/{consumer}         messages a consumer rejected   QoS 1, not retained
    {root}/consumers/{consumer}/state/{match_id}  a consumer's own state, retained

Pure data and functions: no I/O.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "DEFAULT_ROOT",
    "LOAD_ROOT",
    "MAX_REPLAYER_ID",
    "TOPIC_TREE",
    "VERIFY_ROOT",
    "TopicKind",
    "TopicRole",
    "TopicSpec",
    "Topics",
    "replayer_id_problem",
    "topic_spec",
]

#: The root every command uses unless ``--root`` says otherwise.
DEFAULT_ROOT = "matchcast"
#: The root ``matchcast load`` and ``load-consumer`` use, so a load test never mixes its
#: synthetic matches with real ones under :data:`DEFAULT_ROOT`.
LOAD_ROOT = "matchcast-load"
#: The root ``matchcast verify`` plays its scenarios under (and clears at the end), so a real
#: scoreboard never shows them.
VERIFY_ROOT = "matchcast-verify"

TopicKind = Literal["events", "state", "status", "control", "reply", "deadletter", "consumer_state"]
#: Who is at either end of a topic: the AsyncAPI document tags its operations with these.
TopicRole = Literal["replayer", "subscriber", "consumer", "tools", "operator"]


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """One topic of the tree and how it is published.

    Attributes:
        kind: what :meth:`Topics.parse` calls it, and the :class:`Topics` method that builds it.
        channel_id: its AsyncAPI channel id.
        levels: its address below the root, ids as ``{name}`` placeholders.
        title: a name for people.
        payload: what each message holds, in words (a sentence without its final stop).
        qos: the QoS it is published with (the replayer's ``--qos`` changes events and state).
        retain: whether the broker keeps the last message for late subscribers.
        expiry: MQTT 5 message expiry, seconds; None for none.
        user_properties: MQTT 5 user properties on each message.
        publisher: who publishes on it.
        receiver: who reads it.
    """

    kind: TopicKind
    channel_id: str
    levels: str
    title: str
    payload: str
    qos: int
    retain: bool
    expiry: int | None
    user_properties: tuple[str, ...]
    publisher: TopicRole
    receiver: TopicRole

    @property
    def address(self) -> str:
        """The topic with the root and the ids as ``{placeholders}``."""
        return "{root}/" + self.levels

    @property
    def parameters(self) -> tuple[str, ...]:
        """The placeholders of :attr:`address`, in order: ``("root", "match_id")``."""
        return tuple(name for _, name, _, _ in string.Formatter().parse(self.address) if name)


#: Every topic matchcast publishes or reads. The order is the one the docs list them in.
TOPIC_TREE: tuple[TopicSpec, ...] = (
    TopicSpec(
        kind="events",
        channel_id="matchEvents",
        levels="matches/{match_id}/events",
        title="Match events",
        payload="every event of the match, in seq order",
        qos=1,
        retain=False,
        expiry=3600,
        user_properties=("seq", "type"),
        publisher="replayer",
        receiver="subscriber",
    ),
    TopicSpec(
        kind="state",
        channel_id="matchState",
        levels="matches/{match_id}/state",
        title="Match state",
        payload="the MatchState after each event, so a late subscriber knows the score at once",
        qos=1,
        retain=True,
        expiry=None,
        user_properties=("seq",),
        publisher="replayer",
        receiver="subscriber",
    ),
    TopicSpec(
        kind="status",
        channel_id="replayerStatus",
        levels="replayers/{replayer_id}/status",
        title="Replayer status",
        payload="online while a replayer runs; removed (an empty retained message) when it "
        "ends; offline from its last will when its connection dies (expiring after a day "
        "on MQTT 5)",
        qos=1,
        retain=True,
        expiry=None,
        user_properties=(),
        publisher="replayer",
        receiver="subscriber",
    ),
    TopicSpec(
        kind="deadletter",
        channel_id="deadLetters",
        levels="deadletter/{consumer}",
        title="Dead letters",
        payload="a copy of each message a consumer rejected (not JSON, nested too deep, wrong "
        "shape, an unknown type of its own schema version, another major version, oversize, an "
        "implausible seq, a match id that is not the topic's), with the reason",
        qos=1,
        retain=False,
        expiry=None,
        user_properties=(),
        publisher="consumer",
        receiver="tools",
    ),
    TopicSpec(
        kind="consumer_state",
        channel_id="consumerState",
        levels="consumers/{consumer}/state/{match_id}",
        title="Consumer state",
        payload="what a consumer believes about a match (a match state, or at least its "
        "`score` and `status`), published after every change, retained: `matchcast verify` "
        "and `matchcast load --verify-state` compare it with the truth",
        qos=1,
        retain=True,
        expiry=None,
        user_properties=(),
        publisher="consumer",
        receiver="tools",
    ),
    TopicSpec(
        kind="control",
        channel_id="replayerControl",
        levels="replayers/{replayer_id}/control",
        title="Replayer control",
        payload="commands to a replayer: pause, resume, seek, speed, stop, status "
        "(docs/control.md). Only an operator may publish here (the compose ACL)",
        qos=1,
        retain=False,
        expiry=None,
        user_properties=(),
        publisher="operator",
        receiver="replayer",
    ),
    TopicSpec(
        kind="reply",
        channel_id="controlReplies",
        levels="replayers/{replayer_id}/replies/{request_id}",
        title="Control replies",
        payload="the replayer's answer to each command, on the topic the command named in "
        "`reply_to` (it answers nowhere else)",
        qos=1,
        retain=False,
        expiry=None,
        user_properties=(),
        publisher="replayer",
        receiver="operator",
    ),
)

_BY_KIND: dict[TopicKind, TopicSpec] = {spec.kind: spec for spec in TOPIC_TREE}
#: ``(kind, levels split on "/")`` of every topic, for :meth:`Topics.parse`.
_SHAPES: tuple[tuple[TopicKind, tuple[str, ...]], ...] = tuple(
    (spec.kind, tuple(spec.levels.split("/"))) for spec in TOPIC_TREE
)


def topic_spec(kind: TopicKind) -> TopicSpec:
    """The :class:`TopicSpec` of ``kind``."""
    return _BY_KIND[kind]


#: The levels below the root of each topic, as format strings for :class:`Topics`.
_EVENTS, _STATE, _STATUS = (_BY_KIND[k].levels for k in ("events", "state", "status"))
_CONTROL, _REPLY = (_BY_KIND[k].levels for k in ("control", "reply"))
_DEADLETTER, _CONSUMER_STATE = (_BY_KIND[k].levels for k in ("deadletter", "consumer_state"))


#: The longest replayer id taken: one topic level, well inside any broker's topic limit.
MAX_REPLAYER_ID = 128


def replayer_id_problem(replayer_id: str) -> str | None:
    """What is wrong with ``replayer_id`` as one topic level (a replayer's status, control and
    replies topics), in words; None when it is fine."""
    if not replayer_id:
        return "is empty: a replayer id names a topic level"
    if len(replayer_id) > MAX_REPLAYER_ID:
        return f"is longer than {MAX_REPLAYER_ID} characters"
    if any(c in replayer_id for c in "/+#"):
        return "must be a replayer id, without / + #"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in replayer_id):
        return "holds a control character"
    return None


@dataclass(frozen=True, slots=True)
class Topics:
    """Builds and parses topic names under ``root``, as :data:`TOPIC_TREE` lays them out."""

    root: str = DEFAULT_ROOT

    def __post_init__(self) -> None:
        root = self.root.strip("/")
        if not root or any(c in root for c in "+#") or root.startswith("$"):
            raise ValueError(
                f"topic root {self.root!r} must be non-empty, without wildcards, not start with '$'"
            )
        object.__setattr__(self, "root", root)

    def events(self, match_id: str = "+") -> str:
        """The events topic of a match (``+`` for all matches)."""
        return f"{self.root}/{_EVENTS.format(match_id=match_id)}"

    def state(self, match_id: str = "+") -> str:
        """The retained state topic of a match (``+`` for all matches)."""
        return f"{self.root}/{_STATE.format(match_id=match_id)}"

    def status(self, replayer_id: str = "+") -> str:
        """The retained online/offline status topic of a replayer."""
        return f"{self.root}/{_STATUS.format(replayer_id=replayer_id)}"

    def control(self, replayer_id: str = "+") -> str:
        """Where a replayer takes commands (pause, seek, ...); only operators may publish."""
        return f"{self.root}/{_CONTROL.format(replayer_id=replayer_id)}"

    def reply(self, replayer_id: str = "+", request_id: str = "+") -> str:
        """Where a replayer answers the command with ``request_id``."""
        return f"{self.root}/{_REPLY.format(replayer_id=replayer_id, request_id=request_id)}"

    def deadletter(self, consumer: str = "+") -> str:
        """Where a consumer puts a copy of each message it rejected, with the reason."""
        return f"{self.root}/{_DEADLETTER.format(consumer=consumer)}"

    def consumer_state(self, consumer: str = "+", match_id: str = "+") -> str:
        """Where a consumer reports what it believes about a match (verify, load --verify-state)."""
        return f"{self.root}/{_CONSUMER_STATE.format(consumer=consumer, match_id=match_id)}"

    def prefix(self, kind: TopicKind) -> str:
        """The levels of ``kind``'s topics before the first id, root included:
        ``matchcast/replayers/`` for ``status``, for messages that name where to look."""
        levels = _BY_KIND[kind].levels
        return f"{self.root}/{levels[: levels.index('{')]}"

    def match(self, topic: str) -> tuple[TopicKind, dict[str, str]] | None:
        """``(kind, {placeholder: value})`` for a topic of this tree, or None for anything else.

        ``matchcast/consumers/c1/state/m1`` is ``("consumer_state", {"consumer": "c1",
        "match_id": "m1"})``.
        """
        prefix = self.root + "/"
        if not topic.startswith(prefix):
            return None
        parts = topic[len(prefix) :].split("/")
        for kind, shape in _SHAPES:
            if len(shape) != len(parts):
                continue
            ids: dict[str, str] = {}
            for want, got in zip(shape, parts, strict=True):
                if want.startswith("{"):
                    ids[want[1:-1]] = got
                elif want != got:
                    break
            else:
                return kind, ids
        return None

    def parse(self, topic: str) -> tuple[TopicKind, str] | None:
        """``(kind, id)`` for a topic of this tree, or None for anything else.

        The id is the first one in the address: the match of ``events`` and ``state``, the
        replayer of ``status``, ``control`` and ``reply``, the consumer of ``deadletter`` and
        ``consumer_state``.
        """
        matched = self.match(topic)
        if matched is None:
            return None
        kind, ids = matched
        return kind, next(iter(ids.values()))
