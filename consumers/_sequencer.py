"""Per-match delivery rules: what an incoming event or snapshot means for the handlers.

A :class:`Sequencer` keeps one match's state (the reducer's output) and turns what arrives into
*deliveries*: ``(event, state after it)`` for the event handlers, or ``(None, state)`` for the
``on_state`` handlers. Every message carries the replay *run* it belongs to (its start in ms;
ordered, see docs/wire-format.md) and its seq within the run. The rules, applied before any
handler runs, compare the run first, then the seq; nothing ever rewinds the state:

- a message of an older run than the one applied is stale (a broker redelivering a session
  queue or a saved message) and dropped, counted as ``stale``;
- a message of a newer run is a real restart: the match starts again from that run's
  snapshot (or its kick-off), logged ``match.restarted``;
- within a run, an event whose seq was already applied (a QoS 1 redelivery, a replayer's
  re-sent window) is dropped, and a snapshot with ``last_seq`` not past the state is ignored;
- an event past the next seq is *early* (a reordering overtook the one before it): it is held,
  with any later ones, until the missing seqs arrive, and then all are delivered in order,
  each once (``reordered``). The wait is bounded: past ``window`` events held, when the runner
  calls :meth:`Sequencer.release` (its timer of ``reorder_wait`` seconds, started by
  ``on_wait``), or when a snapshot at or past every seq held arrives, the missing seqs are
  taken for lost: a gap;
- a gap is reported, the events held are applied, and the state is replaced by the next
  snapshot of the run that covers them;
- once the run's ``full_time`` (or ``replay_stopped``) is applied, no later event of that run
  is taken (``after_end``);
- a retained snapshot seeds the state of a match joined mid-way, so nothing is counted twice;
- an event that arrives before any state of its match (a persistent session resuming: the
  broker sends what it queued before the retained snapshot) is held until the snapshot
  published right after it arrives, then delivered with it.

Payloads of schema 1.0 carry no run (read as run 0). Between two run-0 messages the old guess
still applies, as the only one there is: an event with an old seq emitted after everything
applied, and a live snapshot older than the state, start the match again.

No I/O and no asyncio: the runner feeds it and queues what it returns.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from consumers._score import with_score_dict
from events import (
    Event,
    FullTime,
    MatchState,
    ReplayStopped,
    SequenceCheck,
    apply,
    check_sequence,
)
from events._state import share_fields

__all__ = ["HOLD_LIMIT", "REORDER_WINDOW", "Delivery", "RunnerStats", "Sequencer"]

_log = structlog.get_logger("matchcast.consumer")

#: Events held for a match with no state yet before giving up on a snapshot arriving.
HOLD_LIMIT = 32
#: Events held past a missing seq, by default, before it is taken for lost (a gap).
REORDER_WINDOW = 16

#: The events that end a run, and the statuses of a state whose run is over.
_ENDS = (FullTime, ReplayStopped)
_ENDED = ("finished", "stopped")

#: ``(event, state after it)`` for event handlers; ``(None, state)`` for ``on_state``.
Delivery = tuple[Event | None, MatchState]


@dataclass(slots=True)
class RunnerStats:
    """Counters of one runner, for logs, tests and metrics."""

    received: int = 0
    events: int = 0
    snapshots: int = 0
    rejected: int = 0
    duplicates: int = 0
    gaps: int = 0
    reordered: int = 0
    missing: int = 0
    resyncs: int = 0
    restarts: int = 0
    stale: int = 0
    after_end: int = 0
    unknown_skipped: int = 0
    evicted: int = 0
    handled: int = 0
    handler_errors: int = 0
    handler_timeouts: int = 0
    overflowed: int = 0
    catch_ups: int = 0
    dead_lettered: int = 0
    #: Dead letters the broker refused (MQTT 5 reason >= 0x80, e.g. its ACL): not delivered.
    dead_letters_refused: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counters by name."""
        return {k: getattr(self, k) for k in self.__slots__}


#: Older runs whose drops :class:`Sequencer` remembers having said.
_SUPERSEDED_KEPT = 8


@dataclass(slots=True)
class Sequencer:
    """The state of one match and the rules in the module docstring.

    Attributes:
        state: the state as of the last delivery; None before any (or after a restart).
        run: the run applied (or held, or ended); 0 until a message of a run arrives.
        ended: the run's full time was applied: no later event of ``run`` is taken.
    """

    match_id: str
    stats: RunnerStats
    state: MatchState | None = None
    run: int = 0
    ended: bool = False
    resync_from: int | None = None  # a snapshot with last_seq >= this replaces the state
    #: The expected snapshot may pass over events nobody reported missing yet (a connection
    #: that resumed no session: :func:`consumers._latejoin.expect_snapshots`): if it does,
    #: that is a gap, counted when it comes.
    uncounted: bool = False
    held: list[Event] = field(default_factory=list)
    #: Events (None: a skipped unknown type) that came past a missing seq, by seq.
    early: dict[int, Event | None] = field(default_factory=dict)
    #: Events held in ``early`` before the missing seqs are taken for lost; 0: none held.
    window: int = REORDER_WINDOW
    last_emitted: dt.datetime | None = None  # only the run-0 guess needs it
    #: Called once each time a run ends (its full time applied or adopted): the runner
    #: starts the match's grace period then, with nothing to check per message.
    on_end: Callable[[], None] | None = None
    #: Called with True when events start waiting in ``early`` and False when the wait ends:
    #: the runner starts and stops its timer (it calls :meth:`release` when it fires).
    on_wait: Callable[[bool], None] | None = None
    #: The older runs whose messages were said to be dropped (``match.run_superseded``), the
    #: latest few: each is said once, not once per message.
    superseded: list[int] = field(default_factory=list)

    def _ended_if(self, finished: bool) -> None:
        self.ended = finished
        if finished and self.on_end is not None:
            self.on_end()

    def _run_of(self, run: int, seq: int, stale_log: str) -> bool:
        """Sort a message by its run: False (and counted) when stale; a newer run restarts."""
        if run == self.run:
            return True
        if run < self.run:
            self.stats.stale += 1
            if run in self.superseded:
                _log.debug(stale_log, match_id=self.match_id, run=run, seq=seq, applied=self.run)
                return False
            self.superseded = [*self.superseded[-(_SUPERSEDED_KEPT - 1) :], run]
            # Once per older run: another replayer still publishing the match (the newest
            # run wins), or a session's backlog from before a seek or a restart.
            _log.warning(
                "match.run_superseded",
                match_id=self.match_id,
                run=run,
                following=self.run,
                first_dropped=stale_log.split(".", maxsplit=1)[0],
                seq=seq,
                dropping="every message of the older run (the rest logged at debug)",
            )
            return False
        if self.state is not None or self.held or self.ended:
            self._restart(run)
        self.run = run
        return True

    def on_snapshot(self, snapshot: MatchState, *, retained: bool = True) -> list[Delivery]:
        """What a state snapshot of this match means; ``retained`` as the broker flagged it."""
        self.stats.snapshots += 1
        if not self._run_of(snapshot.run, snapshot.last_seq, "state.stale_dropped"):
            return []
        snapshot = with_score_dict(snapshot)
        log = _log.bind(match_id=self.match_id, run=self.run, seq=snapshot.last_seq)
        if (
            self.run == 0
            and not retained
            and self.state is not None
            and snapshot.last_seq < self.state.last_seq
        ):
            # Schema 1.0's guess, without a run to go by: a replay started again (``--from``).
            self._restart(0)
        if self.state is None:
            if self.ended:  # what the runner forgot after full time: still over
                self.stats.stale += 1
                log.info("state.stale_dropped", reason="run ended")
                return []
            held, self.held = self.held, []
            self.state = snapshot = share_fields(snapshot)  # kept for the match
            self._ended_if(snapshot.status in _ENDED)
            out: list[Delivery]
            if held and held[0].seq == snapshot.last_seq:
                # The state published right after the first event we hold: resume with both.
                log.info("state.synchronised", reason="resumed", score=snapshot.scoreline)
                self.last_emitted = held[0].emitted_at
                out = [(held[0], snapshot)]
                held = held[1:]
            else:
                log.info("state.synchronised", reason="joined", score=snapshot.scoreline)
                out = [(None, snapshot)]
            for event in held:
                out += self._sequence(event)
            return out
        out = []
        if self.early and snapshot.last_seq >= max(self.early):
            out = self._release_early()  # it says all we wait for: the missing ones are lost
        if self.resync_from is not None and snapshot.last_seq >= self.resync_from:
            if self.uncounted and snapshot.last_seq > self.state.last_seq:
                self._passed_over(self.state.last_seq + 1, snapshot.last_seq)
            self.uncounted = False
            self.state = snapshot = share_fields(snapshot)  # kept for the match
            self._ended_if(snapshot.status in _ENDED)
            self.resync_from = None
            self.stats.resyncs += 1
            log.info("state.synchronised", reason="gap", score=snapshot.scoreline)
            out.append((None, snapshot))
            if self.early:  # still waiting past an earlier gap: what it covers is done
                for seq in [s for s in self.early if s <= snapshot.last_seq]:
                    del self.early[seq]
                    self.stats.duplicates += 1
                out = self._drain(out)
            return out
        return out  # within the run, never back: an old or redelivered snapshot changes nothing

    def on_event(self, event: Event) -> list[Delivery]:
        """What an event of this match means."""
        self.stats.events += 1
        if event.run != self.run and not self._run_of(event.run, event.seq, "event.stale_dropped"):
            return []
        if self.run == 0 and self._is_new_run(event):
            self._restart(0)
        if self.ended and (self.state is None or event.seq > self.state.last_seq):
            self.stats.after_end += 1
            _log.info(
                "event.after_end_refused",
                match_id=self.match_id,
                run=self.run,
                seq=event.seq,
                type=event.type,
            )
            return []
        if self.state is None:
            if event.seq > 1:
                self.held.append(event)
                if len(self.held) <= HOLD_LIMIT:
                    _log.debug(
                        "event.held", match_id=self.match_id, seq=event.seq, held=len(self.held)
                    )
                    return []
                return self.release()
            self.state = MatchState.new(event.match_id, run=self.run)
            if self.held:  # they overtook the kick-off: they follow it, in order
                held, self.held = self.held, []
                out = self._sequence(event)
                for early in sorted(held, key=lambda e: e.seq):
                    out += self._sequence(early)
                return out
        return self._sequence(event)

    def on_unknown(self, seq: int, run: int) -> list[Delivery]:
        """A newer minor's event of a type this build does not know: skip it, in place.

        When it is the next seq of the run, the state moves past it (no handler runs), so the
        event after it is not taken for a gap; the events held behind it then follow. An early
        one is held as a blank, passed over in its turn.
        """
        state = self.state
        if run != self.run or state is None or self.ended:
            return []
        if seq == state.last_seq + 1:
            self.state = state.model_copy(update={"last_seq": seq})
            return self._drain([]) if self.early else []
        if seq > state.last_seq + 1 and self.window and seq not in self.early:
            return self._hold(seq, None)
        return []

    def release(self) -> list[Delivery]:
        """Stop waiting: for a snapshot (deliver the held events from an empty state) and for
        the missing seqs before the early events (a gap, see the module docstring)."""
        out: list[Delivery] = []
        if self.held:
            _log.warning("state.snapshot_missing", match_id=self.match_id, held=len(self.held))
            held, self.held = self.held, []
            self.state = MatchState.new(self.match_id, run=self.run)
            out = [d for event in held for d in self._sequence(event)]
        if self.early:
            out += self._release_early()
        return out

    def _is_new_run(self, event: Event) -> bool:
        """Schema 1.0's guess (run 0 on both sides): an old seq emitted after all applied."""
        if self.state is None or event.seq > self.state.last_seq:
            return False
        # A redelivery was emitted with an event applied already; a new run, after all of them.
        # Without an event applied yet (joined from a snapshot) only a kick-off says so.
        if self.last_emitted is None:
            return event.seq == 1
        return event.emitted_at > self.last_emitted

    def _restart(self, run: int) -> None:
        self.stats.restarts += 1
        _log.info(
            "match.restarted",
            match_id=self.match_id,
            last_seq=self.state.last_seq if self.state is not None else 0,
            run=self.run,
            new_run=run,
        )
        self.state, self.resync_from, self.last_emitted, self.held = None, None, None, []
        self.uncounted = False
        self.ended = False
        if self.early:
            self.early = {}
            if self.on_wait is not None:
                self.on_wait(False)

    def _hold(self, seq: int, event: Event | None) -> list[Delivery]:
        """Hold an early event (None: an unknown type's seq) until the seqs before it come."""
        early = self.early
        if not early and self.on_wait is not None:
            self.on_wait(True)
        early[seq] = event
        _log.debug("event.held", match_id=self.match_id, seq=seq, reason="early", held=len(early))
        if len(early) > self.window:
            return self._release_early()
        return []

    def _drain(self, out: list[Delivery]) -> list[Delivery]:
        """After the next seq was applied: deliver the early events that now follow, in order."""
        early = self.early
        state = self.state
        assert state is not None
        while early and (nxt := state.last_seq + 1) in early:
            event = early.pop(nxt)
            if event is None:  # an unknown type's seq, passed over
                self.state = state = state.model_copy(update={"last_seq": nxt})
                continue
            self.stats.reordered += 1
            delivered = self._apply(event)
            out += delivered
            state = delivered[0][1]
            if self.ended:
                self._refuse_after_end(early)
                break
        if not early and self.on_wait is not None:
            self.on_wait(False)
        return out

    def _release_early(self) -> list[Delivery]:
        """Stop waiting for the missing seqs: the early events are applied, past a gap."""
        early, self.early = self.early, {}
        if self.on_wait is not None:
            self.on_wait(False)
        out: list[Delivery] = []
        state = self.state
        for seq in sorted(early):
            event = early[seq]
            assert state is not None
            if self.ended:
                self._refuse_after_end({seq: event})
                continue
            if event is None:  # an unknown type's seq: passed over, past the gap if any
                if seq > state.last_seq:
                    if seq > state.last_seq + 1:
                        self._gap(check_sequence(state, seq), seq)
                    self.state = state = state.model_copy(update={"last_seq": seq})
                continue
            out += self._apply(event) if event.seq == state.last_seq + 1 else self._unordered(event)
            state = self.state
        return out

    def _refuse_after_end(self, early: dict[int, Event | None]) -> None:
        for seq, event in early.items():
            if event is None:
                continue
            self.stats.after_end += 1
            _log.info(
                "event.after_end_refused",
                match_id=self.match_id,
                run=self.run,
                seq=seq,
                type=event.type,
            )
        early.clear()

    def _sequence(self, event: Event) -> list[Delivery]:
        state = self.state
        assert state is not None
        if event.seq == state.last_seq + 1:  # the usual case, without the checks below
            self.state = state = with_score_dict(apply(state, event))
            if self.last_emitted is None or event.emitted_at > self.last_emitted:
                self.last_emitted = event.emitted_at
            if type(event) in _ENDS:
                self._ended_if(True)
            if self.early:  # it was missing: the events held behind it follow
                return self._drain([(event, state)])
            return [(event, state)]
        if self.window and event.seq > state.last_seq + 1:
            if event.seq in self.early:
                self._duplicate(event.seq, state.last_seq)
                return []
            return self._hold(event.seq, event)
        return self._unordered(event)

    def _duplicate(self, seq: int, last_seq: int) -> None:
        self.stats.duplicates += 1
        _log.debug("event.duplicate_dropped", match_id=self.match_id, seq=seq, last_seq=last_seq)

    def _unordered(self, event: Event) -> list[Delivery]:
        """Not the next seq, and not to be held: a duplicate (dropped) or past a gap."""
        state = self.state
        assert state is not None
        check = check_sequence(state, event.seq)
        if check.kind == "duplicate":
            self._duplicate(event.seq, state.last_seq)
            return []
        if check.kind == "gap":
            self._gap(check, event.seq)
        return self._apply(event)

    def _gap(self, check: SequenceCheck, seq: int) -> None:
        self.stats.gaps += 1
        self.stats.missing += len(check.missing)
        self.resync_from = seq
        self.uncounted = False
        _log.warning(
            "sequence.gap_detected",
            match_id=self.match_id,
            seq=seq,
            missing_from=check.missing.start,
            missing_to=check.missing.stop - 1,
            missing=len(check.missing),
        )

    def _passed_over(self, first: int, last: int) -> None:
        """Seqs ``first``..``last`` were never handled: the snapshot taken covers them."""
        self.stats.gaps += 1
        self.stats.missing += last - first + 1
        _log.warning(
            "sequence.gap_detected",
            match_id=self.match_id,
            seq=last,
            missing_from=first,
            missing_to=last,
            missing=last - first + 1,
            reason="while away",
        )

    def _apply(self, event: Event) -> list[Delivery]:
        state = self.state
        assert state is not None
        self.state = state = with_score_dict(apply(state, event))
        if self.last_emitted is None or event.emitted_at > self.last_emitted:
            self.last_emitted = event.emitted_at
        if type(event) in _ENDS:
            self._ended_if(True)
        return [(event, state)]
