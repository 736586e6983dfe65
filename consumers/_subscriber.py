"""The subscriber API: functions that react to typed events and the state after them.

Function form::

    from consumers import Subscriber
    from events import Goal, MatchState

    sub = Subscriber("goal-alerts")

    @sub.on(Goal)
    async def alert(event: Goal, state: MatchState) -> None:
        print(f"{event.clock.label} {event.scorer} - now {state.score}")

Class form, for a subscriber that keeps state of its own (the name defaults to the class name
in kebab case, here ``goal-counter``)::

    from consumers import Subscriber, on

    class GoalCounter(Subscriber):
        def __init__(self) -> None:
            super().__init__()
            self.goals = 0

        @on(Goal)
        def count(self, event: Goal, state: MatchState) -> None:
            self.goals += 1

Handlers are chosen by event class (a base class such as ``BaseEvent`` matches every event) and
optionally by match id; they may be sync or async. ``on_state`` handlers get a state the runner
adopted from a snapshot; ``on_start`` and ``on_stop`` hooks run once, before the first message
and after the last handler.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, overload

from events import BaseEvent, Event, MatchState

__all__ = [
    "Handler",
    "Hook",
    "Registration",
    "StateHandler",
    "Subscriber",
    "on",
    "on_start",
    "on_state",
    "on_stop",
]

E = TypeVar("E", bound=BaseEvent)
E1 = TypeVar("E1", bound=BaseEvent)
E2 = TypeVar("E2", bound=BaseEvent)
E3 = TypeVar("E3", bound=BaseEvent)
F = TypeVar("F", bound=Callable[..., Any])
#: A handler of events of type ``E``, as the type checker sees one.
EventHandler = Callable[[E, MatchState], Awaitable[None] | None]
#: A handler takes the event and the state after it; it may return an awaitable.
Handler = Callable[[Any, MatchState], Awaitable[None] | None]
#: Takes a state the runner adopted from a snapshot (late join, resync).
StateHandler = Callable[[MatchState], Awaitable[None] | None]
#: A lifecycle hook: no arguments, sync or async.
Hook = Callable[[], Awaitable[None] | None]

_MARK = "__matchcast_subscriber__"
_HookKind = Literal["state", "start", "stop"]


@dataclass(frozen=True, slots=True)
class Registration:
    """One handler and what it listens to.

    Attributes:
        timeout: seconds this handler may take; None for the runner's default.
    """

    handler: Handler
    event_types: tuple[type[BaseEvent], ...]
    match_id: str | None
    name: str
    timeout: float | None = None

    def wants(self, event: Event) -> bool:
        """True if this handler should see ``event``."""
        if self.match_id is not None and event.match_id != self.match_id:
            return False
        return isinstance(event, self.event_types)


@dataclass(frozen=True, slots=True)
class _Mark:
    """What ``on``/``on_state``/... put on a method of a class-form subscriber."""

    kind: Literal["event"] | _HookKind
    event_types: tuple[type[BaseEvent], ...] = ()
    match_id: str | None = None
    timeout: float | None = None


def _event_types(event_types: tuple[type[BaseEvent], ...]) -> tuple[type[BaseEvent], ...]:
    types = event_types or (BaseEvent,)
    for t in types:
        if not (isinstance(t, type) and issubclass(t, BaseEvent)):
            raise TypeError(f"{t!r} is not an event class (such as events.Goal)")
    return types


def _check_timeout(timeout: float | None) -> None:
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, not {timeout!r}")


def _kebab(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", name).lower()


class Subscriber:
    """A named group of handlers, run by :class:`consumers.Runner`.

    Args:
        name: shown in logs and metrics, and in the default MQTT client id of a persistent
            session. A subclass may leave it out: it defaults to the class name in kebab case.

    Raises:
        ValueError: the name is empty or contains ``/``.
    """

    def __init__(self, name: str | None = None) -> None:
        if name is None:
            if type(self) is Subscriber:
                raise ValueError('a Subscriber needs a name, e.g. Subscriber("goal-alerts")')
            name = _kebab(type(self).__name__)
        if not name or "/" in name:
            raise ValueError(f"subscriber name {name!r} must be non-empty and contain no '/'")
        self.name = name
        self.registrations: list[Registration] = []
        self.state_handlers: list[StateHandler] = []
        self.start_hooks: list[Hook] = []
        self.stop_hooks: list[Hook] = []
        self._register_marked_methods()

    # The overloads let a type checker see which events a handler gets: @sub.on(Goal) wants
    # a handler of Goal, @sub.on(Goal, Card) one of Goal | Card, @sub.on() one of any event.
    @overload
    def on(
        self, t1: type[E1], /, *, match: str | None = None, timeout: float | None = None
    ) -> Callable[[EventHandler[E1]], EventHandler[E1]]: ...

    @overload
    def on(
        self,
        t1: type[E1],
        t2: type[E2],
        /,
        *,
        match: str | None = None,
        timeout: float | None = None,
    ) -> Callable[[EventHandler[E1 | E2]], EventHandler[E1 | E2]]: ...

    @overload
    def on(
        self,
        t1: type[E1],
        t2: type[E2],
        t3: type[E3],
        /,
        *,
        match: str | None = None,
        timeout: float | None = None,
    ) -> Callable[[EventHandler[E1 | E2 | E3]], EventHandler[E1 | E2 | E3]]: ...

    @overload
    def on(
        self,
        *event_types: type[BaseEvent],
        match: str | None = None,
        timeout: float | None = None,
    ) -> Callable[[EventHandler[Any]], EventHandler[Any]]: ...

    def on(
        self,
        *event_types: type[BaseEvent],
        match: str | None = None,
        timeout: float | None = None,
    ) -> Callable[[EventHandler[Any]], EventHandler[Any]]:
        """Register the decorated function for these event classes (all events if none given).

        Args:
            event_types: event classes, e.g. ``Goal``; a base class matches its subclasses.
            match: only events of this match id.
            timeout: seconds this handler may take, overriding the runner's default.

        Raises:
            TypeError: one of ``event_types`` is not an event class.
        """
        types = _event_types(event_types)
        _check_timeout(timeout)

        def register(fn: EventHandler[Any]) -> EventHandler[Any]:
            self._add(fn, types, match, timeout)
            return fn

        return register

    def on_state(self, fn: StateHandler) -> StateHandler:
        """Register a function called with a state the runner adopted from a snapshot.

        That happens when a subscriber joins mid-match, when it resynchronises after a gap,
        and when a match's lane skipped events because its handlers fell behind.
        """
        self.state_handlers.append(fn)
        return fn

    def on_start(self, fn: Hook) -> Hook:
        """Register a function called once, before the first message (open files here)."""
        self.start_hooks.append(fn)
        return fn

    def on_stop(self, fn: Hook) -> Hook:
        """Register a function called once, after the last handler finished (close files here)."""
        self.stop_hooks.append(fn)
        return fn

    def handlers_for(self, event: Event) -> list[Registration]:
        """The registrations that want ``event``, in registration order."""
        return [r for r in self.registrations if r.wants(event)]

    @property
    def subscriber(self) -> Subscriber:
        """This subscriber; lets code written for ``obj.subscriber`` take a Subscriber too."""
        return self

    def _add(
        self,
        fn: Handler,
        types: tuple[type[BaseEvent], ...],
        match: str | None,
        timeout: float | None,
    ) -> None:
        self.registrations.append(Registration(fn, types, match, handler_name(fn), timeout))

    def _register_marked_methods(self) -> None:
        # Base classes first, each in definition order; an override keeps its base's place
        # and replaces its marks (an unmarked override unregisters it).
        names: dict[str, None] = {}
        for klass in reversed(type(self).__mro__):
            for attr in vars(klass):
                names.setdefault(attr, None)
        for attr in names:
            raw = inspect.getattr_static(self, attr, None)
            marks: list[_Mark] = getattr(raw, _MARK, [])
            if not marks:
                continue
            bound = getattr(self, attr)
            for mark in marks:
                if mark.kind == "event":
                    self._add(bound, mark.event_types, mark.match_id, mark.timeout)
                elif mark.kind == "state":
                    self.state_handlers.append(bound)
                elif mark.kind == "start":
                    self.start_hooks.append(bound)
                else:
                    self.stop_hooks.append(bound)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, handlers={len(self.registrations)})"


def _mark(fn: F, mark: _Mark) -> F:
    marks: list[_Mark] = [*getattr(fn, _MARK, []), mark]
    setattr(fn, _MARK, marks)
    return fn


def on(
    *event_types: type[BaseEvent], match: str | None = None, timeout: float | None = None
) -> Callable[[F], F]:
    """Mark a method of a :class:`Subscriber` subclass as a handler of these event classes.

    The class-form twin of :meth:`Subscriber.on`; same arguments.
    """
    types = _event_types(event_types)
    _check_timeout(timeout)
    return lambda fn: _mark(fn, _Mark("event", types, match, timeout))


def on_state(fn: F) -> F:
    """Mark a method of a :class:`Subscriber` subclass as a state handler."""
    return _mark(fn, _Mark("state"))


def on_start(fn: F) -> F:
    """Mark a method of a :class:`Subscriber` subclass as a start hook."""
    return _mark(fn, _Mark("start"))


def on_stop(fn: F) -> F:
    """Mark a method of a :class:`Subscriber` subclass as a stop hook."""
    return _mark(fn, _Mark("stop"))


def handler_name(fn: object) -> str:
    """``alert`` or ``GoalCounter.count``, as logs name a handler (no ``<locals>`` path)."""
    name: str = getattr(fn, "__qualname__", None) or repr(fn)
    return name.rsplit("<locals>.", 1)[-1]


async def call_handler(fn: Callable[..., Awaitable[None] | None], *args: Any) -> None:
    """Call a sync or async handler."""
    result = fn(*args)
    if inspect.isawaitable(result):
        await result
