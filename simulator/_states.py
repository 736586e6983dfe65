"""The state after each event of a replay, computed as the replay reaches it.

Each state holds every card and goal before it, so a list of the state after every event costs
memory that grows with the square of the events (100,000 cards: billions of references).
:class:`ReplayStates` is that list computed on demand: it holds the events, the few snapshots a
recording pins, and the one state it last reached, so memory stays linear in the events.

A replay reads the states in order, so each costs one :func:`~events.apply`; reading an earlier
one (a resume after a reconnect) folds again from the start, once, then goes on in order.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import overload

from events import Event, MatchState, apply

__all__ = ["ReplayStates"]


class ReplayStates(Sequence[MatchState]):
    """``states[i]``: the state after ``events[i]``, folded from ``initial`` when asked for.

    Args:
        initial: the state before the first event.
        events: the events, in order.
        shown: for a recording, the snapshot recorded after ``events[i]`` (with its seq), which
            stands for the state after it.
        resync: for a recording, the snapshot the stream resynchronised to after ``events[i]``,
            which the next event applies to.
    """

    __slots__ = ("_at", "_base", "_events", "_initial", "_resync", "_shown", "_state")

    def __init__(
        self,
        initial: MatchState,
        events: Sequence[Event],
        *,
        shown: Mapping[int, MatchState] | None = None,
        resync: Mapping[int, MatchState] | None = None,
    ) -> None:
        self._initial = initial
        self._events = events
        self._shown = dict(shown or {})
        self._resync = dict(resync or {})
        self._rewind()

    def _rewind(self) -> None:
        self._at = -1  # the cursor: the state after events[_at] ...
        self._state = self._initial  # ... as shown ...
        self._base = self._initial  # ... and what the next event applies to

    def copy(self) -> ReplayStates:
        """The same states with a cursor of their own (for a second replay at the same time)."""
        return ReplayStates(self._initial, self._events, shown=self._shown, resync=self._resync)

    def with_run(self, run: int) -> ReplayStates:
        """The same states, each of run ``run`` (the reducer keeps the initial state's run)."""

        def stamp(states: Mapping[int, MatchState]) -> dict[int, MatchState]:
            return {i: s.model_copy(update={"run": run}) for i, s in states.items()}

        return ReplayStates(
            self._initial.model_copy(update={"run": run}),
            self._events,
            shown=stamp(self._shown),
            resync=stamp(self._resync),
        )

    def __len__(self) -> int:
        return len(self._events)

    @overload
    def __getitem__(self, index: int) -> MatchState: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[MatchState]: ...

    def __getitem__(self, index: int | slice) -> MatchState | Sequence[MatchState]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        n = len(self._events)
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError(f"state index {index} out of range for {n} events")
        if i < self._at:
            self._rewind()
        while self._at < i:
            self._at += 1
            state = apply(self._base, self._events[self._at])
            self._state = self._shown.get(self._at, state)
            self._base = self._resync.get(self._at, state)
        return self._state

    def __iter__(self) -> Iterator[MatchState]:
        view = self.copy()  # iterating leaves this cursor where it was
        for i in range(len(view)):
            yield view[i]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # equal to a list of states, so not hashable

    def __repr__(self) -> str:
        return f"ReplayStates({len(self)} events of {self._initial.match_id!r})"
