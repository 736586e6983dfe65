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

This is the transform; its SPEC is parsed in simulator/_chaos_spec.py, the replayer sends what
it makes through simulator/_chaos_sender.py, and the load tester's matchcast/load/_chaos.py
(the other ``_chaos.py``) applies it to each copy of a match in a load test.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from events import (
    LAST_MINUTE,
    Event,
    FullTime,
    Goal,
    GoalDisallowed,
    MatchClock,
    MatchState,
    PeriodEnd,
    apply,
)
from simulator._chaos_spec import FAULTS, ChaosSpec

__all__ = [
    "ChaosStream",
    "Emission",
    "Fault",
    "apply_chaos",
]

_DUPLICATE_AFTER = (1, 10)
_STALE_BACK = (1, 10)
_CORRECTION_AFTER = (0, 3)


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


#: A fault noted on the true stream: (kind, index of the event in it, run, detail).
_Note = tuple[str, int, int, dict[str, Any]]


@dataclass(slots=True)
class _TrueStream:
    """The stream as it really happened: one or two runs, corrections in, renumbered."""

    items: list[_Item]
    run_starts: list[tuple[int, MatchState]]  # (index of the run's first event, state before)
    runs: tuple[int, ...]
    notes: list[_Note]


@dataclass(slots=True)
class _Decisions:
    """The send-side faults decided for each event of the true stream."""

    dropped: list[bool]
    order: list[int]  # order[slot]: the event sent in that slot
    slot_of: list[int]  # the inverse of order
    dup_after: dict[int, list[int]]  # slot -> events sent again after it
    stale_after: dict[int, int]  # slot -> event whose (older) state is sent again after it
    delayed: list[bool]


def apply_chaos(
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
    origin = offsets[0] if offsets else 0.0
    rel = [o - origin for o in offsets]
    true = _true_stream(list(events), rel, initial, spec, rng["correction"], run)
    decisions = _decide(true, spec, rng)
    pending = _messages(true, decisions, spec)
    burst = _burst(pending, spec)
    emissions, faults = _place(true, pending, burst, initial.match_id)
    truth = true.items[-1].state if true.items else initial.model_copy(update={"run": run})
    return ChaosStream(emissions=emissions, faults=faults, truth=truth, runs=true.runs)


def _true_stream(
    events: list[Event],
    rel: list[float],
    initial: MatchState,
    spec: ChaosSpec,
    rng: random.Random,
    run: int,
) -> _TrueStream:
    """Restart (a second run from the first event), corrections; renumbered and folded."""
    segments: list[tuple[int, list[Event], list[float]]] = [(run, events, rel)]
    if spec.restart is not None and events:
        at = MatchClock.at(min(spec.restart, LAST_MINUTE)).sort_key
        cut = next((i for i, e in enumerate(events) if e.clock.sort_key >= at), None)
        if cut:  # not before the first event, and reached at all
            new_run = run + max(1, round(rel[cut] * 1000))
            segments = [
                (run, events[:cut], rel[:cut]),
                (new_run, events, [rel[cut] + o for o in rel]),
            ]
    true = _TrueStream([], [], tuple(r for r, _, _ in segments), [])
    for r, (run_id, evs, offs) in enumerate(segments):
        first_seq = evs[0].seq if evs else initial.last_seq + 1
        fixed, fixes = _corrected(
            [e.model_copy(update={"run": run_id}) for e in evs],
            offs,
            rng,
            spec.correction,
            f"r{r + 1}",
        )
        state = initial.model_copy(update={"run": run_id})
        base = len(true.items)
        true.run_starts.append((base, state))
        for n, (unnumbered, offset) in enumerate(fixed):
            event = unnumbered.model_copy(update={"seq": first_seq + n})
            state = apply(state, event)
            true.items.append(_Item(event, state, offset, r))
        for fake, retracted, goal_id in fixes:
            detail = {"goal_id": goal_id, "disallowed_seq": first_seq + retracted}
            true.notes.append(("correction", base + fake, run_id, detail))
    if len(segments) == 2:
        start = true.run_starts[1][0]
        detail = {
            "minute": spec.restart,
            "previous_run": run,
            "previous_last_seq": true.items[start - 1].event.seq if start else 0,
        }
        true.notes.append(("restart", start, segments[1][0], detail))
    return true


def _decide(true: _TrueStream, spec: ChaosSpec, rng: dict[str, random.Random]) -> _Decisions:
    """One draw per event and fault (more only where a fault fires), on the true stream."""
    items, notes = true.items, true.notes
    n = len(items)
    dropped = [rng["drop"].random() < spec.drop for _ in range(n)]
    notes.extend(("drop", i, items[i].event.run, {}) for i in range(n) if dropped[i])
    order = list(range(n))
    moved = [False] * n
    for i in range(n):
        if rng["reorder"].random() >= spec.reorder:
            continue
        j = i + rng["reorder"].randint(1, spec.reorder_window)
        if j >= n or moved[i] or moved[j] or dropped[i] or dropped[j]:
            continue
        if items[j].run_index != items[i].run_index:
            continue
        moved[i] = moved[j] = True
        order[i], order[j] = order[j], order[i]
        notes.append(("reorder", i, items[i].event.run, {"with_seq": items[j].event.seq}))
    slot_of = [0] * n
    for slot, i in enumerate(order):
        slot_of[i] = slot
    dup_after: dict[int, list[int]] = {}
    for i in range(n):
        if rng["duplicate"].random() >= spec.duplicate:
            continue
        k = rng["duplicate"].randint(*_DUPLICATE_AFTER)
        if not dropped[i]:
            dup_after.setdefault(min(slot_of[i] + k, n - 1), []).append(i)
    stale_after: dict[int, int] = {}
    for i in range(n):
        if rng["stale-state"].random() >= spec.stale_state:
            continue
        k = rng["stale-state"].randint(*_STALE_BACK)
        start = true.run_starts[items[i].run_index][0]
        if i - start >= 1:
            stale_after[i] = max(start, i - k)
    delayed = [rng["delay"].random() < spec.delay and not dropped[i] for i in range(n)]
    return _Decisions(dropped, order, slot_of, dup_after, stale_after, delayed)


def _messages(true: _TrueStream, d: _Decisions, spec: ChaosSpec) -> list[_Pending]:
    """The messages in slot order, each send-side fault noted on the message it concerns.

    Per slot: the new run's snapshot (after a restart), the event of the slot (swapped by a
    reorder, absent if dropped, re-timed if delayed), the state after the slot's event
    (states stay in order), a stale state, then the duplicates due after this slot.
    """
    items = true.items
    pending: list[_Pending] = []
    starts = dict(true.run_starts[1:])
    for slot, item in enumerate(items):
        at = item.offset
        if slot in starts:
            pending.append(_Pending(Emission("state", None, starts[slot], True, at, at)))
        i = d.order[slot]
        if not d.dropped[i]:
            p = _Pending(Emission("event", items[i].event, None, False, at, items[i].offset))
            if d.delayed[i]:
                p.emission = replace(p.emission, due=at + spec.delay_ms / 1000)
                p.faults.append(("delay", i, {"ms": spec.delay_ms}))
            pending.append(p)
        pending.append(_Pending(Emission("state", None, item.state, True, at, at)))
        if slot in d.stale_after:
            old = items[d.stale_after[slot]].state
            stale = Emission("state", None, old, False, at, at)
            pending.append(_Pending(stale, [("stale-state", slot, {"state_seq": old.last_seq})]))
        for dup in d.dup_after.get(slot, ()):
            again = Emission("event", items[dup].event, None, False, at, items[dup].offset)
            after = {"after": slot - d.slot_of[dup]}
            pending.append(_Pending(again, [("duplicate", dup, after)]))
    return pending


def _burst(pending: list[_Pending], spec: ChaosSpec) -> tuple[int, dict[str, Any]] | None:
    """Hold what falls due in the burst's window, then let it all go at once."""
    if spec.burst is None:
        return None
    minute, seconds = spec.burst
    at = MatchClock.at(minute).sort_key
    first = next((k for k, p in enumerate(pending) if _clock_key(p.emission) >= at), None)
    if first is None:
        return None
    release = pending[first].emission.due + seconds
    held = 0
    for p in pending[first:]:
        if p.emission.due < release:
            p.emission = replace(p.emission, due=release)
            held += p.emission.kind == "event"
    return first, {"minute": minute, "seconds": seconds, "held_events": held}


def _place(
    true: _TrueStream,
    pending: list[_Pending],
    burst: tuple[int, dict[str, Any]] | None,
    match_id: str,
) -> tuple[tuple[Emission, ...], tuple[Fault, ...]]:
    """Send in due order (a stable sort), and place each fault on its message."""
    items = true.items
    ranked = sorted(range(len(pending)), key=lambda k: pending[k].emission.due)
    position = {k: pos for pos, k in enumerate(ranked)}
    emissions = tuple(pending[k].emission for k in ranked)
    first_event_pos: dict[tuple[int, int], int] = {}
    state_pos: dict[int, int] = {}  # id of a true state -> where it went out, retained
    for pos, e in enumerate(emissions):
        if e.event is not None:
            first_event_pos.setdefault((e.event.run, e.event.seq), pos)
        elif e.retain:
            state_pos.setdefault(id(e.state), pos)
    faults: list[Fault] = []

    def record(fault: str, i: int, run_id: int, detail: dict[str, Any], pos: int) -> None:
        event = items[i].event
        faults.append(
            Fault(fault, match_id, run_id, event.seq, pos, emissions[pos].due, event.clock.label,
                  detail)
        )  # fmt: skip

    for fault, i, run_id, detail in true.notes:
        if fault == "restart":  # where the new run's snapshot went out
            pos = next(k for k, e in enumerate(emissions) if e.run == run_id)
        else:  # where the event went out; if it was dropped, where its state did
            got = first_event_pos.get((items[i].event.run, items[i].event.seq))
            pos = got if got is not None else state_pos[id(items[i].state)]
        record(fault, i, run_id, detail, pos)
    for k, p in enumerate(pending):
        for fault, i, detail in p.faults:
            record(fault, i, items[i].event.run, detail, position[k])
    if burst is not None:
        k, detail = burst
        e = pending[k].emission
        i = next(n for n, it in enumerate(items) if (it.event.run, it.event.seq) == (e.run, e.seq))
        record("burst", i, e.run, detail, position[k])
    faults.sort(key=lambda f: (f.index, list(FAULTS).index(f.fault)))
    return emissions, tuple(faults)


def _clock_key(emission: Emission) -> tuple[int, int, int]:
    if emission.event is not None:
        return emission.event.clock.sort_key
    assert emission.state is not None
    clock = emission.state.clock
    return clock.sort_key if clock is not None else (0, 0, 0)
