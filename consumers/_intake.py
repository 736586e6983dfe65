"""The reader's side of the consumer runner: each message through the one boundary
(:meth:`_Intake._process`), its checks (topic, run, seq), a named replayer's status, an
unknown event type, and the dead letter of a rejected message. A layer of
:class:`~consumers._runner.Runner`, on consumers/_memory.py.
"""

from __future__ import annotations

import time

import structlog

from consumers._deadletter import DeadLetter, send_dead_letter
from consumers._lanes import _Lane
from consumers._latejoin import ReplayerWatch, StatusDiscovery, subscribe_exact
from consumers._memory import _SWEEP_EVERY, _Memory
from events import (
    MAX_MATCH_ID,
    DecodeError,
    Event,
    Message,
    Publisher,
    TopicKind,
    UnknownEventTypeError,
    clip,
    clip_bytes,
    decode_event,
    decode_state,
    quote,
)

_log = structlog.get_logger("matchcast.consumer")

#: Topics parsed once and remembered (a few per match); a bound keeps junk topics from growing
#: it: when full it is emptied, and the live matches' topics come back at their next message.
_PARSED_CACHE = 100_000
_NOT_OURS: tuple[TopicKind, str] = ("status", "")
#: The topics a runner reads; any other of the tree (a status, a dead letter) is not for it.
_MATCH_TOPICS: frozenset[TopicKind] = frozenset(("events", "state"))

#: An event this far past the last seq applied is refused: a forged or corrupt seq would
#: otherwise make every real event after it look like a duplicate.
MAX_SEQ_JUMP = 10_000
#: A run (its start, ms since the epoch) this far ahead of the consumer's clock is refused: a
#: forged far-future run would otherwise make every real run after it look stale.
MAX_RUN_AHEAD_MS = 24 * 3600 * 1000


class _Intake(_Memory):
    """Reads one message at a time into the lanes; whatever it does costs that message only."""

    name: str
    match_filter: str
    replayers: tuple[str, ...]
    max_seq_jump: int
    dead_letters: Publisher | None
    _parsed: dict[str, tuple[TopicKind, str]]
    _parsed_cap: int
    _discovery: StatusDiscovery
    _replayer_watch: ReplayerWatch

    async def feed(self, message: Message) -> None:
        """Process one message as if it had arrived from the broker."""
        self._process(message)

    def _process(self, message: Message) -> None:
        """One message, through the one boundary: its failure costs it alone."""
        stats = self.stats
        stats.received += 1
        parsed = self._parsed.get(message.topic)
        if parsed is None:
            parsed = self.topics.parse(message.topic) or _NOT_OURS
            if len(parsed[1]) <= MAX_MATCH_ID:  # not a topic of 64 KiB, kept 4 x limit times
                if len(self._parsed) >= self._parsed_cap:
                    # Full, mostly of matches gone (a flood of made-up ids): start afresh, so
                    # the live matches' topics are cached again and the dead ones' freed.
                    self._parsed.clear()
                self._parsed[message.topic] = parsed
        if parsed[0] not in _MATCH_TOPICS:
            if parsed[0] == "status" and parsed[1] in self.replayers:
                self._on_status(message, parsed[1])
            return
        kind, match_id = parsed
        if self.match_filter not in ("+", match_id):
            return
        if not stats.received % _SWEEP_EVERY:
            self._sweep()
        try:
            if kind == "state":
                snapshot = decode_state(message.payload, topic=message.topic)
                self._check_topic(snapshot.match_id, match_id, message)
                known = self._lanes.get(match_id)
                if snapshot.run > self._run_of(match_id, known):
                    self._check_run(snapshot.run, message)
                lane = known or self._lane(match_id)
                lane.active = stats.received
                self._enqueue(lane, lane.seq.on_snapshot(snapshot, retained=message.retain))
            else:
                event = decode_event(message.payload, topic=message.topic)
                if event.match_id != match_id:
                    self._check_topic(event.match_id, match_id, message)
                known = self._lanes.get(match_id)
                self._check_seq(known, event, message)
                lane = known or self._lane(match_id)
                lane.active = stats.received
                self._enqueue(lane, lane.seq.on_event(event))
                if lane.resync_asked or lane.seq.resync_from is not None:
                    self._ask_for_snapshot(lane)
        except UnknownEventTypeError as err:
            self._skip_unknown(err, match_id, message)
        except DecodeError as err:
            stats.rejected += 1
            _log.warning(
                "message.rejected", topic=message.topic, reason=err.reason, excerpt=err.excerpt
            )
            self._dead_letter(message, err.reason)
        except Exception as err:  # a bug this message tripped: it costs this message only
            stats.rejected += 1
            reason = f"internal error: {type(err).__name__}: {clip(str(err))}"
            _log.exception(
                "message.failed",
                topic=message.topic,
                reason=reason,
                excerpt=clip_bytes(message.payload),
            )
            self._dead_letter(message, reason)

    def _on_status(self, message: Message, replayer_id: str) -> None:
        """A named replayer's status: subscribe to the exact state topic of each match it
        lists that is new to us. A bad status costs that message only."""
        try:
            fresh = self._discovery.new_topics(message, self._lanes)
        except DecodeError as err:
            self.stats.rejected += 1
            _log.warning(
                "message.rejected", topic=message.topic, reason=err.reason, excerpt=err.excerpt
            )
            self._dead_letter(message, err.reason)
            return
        if message.payload:  # a readable status, not a cleared one: the replayer exists
            self._replayer_watch.arrived(replayer_id)
        if fresh and self._source is not None:
            _log.info("state.discovered", topic=message.topic, matches=len(fresh))
            self._start_errand(subscribe_exact(self._source, fresh, 1, lost_ends=False))

    def _skip_unknown(self, err: UnknownEventTypeError, match_id: str, message: Message) -> None:
        """A newer minor's event type: skipped, counted, logged; its seq is passed over."""
        self.stats.unknown_skipped += 1
        _log.info(
            "event.unknown_skipped",
            topic=message.topic,
            event_type=err.event_type,
            schema_version=err.version,
            seq=err.seq,
        )
        if err.match_id == match_id and (lane := self._lanes.get(match_id)) is not None:
            self._enqueue(lane, lane.seq.on_unknown(err.seq, err.run))

    @staticmethod
    def _check_run(run: int, message: Message) -> None:
        """A newer run than the match's: refuse one that starts in the future (a day's leeway
        for clocks that disagree); checked only when a run is new, never per event."""
        limit = int(time.time() * 1000) + MAX_RUN_AHEAD_MS
        if run > limit:
            raise DecodeError(
                f"run {run} starts more than a day after this consumer's clock; refusing it "
                "rather than take every real run after it for a stale one",
                topic=message.topic,
                payload=message.payload,
            )

    def _run_of(self, match_id: str, lane: _Lane | None) -> int:
        """The run ``match_id`` is in: its lane's, else the one a lane made now would start
        in (an ended run remembered, else 0)."""
        return lane.seq.run if lane is not None else self._ended_runs.get(match_id, 0)

    def _check_seq(self, lane: _Lane | None, event: Event, message: Message) -> None:
        """Refuse an implausible run or seq, before a lane is made for a match new to us: a
        rejected message keeps nothing of its match (a flood of them on made-up ids would
        otherwise fill the match limit and evict the real matches)."""
        run = self._run_of(event.match_id, lane)
        if event.run != run:
            if event.run < run:
                return  # an older run's: the sequencer drops it as stale
            self._check_run(event.run, message)
        # A newer run starts from nothing: its seqs are measured from 0.
        state = lane.seq.state if lane is not None else None
        last = state.last_seq if state is not None and event.run == run else 0
        if event.seq > last + self.max_seq_jump:
            raise DecodeError(
                f"seq {event.seq} is implausibly far past {last} (limit "
                f"{self.max_seq_jump}); refusing it rather than skip the match",
                topic=message.topic,
                payload=message.payload,
            )

    @staticmethod
    def _check_topic(payload_match: str, topic_match: str, message: Message) -> None:
        if payload_match != topic_match:
            raise DecodeError(
                f"match_id {quote(payload_match)} does not match the topic's {quote(topic_match)}",
                topic=message.topic,
                payload=message.payload,
            )

    def _dead_letter(self, message: Message, reason: str) -> None:
        """Copy a rejected message, with the reason, to the dead-letter topic (best effort)."""
        if self.dead_letters is None:
            return
        body = DeadLetter.of(self.name, message, reason).model_dump_json().encode()
        topic = self.topics.deadletter(self.name)
        publisher = self.dead_letters

        async def send() -> None:
            outcome = await send_dead_letter(publisher, topic, body)
            if outcome == "published":
                self.stats.dead_lettered += 1
            elif outcome == "refused":
                self.stats.dead_letters_refused += 1

        self._start_errand(send())
