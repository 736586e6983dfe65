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
- an event past the next seq is a gap: reported, applied, and the state is replaced by the
  next snapshot of the run that covers it;
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
from events import Event, FullTime, MatchState, ReplayStopped, apply, check_sequence

__all__ = ["HOLD_LIMIT", "Delivery", "RunnerStats", "Sequencer"]

_log = structlog.get_logger("matchcast.consumer")

#: Events held for a match with no state yet before giving up on a snapshot arriving.
HOLD_LIMIT = 32

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

    def as_dict(self) -> dict[str, int]:
        """The counters by name."""
        return {k: getattr(self, k) for k in self.__slots__}


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
    held: list[Event] = field(default_factory=list)
    last_emitted: dt.datetime | None = None  # only the run-0 guess needs it
    #: Called once each time a run ends (its full time applied or adopted): the runner
    #: starts the match's grace period then, with nothing to check per message.
    on_end: Callable[[], None] | None = None

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
            _log.info(stale_log, match_id=self.match_id, run=run, seq=seq, applied=self.run)
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
            self.state = snapshot
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
        if self.resync_from is not None and snapshot.last_seq >= self.resync_from:
            self.state = snapshot
            self._ended_if(snapshot.status in _ENDED)
            self.resync_from = None
            self.stats.resyncs += 1
            log.info("state.synchronised", reason="gap", score=snapshot.scoreline)
            return [(None, snapshot)]
        return []  # within the run, never back: an old or redelivered snapshot changes nothing

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
        return self._sequence(event)

    def on_unknown(self, seq: int, run: int) -> None:
        """A newer minor's event of a type this build does not know: skip it, in place.

        When it is the next seq of the run, the state moves past it (no handler runs), so the
        event after it is not taken for a gap.
        """
        state = self.state
        if run != self.run or state is None or self.ended:
            return
        if seq == state.last_seq + 1:
            self.state = state.model_copy(update={"last_seq": seq})

    def release(self) -> list[Delivery]:
        """Stop waiting for a snapshot: deliver the held events from an empty state."""
        if not self.held:
            return []
        _log.warning("state.snapshot_missing", match_id=self.match_id, held=len(self.held))
        held, self.held = self.held, []
        self.state = MatchState.new(self.match_id, run=self.run)
        return [d for event in held for d in self._sequence(event)]

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
        self.ended = False

    def _sequence(self, event: Event) -> list[Delivery]:
        state = self.state
        assert state is not None
        if event.seq == state.last_seq + 1:  # the usual case, without the checks below
            self.state = state = with_score_dict(apply(state, event))
            if self.last_emitted is None or event.emitted_at > self.last_emitted:
                self.last_emitted = event.emitted_at
            if type(event) in _ENDS:
                self._ended_if(True)
            return [(event, state)]
        check = check_sequence(state, event.seq)
        if check.kind == "duplicate":
            self.stats.duplicates += 1
            _log.debug(
                "event.duplicate_dropped",
                match_id=self.match_id,
                seq=event.seq,
                last_seq=state.last_seq,
            )
            return []
        if check.kind == "gap":
            self.stats.gaps += 1
            self.stats.missing += len(check.missing)
            self.resync_from = event.seq
            _log.warning(
                "sequence.gap_detected",
                match_id=self.match_id,
                seq=event.seq,
                missing_from=check.missing.start,
                missing_to=check.missing.stop - 1,
                missing=len(check.missing),
            )
        self.state = with_score_dict(apply(state, event))
        if self.last_emitted is None or event.emitted_at > self.last_emitted:
            self.last_emitted = event.emitted_at
        if type(event) in _ENDS:
            self._ended_if(True)
        return [(event, self.state)]
