"""The load shape: which matches, with which ids, on which schedule; and the payload templates.

A load test replays copies of real matches, each under a distinct match id. Encoding an event
with pydantic and applying the reducer costs tens of microseconds, more than publishing it, so
each source match is expanded and encoded once, into templates with holes for the match id and
the two timestamps; a send fills the holes. The bytes are exactly what ``encode_event`` would
produce for that event (tests check it), optionally padded with trailing JSON whitespace to a
target size.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from dataclasses import dataclass, field

from events import (
    MatchState,
    ReplayStopped,
    Score,
    apply,
    decode_event,
    encode_event,
    encode_state,
)
from matchcast.load._stages import Stages
from simulator import Match, ReplayOptions, expand, wall_offsets

__all__ = ["LoadShape", "MatchTemplate", "format_timestamp", "match_ids"]

_MID = "zzmidzz"
_EMITTED = dt.datetime(1971, 1, 1, tzinfo=dt.UTC)
_SCHEDULED = dt.datetime(1972, 1, 1, tzinfo=dt.UTC)
_EMITTED_B = b'"1971-01-01T00:00:00Z"'
_SCHEDULED_B = b'"1972-01-01T00:00:00Z"'
_MID_B = b'"zzmidzz"'

_ts_cache: list[object] = [-1, b""]


def format_timestamp(t: float) -> bytes:
    """``YYYY-MM-DDTHH:MM:SS.ffffffZ`` of epoch seconds ``t``, as pydantic writes it."""
    sec, us = divmod(round(t * 1_000_000), 1_000_000)
    if _ts_cache[0] != sec:
        _ts_cache[0] = sec
        _ts_cache[1] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec)).encode()
    prefix = _ts_cache[1]
    assert isinstance(prefix, bytes)
    return b"%s.%06dZ" % (prefix, us)


def _split3(raw: bytes) -> tuple[bytes, bytes, bytes, bytes]:
    a = raw.index(_MID_B)
    b = raw.index(_EMITTED_B)
    c = raw.index(_SCHEDULED_B)
    if not a < b < c:
        raise AssertionError("event fields are not in the order match_id, emitted, scheduled")
    return (
        raw[: a + 1],
        raw[a + len(_MID_B) - 1 : b + 1],
        raw[b + len(_EMITTED_B) - 1 : c + 1],
        raw[c + len(_SCHEDULED_B) - 1 :],
    )


@dataclass(frozen=True, slots=True)
class MatchTemplate:
    """One source match, pre-encoded.

    Attributes:
        source: the source match.
        events: per event, the four byte strings around match id, emitted_at, scheduled_at.
        states: per event, the state after it, split around the match id.
        play: per event, (seconds of play from kickoff, breaks before it).
        final_score: the score at full time.
    """

    source: Match
    events: tuple[tuple[bytes, bytes, bytes, bytes], ...]
    states: tuple[tuple[bytes, ...], ...]
    offsets_by_speed: dict[float, tuple[float, ...]] = field(default_factory=dict)
    final_score: Score = field(default_factory=dict)

    @classmethod
    def build(cls, match: Match) -> MatchTemplate:
        """Expand and encode ``match`` once."""
        stream = expand(match)
        events = []
        states = []
        state = MatchState.new(_MID)
        quoted_id = b'"' + _MID.encode() + b'"'
        for item in stream:
            event = item.event.model_copy(
                update={"match_id": _MID, "emitted_at": _EMITTED, "scheduled_at": _SCHEDULED}
            )
            events.append(_split3(encode_event(event)))
            state = apply(state, event)
            states.append(tuple(encode_state(state).split(quoted_id)))
        return cls(
            source=match, events=tuple(events), states=tuple(states), final_score=state.score
        )

    def __len__(self) -> int:
        return len(self.events)

    def offsets(self, speed: float, break_seconds: float | None) -> tuple[float, ...]:
        """Wall seconds from kickoff to each event at ``speed`` (cached)."""
        key = speed if break_seconds is None else speed + break_seconds * 1e-9
        got = self.offsets_by_speed.get(key)
        if got is None:
            opts = ReplayOptions(speed=speed, break_seconds=break_seconds)
            got = tuple(wall_offsets(expand(self.source), opts, self.source.break_minutes))
            self.offsets_by_speed[key] = got
        return got

    def event(self, i: int, match_id: bytes, emitted: bytes, scheduled: bytes, pad: int) -> bytes:
        """Event ``i`` (0-based) of a copy, padded with spaces to ``pad`` bytes."""
        p0, p1, p2, p3 = self.events[i]
        raw = b"".join((p0, match_id, p1, emitted, p2, scheduled, p3))
        if len(raw) < pad:
            raw += b" " * (pad - len(raw))
        return raw

    def final_state(self, match_id: str) -> MatchState:
        """The true state of a copy at full time."""
        return MatchState.model_validate_json(self.state(len(self.events) - 1, match_id.encode()))

    def state(self, i: int, match_id: bytes) -> bytes:
        """The state after event ``i`` of a copy."""
        return (b'"' + match_id + b'"').join(self.states[i])

    def stopped(self, sent: int, match_id: bytes, at: float) -> tuple[bytes, bytes]:
        """The ``replay_stopped`` event (emitted and due at epoch seconds ``at``) that ends a
        copy after its first ``sent`` events, and the state after it (status ``stopped``)."""
        stamp = format_timestamp(at)
        last = decode_event(self.event(sent - 1, match_id, stamp, stamp, 0))
        event = ReplayStopped(
            match_id=last.match_id,
            run=last.run,
            seq=last.seq + 1,
            clock=last.clock,
            emitted_at=last.emitted_at,
            scheduled_at=last.emitted_at,
            reason="interrupted",
            detail="load: a stage ramped the matches down",
        )
        state = apply(MatchState.model_validate_json(self.state(sent - 1, match_id)), event)
        return encode_event(event), encode_state(state)


def match_ids(base: str, tag: str, index: int) -> str:
    """The id of copy ``index`` of ``base``: ``{base}-{tag}-{index:05d}``, at most 64 chars."""
    suffix = f"-{tag}-{index:05d}"
    return base[: 64 - len(suffix)] + suffix


@dataclass(frozen=True, slots=True)
class LoadShape:
    """How much load, and how it arrives.

    Attributes:
        matches: matches running at once (and in total, unless ``duration_s`` is set, in
            which case a finished match is replaced by a new copy until the time is up).
        speed: match seconds per wall second for each match; None for as fast as possible.
        rate: target total events/s over all matches; overrides ``speed`` (events of a match
            are then evenly spaced at ``rate / matches`` a second).
        ramp_s: the matches start evenly spread over this many seconds.
        duration_s: stop sending after this many seconds; None to play every match through.
        qos: QoS of every message.
        payload_size: pad events to at least this many bytes (0: no padding).
        states: also publish each event's retained state snapshot, as the replayer does.
        break_seconds: wall seconds of each break at a finite ``speed``.
        tag: distinguishes this run's match ids from other runs'.
        total_matches: matches over all shards of the run (None: just ``matches``); the
            ramp and ``rate`` are spread over all of them.
        stages: the matches running over time (``--stages``), instead of ``matches``,
            ``ramp_s`` and ``duration_s``: the sender starts and stops matches on the way to
            each stage's target, and stops when the last stage ends.
    """

    matches: int = 10
    speed: float | None = None
    rate: float | None = None
    ramp_s: float = 0.0
    duration_s: float | None = None
    qos: int = 0
    payload_size: int = 0
    states: bool = True
    break_seconds: float | None = 2.0
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:4])
    total_matches: int | None = None
    stages: Stages | None = None

    @property
    def run_s(self) -> float | None:
        """How long the sender sends: the stages' length, ``duration_s``, or None (every match
        played through)."""
        return self.stages.duration_s if self.stages is not None else self.duration_s

    @property
    def all_matches(self) -> int:
        """Matches over all shards."""
        return self.total_matches or self.matches

    @property
    def scheduled(self) -> bool:
        """True when events have due times (not ``--speed max``)."""
        return self.rate is not None or self.speed is not None

    def offsets(self, template: MatchTemplate) -> tuple[float, ...] | None:
        """Per event of a copy of ``template``, seconds after its start; None at max speed."""
        if self.rate is not None:
            per_match = self.rate / max(self.all_matches, 1)
            return tuple(i / per_match for i in range(len(template)))
        if self.speed is not None:
            return template.offsets(self.speed, self.break_seconds)
        return None

    def start_offset(self, index: int) -> float:
        """When match ``index`` (0-based over all shards) starts, seconds after the run."""
        if self.ramp_s <= 0 or self.all_matches <= 1:
            return 0.0
        return self.ramp_s * index / self.all_matches
