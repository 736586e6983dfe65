"""The subscriber API: functions that react to typed events and the state after them.

::

    from consumers import Subscriber
    from events import Goal, MatchState

    sub = Subscriber("goal-alerts")

    @sub.on(Goal)
    async def alert(event: Goal, state: MatchState) -> None:
        print(f"{event.clock.label} {event.scorer} - now {state.scoreline}")

Handlers are chosen by event class (a base class such as ``BaseEvent`` matches every event) and
optionally by match id; they may be sync or async.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from events import BaseEvent, Event, MatchState

__all__ = ["Handler", "Registration", "Subscriber"]

E = TypeVar("E", bound=BaseEvent)
#: A handler takes the event and the state after it; it may return an awaitable.
Handler = Callable[[Any, MatchState], Awaitable[None] | None]
StateHandler = Callable[[MatchState], Awaitable[None] | None]


@dataclass(frozen=True, slots=True)
class Registration:
    """One handler and what it listens to."""

    handler: Handler
    event_types: tuple[type[BaseEvent], ...]
    match_id: str | None
    name: str

    def wants(self, event: Event) -> bool:
        """True if this handler should see ``event``."""
        if self.match_id is not None and event.match_id != self.match_id:
            return False
        return isinstance(event, self.event_types)


class Subscriber:
    """A named group of handlers, run by :class:`consumers.Runner`.

    Args:
        name: shown in logs and metrics; also the default MQTT client id suffix.
    """

    def __init__(self, name: str) -> None:
        if not name or "/" in name:
            raise ValueError(f"subscriber name {name!r} must be non-empty and contain no '/'")
        self.name = name
        self.registrations: list[Registration] = []
        self.state_handlers: list[StateHandler] = []

    def on(
        self, *event_types: type[E], match: str | None = None
    ) -> Callable[
        [Callable[[E, MatchState], Awaitable[None] | None]],
        Callable[[E, MatchState], Awaitable[None] | None],
    ]:
        """Register the decorated function for these event classes (all events if none given).

        Args:
            event_types: event classes, e.g. ``Goal``; a base class matches its subclasses.
            match: only events of this match id.
        """
        types: tuple[type[BaseEvent], ...] = event_types or (BaseEvent,)
        for t in types:
            if not (isinstance(t, type) and issubclass(t, BaseEvent)):
                raise TypeError(f"{t!r} is not an event class (such as events.Goal)")

        def register(
            fn: Callable[[E, MatchState], Awaitable[None] | None],
        ) -> Callable[[E, MatchState], Awaitable[None] | None]:
            name = getattr(fn, "__qualname__", repr(fn))
            self.registrations.append(Registration(cast(Handler, fn), types, match, name))
            return fn

        return register

    def on_state(self, fn: StateHandler) -> StateHandler:
        """Register a function called with a state the runner adopted from a snapshot.

        That happens when a subscriber joins mid-match, and when it resynchronises after a gap.
        """
        self.state_handlers.append(fn)
        return fn

    def handlers_for(self, event: Event) -> list[Registration]:
        """The registrations that want ``event``, in registration order."""
        return [r for r in self.registrations if r.wants(event)]

    def __repr__(self) -> str:
        return f"Subscriber({self.name!r}, handlers={len(self.registrations)})"


async def call_handler(fn: Callable[..., Awaitable[None] | None], *args: Any) -> None:
    """Call a sync or async handler."""
    result = fn(*args)
    if inspect.isawaitable(result):
        await result
