"""Feeding the web page's hub directly, for the tests of what the server and the page show."""

from __future__ import annotations

from events import Event, MatchState, apply
from matchcast.web import Hub

__all__ = ["feed"]


def feed(hub: Hub, events: list[Event], state: MatchState | None = None) -> MatchState:
    """Publish ``events`` on ``hub``, each with the state it leads to, from ``state`` (a new
    match's when None); returns the last state, so a test can go on feeding from it."""
    state = state or MatchState.new(events[0].match_id)
    for e in events:
        state = apply(state, e)
        hub.publish(e, state)
    return state
