"""Seeded chaos: turn a match's timed stream into a misbehaving one, and say what was done.

Pure: no I/O, no clock, no global random state. :func:`apply_chaos` takes a match's events,
the wall offset of each (seconds after the replay starts) and the state before the first,
and returns the messages to send in order, each with its due time, a log of every fault
injected, and the true final state. The replayer and the load sender only send what it says.

The faults (``SPEC`` is a comma-separated list of them; each ``P`` is a probability per event
of the stream, drawn from a random stream of its own per fault, so adding one fault never
changes the decisions of another):

- ``duplicate=P``: the event is sent again after 1-10 later events;
- ``reorder=P[:WINDOW]``: the event swaps places with one up to WINDOW (default 3) events
  later; the later one goes out in the earlier one's slot, so it is early;
- ``drop=P``: the event is never sent (a gap); its state snapshot still is;
- ``delay=P:MS``: the event is held back MS wall milliseconds; later events overtake it;
- ``stale-state=P``: after the event's state, the state of 1-10 events earlier is sent
  again, not retained, as a broker's session queue would;
- ``restart=MINUTE``: at that match minute the match starts again from its first event, as
  a new run (``run`` larger by the wall milliseconds elapsed, at least 1);
- ``correction=P``: per goal, a fake goal is inserted after it and disallowed 0-3 events
  later (never across an event that carries the score), so the final score is unchanged;
- ``burst=MINUTE:SECONDS``: from that match minute, events due within SECONDS wall seconds
  are held and released at once when the SECONDS are up.

Corrections and restarts are extra *real* events (renumbered, contiguous seqs per run): they
are in the true stream, and the truth is its final state. Every other fault only re-sends,
omits, re-orders or re-times messages of that true stream.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from events import (
    Event,
    FullTime,
    Goal,
    GoalDisallowed,
    MatchClock,
    MatchState,
    PeriodEnd,
    apply,
)

__all__ = [
    "FAULTS",
    "ChaosSpec",
    "ChaosSpecError",
    "ChaosStream",
    "Emission",
    "Fault",
    "apply_chaos",
]

#: Every fault kind with the form it takes in a SPEC: one place, for parsing, errors and docs.
FAULTS: dict[str, str] = {
    "duplicate": "duplicate=P",
    "reorder": "reorder=P[:WINDOW]",
    "drop": "drop=P",
    "delay": "delay=P:MS",
    "stale-state": "stale-state=P",
    "restart": "restart=MINUTE",
    "correction": "correction=P",
    "burst": "burst=MINUTE:SECONDS",
}

_DUPLICATE_AFTER = (1, 10)
_STALE_BACK = (1, 10)
_CORRECTION_AFTER = (0, 3)


class ChaosSpecError(ValueError):
    """A SPEC that cannot be read; the message names the fault and the form expected."""


def _prob(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise ChaosSpecError(
            f"chaos fault {name!r}: {text!r} is not a probability from 0 to 1; "
            f"expected {FAULTS[name]}"
        )
    return value


def _number(name: str, text: str, what: str, *, integer: bool, low: float) -> float:
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        value = low - 1
    if value < low:
        kind = "a whole number" if integer else "a number"
        raise ChaosSpecError(
            f"chaos fault {name!r}: {what} {text!r} is not {kind} >= {low:g}; "
            f"expected {FAULTS[name]}"
        )
    return value


@dataclass(frozen=True, slots=True)
class ChaosSpec:
    """Which faults, how often. Parse one with :meth:`parse`; ``str()`` gives it back."""

    duplicate: float = 0.0
    reorder: float = 0.0
    reorder_window: int = 3
    drop: float = 0.0
    delay: float = 0.0
    delay_ms: float = 0.0
    stale_state: float = 0.0
    restart: int | None = None
    correction: float = 0.0
    burst: tuple[int, float] | None = None

    @classmethod
    def parse(cls, text: str) -> ChaosSpec:
        """Read ``duplicate=0.05,reorder=0.1:3,...``.

        Raises:
            ChaosSpecError: an unknown fault, a fault given twice, or a bad value.
        """
        values: dict[str, Any] = {}
        seen: set[str] = set()
        parts = [p.strip() for p in text.split(",")]
        if not any(parts):
            raise ChaosSpecError(
                f"empty chaos spec; expected faults like {', '.join(FAULTS.values())}"
            )
        for part in parts:
            name, eq, arg = part.partition("=")
            name = name.strip()
            if name not in FAULTS:
                raise ChaosSpecError(
                    f"unknown chaos fault {name!r} in {part!r}; known: {', '.join(FAULTS.values())}"
                )
            if not eq or not arg.strip():
                raise ChaosSpecError(f"chaos fault {name!r} needs a value; expected {FAULTS[name]}")
            if name in seen:
                raise ChaosSpecError(f"chaos fault {name!r} is given twice; expected it once")
            seen.add(name)
            head, colon, tail = arg.strip().partition(":")
            if name in ("duplicate", "drop", "stale-state", "correction") and colon:
                raise ChaosSpecError(f"chaos fault {name!r}: {arg!r}; expected {FAULTS[name]}")
            match name:
                case "duplicate" | "drop" | "correction":
                    values[name] = _prob(name, head)
                case "stale-state":
                    values["stale_state"] = _prob(name, head)
                case "reorder":
                    values["reorder"] = _prob(name, head)
                    if colon:
                        window = _number(name, tail, "WINDOW", integer=True, low=1)
                        values["reorder_window"] = int(window)
                case "delay":
                    if not colon:
                        raise ChaosSpecError(
                            f"chaos fault 'delay' needs MS after the probability; "
                            f"expected {FAULTS[name]}"
                        )
                    values["delay"] = _prob(name, head)
                    values["delay_ms"] = _number(name, tail, "MS", integer=False, low=0)
                case "restart":
                    if colon:
                        raise ChaosSpecError(
                            f"chaos fault 'restart': {arg!r}; expected {FAULTS[name]}"
                        )
                    values["restart"] = int(_number(name, head, "MINUTE", integer=True, low=1))
                case "burst":
                    if not colon:
                        raise ChaosSpecError(
                            f"chaos fault 'burst' needs SECONDS after the minute; "
                            f"expected {FAULTS[name]}"
                        )
                    minute = int(_number(name, head, "MINUTE", integer=True, low=1))
                    seconds = _number(name, tail, "SECONDS", integer=False, low=0)
                    values["burst"] = (minute, seconds)
        restart = values.get("restart")
        if restart is not None and restart > 120:
            raise ChaosSpecError(f"chaos fault 'restart': minute {restart} is past 120")
        if "burst" in values and values["burst"][0] > 120:
            raise ChaosSpecError(f"chaos fault 'burst': minute {values['burst'][0]} is past 120")
        return cls(**values)

    def __str__(self) -> str:
        parts = []
        if self.duplicate:
            parts.append(f"duplicate={self.duplicate:g}")
        if self.reorder:
            parts.append(f"reorder={self.reorder:g}:{self.reorder_window}")
        if self.drop:
            parts.append(f"drop={self.drop:g}")
        if self.delay:
            parts.append(f"delay={self.delay:g}:{self.delay_ms:g}")
        if self.stale_state:
            parts.append(f"stale-state={self.stale_state:g}")
        if self.restart is not None:
            parts.append(f"restart={self.restart}")
        if self.correction:
            parts.append(f"correction={self.correction:g}")
        if self.burst is not None:
            parts.append(f"burst={self.burst[0]}:{self.burst[1]:g}")
        return ",".join(parts)


@dataclass(frozen=True, slots=True)
class Emission:
    """One message to send.

    Attributes:
        kind: ``event`` (on the events topic) or ``state`` (on the state topic).
        event: the event, for ``kind == "event"``.
        state: the snapshot, for ``kind == "state"``.
        retain: publish retained (every state but a stale re-send).
        due: wall seconds after the start when to send it.
        scheduled: wall seconds after the start when it was due before any fault moved it:
            what ``scheduled_at`` says, so lateness shows a delay.
    """

    kind: Literal["event", "state"]
    event: Event | None
    state: MatchState | None
    retain: bool
    due: float
    scheduled: float

    @property
    def seq(self) -> int:
        """The event's seq, or the snapshot's ``last_seq``."""
        if self.event is not None:
            return self.event.seq
        assert self.state is not None
        return self.state.last_seq

    @property
    def run(self) -> int:
        """The run the message belongs to."""
        item = self.event if self.event is not None else self.state
        assert item is not None
        return item.run


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault injected: what, on which seq of which run, and when on the schedule.

    Attributes:
        fault: the fault kind, as in the SPEC (``stale-state``, ...).
        seq: the event it hit (see the module docstring for each kind).
        index: position of the message it concerns in the send order.
        at_s: wall seconds after the start the message is due.
        clock: the match clock of that event.
        detail: kind-specific facts (``after``, ``with_seq``, ``state_seq``, ...).
    """

    fault: str
    match_id: str
    run: int
    seq: int
    index: int
    at_s: float
    clock: str
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The fault as one JSON object (a line of ``--chaos-log``)."""
        return {
            "match_id": self.match_id,
            "run": self.run,
            "fault": self.fault,
            "seq": self.seq,
            "index": self.index,
            "at_s": round(self.at_s, 6),
            "clock": self.clock,
            **self.detail,
        }


@dataclass(frozen=True, slots=True)
class ChaosStream:
    """A faulted stream: what to send, what was injected, and the truth.

    Attributes:
        emissions: the messages, in send order (``due`` never decreases).
        faults: every fault injected, in send order.
        truth: the true final state: what a correct consumer ends with.
        runs: the runs of the stream, in order (two after a restart).
    """

    emissions: tuple[Emission, ...]
    faults: tuple[Fault, ...]
    truth: MatchState
    runs: tuple[int, ...]


@dataclass(slots=True)
class _Item:
    """One event of the true stream, before the send-side faults."""

    event: Event
    state: MatchState
    offset: float
    run_index: int


@dataclass(slots=True)
class _Pending:
    emission: Emission
    faults: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)


_SCORED = (Goal, GoalDisallowed, PeriodEnd, FullTime)


def _rngs(seed: int, key: str) -> dict[str, random.Random]:
    return {name: random.Random(f"matchcast-chaos/{seed}/{key}/{name}") for name in FAULTS}


def _corrected(
    events: Sequence[Event], offsets: Sequence[float], rng: random.Random, p: float, tag: str
) -> tuple[list[tuple[Event, float]], list[tuple[int, int, str]]]:
    """Insert a fake goal after each goal chosen (probability ``p``) and its disallowance.

    Returns the events (not yet renumbered) with offsets, and per correction the positions
    of the fake goal and of the disallowance in that list, and the fake goal's id.
    """
    out: list[tuple[Event, float]] = []
    pending: list[tuple[int, GoalDisallowed]] = []  # (events still to pass, the retraction)
    fixes: list[tuple[int, int, str]] = []
    fake_at: dict[str, int] = {}
    bonus: dict[str, int] = {}  # fake goals live now, per team

    def release(offset: float) -> None:
        for left, retraction in list(pending):
            if left <= 0:
                pending.remove((left, retraction))
                bonus[retraction.team] -= 1
                if not bonus[retraction.team]:
                    del bonus[retraction.team]
                fixes.append((fake_at[retraction.goal_id], len(out), retraction.goal_id))
                clock = out[-1][0].clock if out else retraction.clock
                out.append((retraction.model_copy(update={"clock": clock}), offset))

    for event, offset in zip(events, offsets, strict=True):
        if pending and isinstance(event, _SCORED):  # never carry a fake score across
            pending[:] = [(0, r) for _, r in pending]
            release(offset)
        out.append((event, offset))
        pending[:] = [(left - 1, r) for left, r in pending]
        release(offset)
        if isinstance(event, Goal) and rng.random() < p:
            teams = sorted(event.score)
            team = rng.choice(teams)
            after = rng.randint(*_CORRECTION_AFTER)
            goal_id = f"chaos-{tag}-{len(fake_at) + 1}"
            bonus[team] = bonus.get(team, 0) + 1
            real = dict(event.score)
            fake_score = {t: n + bonus.get(t, 0) for t, n in real.items()}
            fake = Goal(
                match_id=event.match_id,
                run=event.run,
                seq=event.seq,
                clock=event.clock,
                emitted_at=event.emitted_at,
                goal_id=goal_id,
                team=team,
                scorer="Phantom (matchcast chaos)",
                detail="injected by --chaos correction; disallowed a few events later",
                score=fake_score,
            )
            fake_at[goal_id] = len(out)
            out.append((fake, offset))
            retraction = GoalDisallowed(
                match_id=event.match_id,
                run=event.run,
                seq=event.seq,
                clock=event.clock,
                emitted_at=event.emitted_at,
                goal_id=goal_id,
                team=team,
                reason="overturned after review (matchcast chaos correction)",
                score=real,
            )
            pending.append((after, retraction))
            release(offset)
    if pending:
        pending[:] = [(0, r) for _, r in pending]
        release(out[-1][1] if out else 0.0)
    return out, fixes


def apply_chaos(  # noqa: PLR0915 - one pass per stage, in order; split, it reads worse
    events: Sequence[Event],
    offsets: Sequence[float],
    initial: MatchState,
    spec: ChaosSpec,
    *,
    seed: int,
    key: str,
    run: int,
) -> ChaosStream:
    """The faulted stream of one match.

    Args:
        events: the match's events from where the replay starts, in order.
        offsets: per event, wall seconds after the start when it is due (all 0 at max speed).
        initial: the state before ``events[0]``.
        spec: the faults.
        seed: the seed; with ``key``, it decides every fault.
        key: names this stream among others of the same seed (the match id, or a load copy).
        run: the run of the stream; a restart's run is larger.
    """
    if len(events) != len(offsets):
        raise ValueError(f"{len(events)} events but {len(offsets)} offsets")
    rng = _rngs(seed, key)
    match_id = initial.match_id
    origin = offsets[0] if offsets else 0.0
    rel = [o - origin for o in offsets]
    log: list[tuple[str, int, int, dict[str, Any]]] = []  # (fault, logical index, run, detail)

    # 1. The true stream: restart (a second run), corrections, renumbered and folded.
    segments: list[tuple[int, list[Event], list[float]]] = [(run, list(events), rel)]
    restart_note: tuple[int, int] | None = None
    if spec.restart is not None and events:
        at = MatchClock.at(min(spec.restart, 120)).sort_key
        cut = next((i for i, e in enumerate(events) if e.clock.sort_key >= at), None)
        if cut:  # not before the first event, and reached at all
            t_cut = rel[cut]
            new_run = run + max(1, round(t_cut * 1000))
            segments = [
                (run, list(events[:cut]), rel[:cut]),
                (new_run, list(events), [t_cut + o for o in rel]),
            ]
            restart_note = (cut, new_run)
    items: list[_Item] = []
    run_starts: list[tuple[int, MatchState]] = []  # (logical index, state before the run)
    for r, (run_id, evs, offs) in enumerate(segments):
        first_seq = evs[0].seq if evs else initial.last_seq + 1
        fixed, fixes = _corrected(
            [e.model_copy(update={"run": run_id}) for e in evs],
            offs,
            rng["correction"],
            spec.correction,
            f"r{r + 1}",
        )
        state = initial.model_copy(update={"run": run_id})
        base = len(items)
        run_starts.append((base, state))
        for n, (unnumbered, offset) in enumerate(fixed):
            event = unnumbered.model_copy(update={"seq": first_seq + n})
            state = apply(state, event)
            items.append(_Item(event, state, offset, r))
        for fake, retracted, goal_id in fixes:
            log.append(
                (
                    "correction",
                    base + fake,
                    run_id,
                    {"goal_id": goal_id, "disallowed_seq": first_seq + retracted},
                )
            )
    if restart_note is not None:
        cut, new_run = restart_note
        start_b = run_starts[1][0]
        log.append(
            (
                "restart",
                start_b,
                new_run,
                {
                    "minute": spec.restart,
                    "previous_run": run,
                    "previous_last_seq": items[start_b - 1].event.seq if start_b else 0,
                },
            )
        )
    truth = items[-1].state if items else initial.model_copy(update={"run": run})

    # 2. Send-side decisions, one draw per event and fault, on the true stream.
    n = len(items)
    dropped = [False] * n
    for i in range(n):
        if rng["drop"].random() < spec.drop:
            dropped[i] = True
            log.append(("drop", i, items[i].event.run, {}))
    order = list(range(n))  # order[slot] = logical event sent in that slot
    moved = [False] * n
    for i in range(n):
        if rng["reorder"].random() >= spec.reorder:
            continue
        j = i + rng["reorder"].randint(1, spec.reorder_window)
        if (
            j >= n
            or moved[i]
            or moved[j]
            or dropped[i]
            or dropped[j]
            or items[j].run_index != items[i].run_index
        ):
            continue
        moved[i] = moved[j] = True
        order[i], order[j] = order[j], order[i]
        log.append(("reorder", i, items[i].event.run, {"with_seq": items[j].event.seq}))
    slot_of = [0] * n  # the inverse of order
    for slot, i in enumerate(order):
        slot_of[i] = slot
    dup_after: dict[int, list[int]] = {}  # slot -> logical events re-sent after it
    for i in range(n):
        if rng["duplicate"].random() >= spec.duplicate:
            continue
        k = rng["duplicate"].randint(*_DUPLICATE_AFTER)
        if dropped[i]:
            continue
        slot = min(slot_of[i] + k, n - 1)
        dup_after.setdefault(slot, []).append(i)
    stale_after: dict[int, int] = {}  # slot -> logical index of the older state
    for i in range(n):
        if rng["stale-state"].random() >= spec.stale_state:
            continue
        k = rng["stale-state"].randint(*_STALE_BACK)
        start = run_starts[items[i].run_index][0]
        if i - start < 1:
            continue
        stale_after[i] = max(start, i - k)
    delayed = [False] * n
    for i in range(n):
        if rng["delay"].random() < spec.delay and not dropped[i]:
            delayed[i] = True

    # 3. The messages in slot order, each fault noted on the message it concerns.
    pending: list[_Pending] = []
    starts = dict(run_starts[1:])
    for slot in range(n):
        item = items[slot]
        if slot in starts:  # a restart: the new run's snapshot before its first event
            st = starts[slot]
            pending.append(_Pending(Emission("state", None, st, True, item.offset, item.offset)))
        i = order[slot]
        sent = items[i]
        if not dropped[i]:
            p = _Pending(Emission("event", sent.event, None, False, item.offset, sent.offset))
            pending.append(p)
            if delayed[i]:
                p.emission = replace(p.emission, due=item.offset + spec.delay_ms / 1000)
                p.faults.append(("delay", i, {"ms": spec.delay_ms}))
        pending.append(
            _Pending(Emission("state", None, item.state, True, item.offset, item.offset))
        )
        if slot in stale_after:
            old = items[stale_after[slot]].state
            pending.append(
                _Pending(
                    Emission("state", None, old, False, item.offset, item.offset),
                    [("stale-state", slot, {"state_seq": old.last_seq})],
                )
            )
        for d in dup_after.get(slot, ()):
            copy = items[d]
            after = slot - slot_of[d]
            pending.append(
                _Pending(
                    Emission("event", copy.event, None, False, item.offset, copy.offset),
                    [("duplicate", d, {"after": after})],
                )
            )

    # 4. A burst holds what falls due in its window, then lets it all go at once.
    burst_note: tuple[int, dict[str, Any]] | None = None
    if spec.burst is not None:
        minute, seconds = spec.burst
        at = MatchClock.at(minute).sort_key
        first = next((k for k, p in enumerate(pending) if _clock_key(p.emission) >= at), None)
        if first is not None:
            t0 = pending[first].emission.due
            release = t0 + seconds
            held = 0
            for p in pending[first:]:
                if p.emission.due < release:
                    p.emission = replace(p.emission, due=release)
                    held += p.emission.kind == "event"
            burst_note = (first, {"minute": minute, "seconds": seconds, "held_events": held})

    # 5. Send in due order (stable), and place each fault on its message.
    ranked = sorted(range(len(pending)), key=lambda k: pending[k].emission.due)
    position = {k: pos for pos, k in enumerate(ranked)}
    emissions = tuple(pending[k].emission for k in ranked)
    faults: list[Fault] = []
    first_event_pos: dict[tuple[int, int], int] = {}
    for pos, e in enumerate(emissions):
        if e.event is not None:
            first_event_pos.setdefault((e.event.run, e.event.seq), pos)

    def record(fault: str, i: int, run_id: int, detail: dict[str, Any], pos: int | None) -> None:
        event = items[i].event
        if pos is None:
            pos = first_event_pos.get((event.run, event.seq))
        if pos is None:  # a dropped event: where its state went out
            pos = next(k for k, e in enumerate(emissions) if e.state is items[i].state and e.retain)
        faults.append(
            Fault(
                fault=fault,
                match_id=match_id,
                run=run_id,
                seq=event.seq,
                index=pos,
                at_s=emissions[pos].due,
                clock=event.clock.label,
                detail=detail,
            )
        )

    for fault, i, run_id, detail in log:
        if fault == "restart":
            pos = next(k for k, e in enumerate(emissions) if e.run == run_id)
            record(fault, i, run_id, detail, pos)
        else:
            record(fault, i, run_id, detail, None)
    for k, p in enumerate(pending):
        for fault, i, detail in p.faults:
            record(fault, i, items[i].event.run, detail, position[k])
    if burst_note is not None:
        k, detail = burst_note
        e = pending[k].emission
        i = next(
            n_ for n_, it in enumerate(items) if it.event.seq == e.seq and it.event.run == e.run
        )
        record("burst", i, e.run, detail, position[k])
    faults.sort(key=lambda f: (f.index, list(FAULTS).index(f.fault)))
    return ChaosStream(
        emissions=emissions,
        faults=tuple(faults),
        truth=truth,
        runs=tuple(run_id for run_id, _, _ in segments),
    )


def _clock_key(emission: Emission) -> tuple[int, int, int]:
    if emission.event is not None:
        return emission.event.clock.sort_key
    assert emission.state is not None
    clock = emission.state.clock
    return clock.sort_key if clock is not None else (0, 0, 0)
