"""The topics the replayer publishes for subscribers, as the contract documents them.

The topic tree itself (addresses, QoS, retain, expiry, user properties, who publishes) is
declared once, in :data:`events.TOPIC_TREE`; the replayer's defaults
(:class:`simulator.ReplayOptions`, :class:`matchcast.transport.connection.WillSpec`) are read
from it. This module picks out the replayer's data topics (events, state, status) the
AsyncAPI document and docs/wire-format.md describe first, and a test replays a match through a
recording client to check the replayer publishes them as declared.
"""

from __future__ import annotations

from events import TOPIC_TREE, TopicSpec

__all__ = ["CHANNELS", "ChannelSpec"]

#: One topic of the tree and how it is published (the name the contract modules use).
ChannelSpec = TopicSpec

#: The topics the replayer publishes for subscribers: events, state, status.
CHANNELS: tuple[ChannelSpec, ...] = tuple(
    spec for spec in TOPIC_TREE if (spec.publisher, spec.receiver) == ("replayer", "subscriber")
)
