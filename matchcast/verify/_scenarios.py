"""The battery: each scenario a named fault on a match of its own, with a one-line description.

Every scenario plays ``match.yaml`` (beside this module) under the match id ``verify-NAME``.
Most are one fault of :mod:`simulator`'s seeded chaos; the seed is searched from ``--seed``
on for the first whose stream the fault really touches (a goal repeated, lost or swapped; a
stale snapshot with another score), so every seed tests what the scenario says. The others
are replayer behaviours: a start mid-match, a seek, a message after full time.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from events import MatchState
from simulator import ChaosSpec, ChaosStream, Match, apply_chaos, expand, load_match, state_before

__all__ = [
    "MATCH_FILE",
    "SCENARIOS",
    "SEED_TRIES",
    "Scenario",
    "chaos_seed",
    "scenario_match",
    "select_scenarios",
]

#: The match every scenario plays.
MATCH_FILE = Path(__file__).with_name("match.yaml")
#: Seeds tried from ``--seed`` on for one whose faults touch what the scenario is about.
SEED_TRIES = 1000


@dataclass(frozen=True, slots=True)
class Scenario:
    """One named fault.

    Attributes:
        name: what ``--scenario`` takes; the match id is ``verify-{name}``.
        description: one line: what the consumer meets.
        chaos: a ``--chaos`` SPEC (docs/chaos.md); ``{burst_s}`` is filled in from the speed.
        start: the stream starts at this minute: the state there first (a late join).
        seek: ``(at, to)``: at minute ``at`` the replayer seeks back to ``to``, a new run.
        straggler: after full time, the last goal and the snapshot before it are sent again.
    """

    name: str
    description: str
    chaos: str | None = None
    start: str | None = None
    seek: tuple[str, str] | None = None
    straggler: bool = False

    @property
    def match_id(self) -> str:
        """The match id the scenario plays under."""
        return f"verify-{self.name}"

    def spec(self, speed: float | None) -> ChaosSpec | None:
        """The chaos of this scenario at ``speed`` (a burst holds ten match minutes, at least
        0.2 s)."""
        if self.chaos is None:
            return None
        burst_s = 0.2 if speed is None else max(0.2, 600 / speed)
        return ChaosSpec.parse(self.chaos.format(burst_s=round(burst_s, 3)))


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("clean", "no fault: each event once, in order, then its snapshot"),
    Scenario(
        "duplicates",
        "events sent again 1-10 events later (QoS 1), a goal among them",
        chaos="duplicate=0.1",
    ),
    Scenario(
        "reorder",
        "events swapped with one up to 3 later, a goal among them",
        chaos="reorder=0.1:3",
    ),
    Scenario(
        "gap",
        "events never sent, a goal among them; their snapshots still are",
        chaos="drop=0.05",
    ),
    Scenario(
        "late-join",
        "starts at 60': the retained snapshot, then the events from there",
        start="60",
    ),
    Scenario(
        "restart",
        "at 70' the match starts again from kick-off, as a new run",
        chaos="restart=70",
    ),
    Scenario(
        "goal-ruled-out",
        "a goal that never was, disallowed 0-3 events later",
        chaos="correction=0.3",
    ),
    Scenario(
        "seek-back",
        "at 75' the replayer seeks back to 30': a new run, snapshot first",
        seek=("75", "30"),
    ),
    Scenario(
        "stale-snapshot",
        "older snapshots resent after newer ones, one with another score",
        chaos="stale-state=0.05",
    ),
    Scenario(
        "burst",
        "from 60' every message is held, then all released at once",
        chaos="burst=60:{burst_s}",
    ),
    Scenario(
        "straggler",
        "full time, then the last goal and an older snapshot arrive again",
        straggler=True,
    ),
)


def select_scenarios(names: list[str] | tuple[str, ...]) -> tuple[Scenario, ...]:
    """The scenarios named (all for none), in the battery's order.

    Raises:
        ValueError: a name that is no scenario's; the message lists them.
    """
    known = {s.name: s for s in SCENARIOS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(
            f"no scenario named {', '.join(map(repr, unknown))}; "
            f"the scenarios are {', '.join(known)}"
        )
    wanted = set(names)
    return tuple(s for s in SCENARIOS if not wanted or s.name in wanted)


@functools.cache
def _base_match() -> Match:
    return load_match(MATCH_FILE)


def scenario_match(scenario: Scenario) -> Match:
    """The scenario's match: ``match.yaml`` under the scenario's match id."""
    return _base_match().model_copy(update={"match_id": scenario.match_id})


def _touches(stream: ChaosStream, fault: str) -> bool:
    """True when a fault of kind ``fault`` in ``stream`` touches the score: it repeats, drops
    or swaps a goal, re-sends a snapshot with another score, or is a correction."""
    states: dict[tuple[int, int], MatchState] = {
        (e.state.run, e.state.last_seq): e.state
        for e in stream.emissions
        if e.state is not None and e.retain
    }
    # From the snapshots: a dropped goal is in no emission, but in the state after it.
    goals = {(run, g.seq) for (run, _), state in states.items() for g in state.goals}
    for f in stream.faults:
        if f.fault != fault:
            continue
        match fault:
            case "duplicate" | "drop":
                hit = (f.run, f.seq) in goals
            case "reorder":
                hit = bool({(f.run, f.seq), (f.run, f.detail["with_seq"])} & goals)
            case "stale-state":
                hit = states[(f.run, f.detail["state_seq"])].score != states[(f.run, f.seq)].score
            case _:
                hit = True
        if hit:
            return True
    return False


def chaos_seed(scenario: Scenario, spec: ChaosSpec, seed: int) -> int:
    """The first seed from ``seed`` on whose faults touch the score (``seed`` itself for a
    fault that always does: a restart, a burst); ``seed`` if none of :data:`SEED_TRIES` does."""
    fault = next(iter(str(spec).split("=")))
    if fault in ("restart", "burst"):
        return seed
    match = scenario_match(scenario)
    stream = expand(match)
    events = [s.event for s in stream]
    initial = state_before(match, stream, 0)
    zeros = [0.0] * len(events)
    for candidate in range(seed, seed + SEED_TRIES):
        faulted = apply_chaos(
            events, zeros, initial, spec, seed=candidate, key=match.match_id, run=1
        )
        if _touches(faulted, fault):
            return candidate
    return seed
