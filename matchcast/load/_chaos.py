"""Seeded chaos on a load copy: the faulted stream of one copy, ready for the sender.

Each copy of a match gets its own faults, decided by the seed and the copy's *index* in the
run (not its match id, which carries the run's random tag), so a seed reproduces a run's
faults whatever the tag, shard or worker. The sender keeps, per copy, the order in which it
really sent the seqs (:class:`~matchcast.load.StreamStats` of the send order): what a perfect
broker would deliver. What a probe sees beyond that (loss of a seq that was sent, more
duplicates or reordering than were sent) is the broker's or the network's doing.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from events import Event, MatchState, encode_event, encode_state
from simulator import ChaosSpec, Emission, Fault, apply_chaos, expand, state_before
from simulator import Match as SourceMatch

__all__ = ["CopyChaos", "build_copy_chaos"]

_EXPANDED: dict[int, tuple[SourceMatch, list[Event], MatchState]] = {}


def _expanded(match: SourceMatch) -> tuple[list[Event], MatchState]:
    """The events of ``match`` and the state before them, expanded once per source match."""
    got = _EXPANDED.get(id(match))
    if got is None or got[0] is not match:
        stream = expand(match)
        got = (match, [s.event for s in stream], state_before(match, stream, 0))
        _EXPANDED[id(match)] = got
    return got[1], got[2]


@dataclass(slots=True)
class CopyChaos:
    """One copy's faulted stream.

    Attributes:
        emissions: the messages in send order, each with its due time after the copy's start.
        faults: the faults injected into this copy.
        truth: the copy's true final state.
        payloads: event payloads already sent, by (run, seq): a duplicate re-sends the very
            bytes, as a QoS 1 redelivery would.
    """

    emissions: tuple[Emission, ...]
    faults: tuple[Fault, ...]
    truth: MatchState
    payloads: dict[tuple[int, int], bytes] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.emissions)

    def payload(self, i: int, emitted: dt.datetime, scheduled0: dt.datetime) -> bytes:
        """Message ``i``'s payload, stamped with when it is sent (``emitted``); its
        ``scheduled_at`` is ``scheduled0`` (the copy's start) plus its schedule."""
        e = self.emissions[i]
        if e.event is None:
            assert e.state is not None
            return encode_state(e.state)
        key = (e.event.run, e.event.seq)
        got = self.payloads.get(key)
        if got is None:
            event = e.event.model_copy(
                update={
                    "emitted_at": emitted,
                    "scheduled_at": scheduled0 + dt.timedelta(seconds=e.scheduled),
                }
            )
            got = self.payloads[key] = encode_event(event)
        return got


def build_copy_chaos(
    match: SourceMatch,
    match_id: str,
    offsets: tuple[float, ...] | None,
    spec: ChaosSpec,
    *,
    seed: int,
    index: int,
    run: int,
) -> CopyChaos:
    """The faulted stream of copy ``index`` of ``match``, under the id ``match_id``.

    Args:
        offsets: per event, seconds after the copy's start; None at maximum speed.
        run: the copy's run id (ms since the epoch).
    """
    events, initial = _expanded(match)
    mine = [e.model_copy(update={"match_id": match_id}) for e in events]
    stream = apply_chaos(
        mine,
        list(offsets) if offsets is not None else [0.0] * len(mine),
        initial.model_copy(update={"match_id": match_id, "run": run}),
        spec,
        seed=seed,
        key=f"{match.match_id}#{index}",
        run=run,
    )
    return CopyChaos(stream.emissions, stream.faults, stream.truth)
