"""Recordings: a stream written to JSON Lines, read back so it can be replayed.

The format (written by the ``recorder`` subscriber, see docs/subscribers.md) is one JSON object
per line: an event exactly as on the wire, or ``{"snapshot": STATE}`` where the stream starts
from (or was resynchronised to) a state snapshot. Lines of several matches may interleave.

Each event's place in time is when it was due (``scheduled_at``, else ``emitted_at``), so a
replay keeps the original timing, across matches too (see :meth:`Recording.lead`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from events import (
    DecodeError,
    Event,
    MatchClock,
    MatchFileError,
    MatchState,
    apply,
    decode_event,
    format_validation_error,
)
from simulator._files import RECORDING, input_lines, parse_json
from simulator._recording_rules import MAX_SPAN, event_problem, snapshot_problem, time_problem
from simulator._states import ReplayStates

__all__ = ["RECORDING_SUFFIX", "Recording", "is_recording", "load_recording"]

RECORDING_SUFFIX = ".jsonl"
_MAX_PROBLEMS = 10


@dataclass(frozen=True, slots=True)
class Recording:
    """The recorded stream of one match.

    Attributes:
        initial: the state before the first event (a snapshot, or a new match).
        events: the events in the order recorded.
        states: the state after each event, snapshots in the recording applied (computed as
            they are read: see :class:`~simulator._states.ReplayStates`).
        offsets: seconds from the recording's first event to each event, as recorded.
    """

    match_id: str
    path: Path
    initial: MatchState
    events: tuple[Event, ...]
    states: ReplayStates
    offsets: tuple[float, ...]

    def wall_offsets(self, speed: float | None) -> list[float]:
        """Wall seconds to each event, ``speed`` times faster than recorded (None: no waits)."""
        if speed is None:
            return [0.0] * len(self.events)
        return [o / speed for o in self.offsets]

    def lead(self, speed: float | None, start: MatchClock | None = None) -> float:
        """Wall seconds from the recording's first event to this match's first one replayed
        (the first at or after ``start``), ``speed`` times faster than recorded; 0 at maximum
        speed. A replay of several matches waits this long (less the earliest match's) before
        each, so the matches keep their recorded places in time instead of all starting at once.
        """
        if speed is None or not self.offsets:
            return 0.0
        key = start.sort_key if start is not None else None
        for event, offset in zip(self.events, self.offsets, strict=True):
            if key is None or event.clock.sort_key >= key:
                return offset / speed
        return self.offsets[-1] / speed


def is_recording(spec: str | Path) -> bool:
    """True for a path that names a recording (``.jsonl``)."""
    return str(spec).endswith(RECORDING_SUFFIX)


@dataclass(slots=True)
class _Builder:
    initial: MatchState | None = None
    state: MatchState | None = None
    events: list[Event] = field(default_factory=list)
    shown: dict[int, MatchState] = field(default_factory=dict)  # see ReplayStates
    resync: dict[int, MatchState] = field(default_factory=dict)
    times: list[float] = field(default_factory=list)
    due: dt.datetime | None = None  # the time of its last event


@dataclass(slots=True)
class _Span:
    """The earliest and latest time of any event of the recording so far."""

    first: dt.datetime | None = None
    last: dt.datetime | None = None

    def problem(self, due: dt.datetime) -> str | None:
        """What is wrong with an event at ``due``: the recording would span too long."""
        first, last = min(self.first or due, due), max(self.last or due, due)
        if last - first > MAX_SPAN:
            return (
                f"its time {due.isoformat()} makes the recording span more than "
                f"{MAX_SPAN.days} days"
            )
        self.first, self.last = first, last
        return None


def load_recording(path: str | Path) -> list[Recording]:
    """The matches of a recording, in order of first appearance.

    Raises:
        MatchFileError: the file cannot be read, a line is neither an event nor a snapshot, or
            it holds no events; the problems name their line numbers.
    """
    path = Path(path)
    matches: dict[str, _Builder] = {}
    span = _Span()
    problems: list[str] = []
    lines = input_lines(path, RECORDING)
    while len(problems) < _MAX_PROBLEMS:
        try:
            n, line = next(lines)
        except StopIteration:
            break
        except MatchFileError as err:  # a line too long, or the file grew: reading stops here
            if not problems:
                raise
            problems += err.problems
            break
        try:
            _add(matches, span, line, path, n)
        except MatchFileError as err:
            problems += err.problems
        except (DecodeError, ValidationError, ValueError) as err:
            reason = (
                format_validation_error(err)
                if isinstance(err, ValidationError)
                else getattr(err, "reason", str(err))
            )
            problems.append(f"line {n}: {reason}")
    lines.close()
    if problems:
        raise MatchFileError(path, problems)
    recorded = {m: b for m, b in matches.items() if b.events}
    if not recorded:
        raise MatchFileError(path, ["no events in it: is it a recording (.jsonl)?"])
    t0 = min(t for b in recorded.values() for t in b.times)
    out = []
    for m, b in recorded.items():
        initial, events = b.initial or MatchState.new(m), tuple(b.events)
        states = ReplayStates(initial, events, shown=b.shown, resync=b.resync)
        out.append(
            Recording(
                match_id=m,
                path=path,
                initial=initial,
                events=events,
                states=states,
                offsets=tuple(t - t0 for t in b.times),
            )
        )
    return out


def _add(matches: dict[str, _Builder], span: _Span, line: bytes, path: Path, n: int) -> None:
    """Take line ``n`` into ``matches``, once it passed the rules (simulator._recording_rules).

    Raises:
        ValueError: what is wrong with it (nothing of it is taken).
    """
    data = parse_json(line, path, line=n)  # bounded: deep nesting is refused, not recursed into
    if isinstance(data, dict) and set(data) == {"snapshot"}:
        snapshot = MatchState.model_validate(data["snapshot"])
        b = matches.setdefault(snapshot.match_id, _Builder())
        if (problem := snapshot_problem(b.state, snapshot)) is not None:
            raise ValueError(problem)
        if not b.events:
            b.initial = b.state = snapshot
        else:
            last = len(b.events) - 1
            if snapshot.last_seq == b.events[-1].seq:
                b.shown[last] = snapshot
            b.resync[last] = b.state = snapshot
        return
    event = decode_event(line)
    b = matches.get(event.match_id) or _Builder()
    state = b.state or MatchState.new(event.match_id)
    due = event.scheduled_at or event.emitted_at
    problem = event_problem(state, event) or time_problem(b.due, due) or span.problem(due)
    if problem is not None:
        raise ValueError(problem)
    if b.state is None:
        b.initial = state
    matches[event.match_id] = b
    b.state = apply(state, event)
    b.due = due
    b.events.append(event)
    b.times.append(due.timestamp())
