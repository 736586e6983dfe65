"""The playback of one match as a state machine: play, pause, seek, speed, stop.

A :class:`Playhead` maps each event of a match onto a deadline on the monotonic clock. It
keeps one *anchor*, an event index and its deadline; every other event is due at the anchor's
deadline plus the difference of their wall offsets at the current speed. So:

- **pause** remembers when; **resume** moves the anchor by the time paused, so every deadline
  is held and the next event comes as long after the resume as it was due after the pause (no
  burst of overdue events);
- **speed** re-bases: the next event's remaining wait is scaled by old speed / new speed and
  becomes the new anchor, and the events after it follow the offsets of the new speed (breaks
  keep their compressed length, as ``--speed`` gives them);
- **seek** asks the replay loop to start a new run at an event: the loop publishes the state
  before it and re-anchors there, now.

Pure: no asyncio and no I/O. A run's loop (simulator/_run.py) reads it before each event and
wakes on changes; tests drive it with plain numbers.

Named control for what moves it: a control command (its wire form is events/_control.py,
the sender matchcast/app/control.py, the command matchcast/cli/control.py) is applied here by
:func:`apply_command`, to the :class:`Playhead` of each match.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from events import ControlCommand, Event, MatchClock, PlaybackState

__all__ = ["Controlled", "Playback", "Playhead", "SeekError", "apply_command", "seek_index"]

#: Wall offsets of every event at a speed (None: maximum speed, all zeros).
OffsetsAt = Callable[[float | None], Sequence[float]]


class SeekError(ValueError):
    """A minute the match cannot go to; the message says which minutes it can."""


def seek_index(events: Sequence[Event], target: MatchClock, asked: str | None = None) -> int:
    """Index of the first event at or after ``target``.

    Args:
        asked: the minute as the command wrote it, for the error (default: the target's).

    Raises:
        SeekError: the target is past the match's last event; the message names the last
            minute played.
    """
    if not events:
        raise SeekError("the match has no events")
    last = events[-1].clock
    key = target.sort_key
    if key > last.sort_key:
        minute = (asked or target.label).strip().rstrip("'")
        raise SeekError(
            f"minute {minute} is past the end: the last minute played in "
            f"{events[-1].match_id} is {last.label}"
        )
    for i, event in enumerate(events):
        if event.clock.sort_key >= key:
            return i
    raise SeekError(f"minute {target.label} is outside the match")  # pragma: no cover


@dataclass(slots=True)
class Playhead:
    """Where one match is, and when each of its events is due.

    Attributes:
        offsets_at: the events' wall offsets at a given speed.
        speed: match seconds per wall second; None for as fast as the broker takes it.
        state: playing, paused or stopped.
        since: wall time (UTC) the state was entered.
        anchor_index: an event whose deadline is known...
        anchor_at: ...and that deadline, on the monotonic clock.
        next_index: the next event to publish (kept up to date by the replay loop).
        paused_at: monotonic time of the pause, while paused.
        seek_to: an event index a seek asked for, until the replay loop takes it.
        version: bumped on every change, so a waiting loop knows to look again.
    """

    offsets_at: OffsetsAt
    speed: float | None
    since: dt.datetime
    state: PlaybackState = "playing"
    anchor_index: int = 0
    anchor_at: float = 0.0
    next_index: int = 0
    paused_at: float | None = None
    seek_to: int | None = None
    version: int = 0
    offsets: Sequence[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.offsets = self.offsets_at(self.speed)

    def start(self, index: int, now: float) -> None:
        """Anchor event ``index`` at ``now``: it is due at once, the rest on schedule."""
        self.anchor_index = self.next_index = index
        self.anchor_at = now
        if self.paused_at is not None:
            self.paused_at = now

    def deadline(self, index: int) -> float:
        """When event ``index`` is due (while paused: as if resumed at the pause)."""
        if self.speed is None or index >= len(self.offsets):
            return self.anchor_at
        base = self.offsets[self.anchor_index] if self.anchor_index < len(self.offsets) else 0.0
        return self.anchor_at + self.offsets[index] - base

    def _changed(self, state: PlaybackState | None, wall: dt.datetime) -> None:
        if state is not None and state != self.state:
            self.state = state
            self.since = wall
        self.version += 1

    def pause(self, now: float, wall: dt.datetime) -> bool:
        """Hold every deadline from ``now``; False if not playing."""
        if self.state != "playing":
            return False
        self.paused_at = now
        self._changed("paused", wall)
        return True

    def resume(self, now: float, wall: dt.datetime) -> bool:
        """Go on from where the pause held the schedule; False if not paused."""
        if self.state != "paused" or self.paused_at is None:
            return False
        self.anchor_at += now - self.paused_at
        self.paused_at = None
        self._changed("playing", wall)
        return True

    def set_speed(self, speed: float | None, now: float, wall: dt.datetime) -> None:
        """Re-base the schedule on ``speed`` from the next event on."""
        at = self.paused_at if self.paused_at is not None else now
        nxt = self.next_index
        if self.speed is None or speed is None:
            due = at
        else:
            remaining = max(0.0, self.deadline(nxt) - at)
            due = at + remaining * self.speed / speed
        self.speed = speed
        self.offsets = self.offsets_at(speed)
        self.anchor_index, self.anchor_at = nxt, due
        self._changed(None, wall)

    def seek(self, index: int, wall: dt.datetime) -> None:
        """Ask the replay loop to start a new run at event ``index``."""
        self.seek_to = index
        self._changed(None, wall)

    def take_seek(self, now: float) -> int | None:
        """The index a seek asked for (once), re-anchored at ``now``."""
        index, self.seek_to = self.seek_to, None
        if index is not None:
            self.start(index, now)
        return index

    def stop(self, wall: dt.datetime) -> bool:
        """Stop the match for good; False if it already was."""
        if self.state == "stopped":
            return False
        self.paused_at = None
        self._changed("stopped", wall)
        return True


class Controlled(Protocol):
    """One match of a replayer, as a command sees it."""

    @property
    def playhead(self) -> Playhead:
        """Its schedule and state."""
        ...

    @property
    def events(self) -> Sequence[Event]:
        """Its events, in order."""
        ...

    @property
    def finished(self) -> bool:
        """Its replay is over: commands leave it alone."""
        ...

    def interrupt(self) -> None:
        """Wake the match's replay loop: its playhead changed."""
        ...


class Playback(Protocol):
    """The replayer as a whole: what a command without ``match`` changes, and what a match
    started later begins with."""

    state: PlaybackState
    speed: float | None
    since: dt.datetime


#: The replayer's state after a command for all its matches.
_STATE_AFTER: dict[str, PlaybackState] = {"pause": "paused", "resume": "playing", "stop": "stopped"}


def apply_command(
    whole: Playback,
    runs: Mapping[str, Controlled],
    command: ControlCommand,
    now: float,
    wall: dt.datetime,
) -> str | None:
    """Apply ``command`` to ``runs`` (all, or its ``match``) at monotonic ``now`` and wall time
    ``wall``; None when done, else why it was refused, with nothing changed."""
    if command.match is not None:
        run = runs.get(command.match)
        if run is None:
            known = ", ".join(runs) or "none yet"
            return f"no match {command.match!r} on this replayer (matches: {known})"
        targets = [run]
    else:
        targets = list(runs.values())
    live = [r for r in targets if not r.finished]
    match command.command:
        case "status":
            return None
        case "seek":
            target = command.target
            assert target is not None  # the model checked it
            if not live:
                return "no match is playing to seek in"
            try:
                indices = [(r, seek_index(r.events, target, command.minute)) for r in live]
            except SeekError as err:
                return str(err)
            for run, index in indices:
                run.playhead.seek(index, wall)
        case "pause":
            for run in live:
                run.playhead.pause(now, wall)
        case "resume":
            for run in live:
                run.playhead.resume(now, wall)
        case "speed":
            speed = None if command.speed == "max" else command.speed
            assert not isinstance(speed, str)
            for run in live:
                run.playhead.set_speed(speed, now, wall)
            if command.match is None:
                whole.speed = speed
        case "stop":
            for run in live:
                run.playhead.stop(wall)
    state = _STATE_AFTER.get(command.command)
    if command.match is None and state is not None and whole.state not in ("stopped", state):
        whole.state, whole.since = state, wall
    for run in live:
        run.interrupt()
    return None
