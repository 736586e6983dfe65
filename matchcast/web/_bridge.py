"""The bridge: a subscriber of the ordinary plug-in API that feeds the hub.

The runner calls it in seq order per match, after dedup and gap handling, exactly as it calls
the terminal scoreboard; the handlers never wait (the hub only queues), so a slow browser
cannot hold up the runner's lane.
"""

from __future__ import annotations

from consumers import Subscriber
from events import Event, MatchState
from matchcast.web._hub import Hub

__all__ = ["bridge"]


def bridge(hub: Hub, name: str = "web") -> Subscriber:
    """A :class:`consumers.Subscriber` that hands every event and adopted state to ``hub``."""
    sub = Subscriber(name)

    @sub.on()
    def _event(event: Event, state: MatchState) -> None:
        hub.publish(event, state)

    @sub.on_state
    def _state(state: MatchState) -> None:
        hub.adopt(state)

    return sub
