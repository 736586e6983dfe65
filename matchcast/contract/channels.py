"""The topic tree as the replayer uses it: addresses, QoS, retain, MQTT 5 properties.

One :class:`ChannelSpec` per topic of :class:`events.Topics`, with the flags read from the
replayer's own defaults where it has them (:class:`simulator.ReplayOptions`,
:class:`matchcast.transport.connection.WillSpec`). The AsyncAPI document and docs/wire-format.md
are both built from it, and a test replays a match through a recording client to check it.
"""

from __future__ import annotations

from dataclasses import dataclass

from events import TopicKind, Topics
from matchcast.transport.connection import WillSpec
from simulator import ReplayOptions

__all__ = ["CHANNELS", "ChannelSpec"]

_REPLAY = ReplayOptions()
_WILL = WillSpec(topic="", payload=b"")


@dataclass(frozen=True, slots=True)
class ChannelSpec:
    """One topic of the tree and how the replayer publishes on it.

    Attributes:
        channel_id: the AsyncAPI channel id.
        kind: the :data:`events.TopicKind` of the topic.
        address: the topic with ``{root}`` and the id as AsyncAPI parameters.
        title: a name for people.
        payload: what each message holds, in words.
        qos: QoS the replayer publishes with (``--qos`` changes events and state).
        retain: whether the broker keeps the last message for late subscribers.
        expiry: MQTT 5 message expiry, seconds; None for none.
        user_properties: MQTT 5 user properties on each message.
    """

    channel_id: str
    kind: TopicKind
    address: str
    title: str
    payload: str
    qos: int
    retain: bool
    expiry: int | None
    user_properties: tuple[str, ...]


_T = Topics("{root}")

#: The topic tree, as the replayer uses it.
CHANNELS: tuple[ChannelSpec, ...] = (
    ChannelSpec(
        channel_id="matchEvents",
        kind="events",
        address=_T.events("{match_id}"),
        title="Match events",
        payload="every event of the match, in seq order",
        qos=_REPLAY.qos,
        retain=False,
        expiry=_REPLAY.event_expiry,
        user_properties=("seq", "type"),
    ),
    ChannelSpec(
        channel_id="matchState",
        kind="state",
        address=_T.state("{match_id}"),
        title="Match state",
        payload="the MatchState after each event, so a late subscriber knows the score at once",
        qos=_REPLAY.qos,
        retain=True,
        expiry=None,
        user_properties=("seq",),
    ),
    ChannelSpec(
        channel_id="replayerStatus",
        kind="status",
        address=_T.status("{replayer_id}"),
        title="Replayer status",
        payload="online when a replayer starts, offline when it stops or its connection dies "
        "(last will)",
        qos=_WILL.qos,
        retain=_WILL.retain,
        expiry=None,
        user_properties=(),
    ),
)
