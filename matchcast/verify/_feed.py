"""A scenario's stream: played by the replayer (and its chaos), every message noted as it goes.

Nothing here sends a message of its own making: the replayer sends the match (under the
scenario's chaos, from its start minute, or in two runs for a seek), and a straggler is
messages the replayer sent, sent again byte for byte. :class:`Tap` stands between the replayer
and the connection and notes every publish in order, with when it was handed over: what the
consumer could have seen by the time a report of it arrived.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import structlog

from events import MatchClock, MatchState, MessageProps, Publisher, Topics, parse_minute
from matchcast.verify._scenarios import Scenario, chaos_seed, scenario_match
from simulator import (
    Fault,
    Match,
    Recording,
    Replayer,
    ReplayOptions,
    ReplayStates,
    expand,
    state_before,
    wall_offsets,
)

__all__ = ["Played", "Sent", "Step", "Tap", "play"]

_log = structlog.get_logger("matchcast.verify")


@dataclass(frozen=True, slots=True)
class Sent:
    """One message the scenario published.

    Attributes:
        index: its place among everything published (on this :class:`Tap`).
        at: when it was handed to the connection (monotonic seconds).
        kind: ``event`` or ``state``.
        run: the run it belongs to.
        seq: the event's seq, or the snapshot's ``last_seq``.
        clock: its match clock's label ("-" for a snapshot before kick-off).
        type: the event's type, or ``state``.
        retain: whether it was published retained.
        body: the message as JSON (a state's fields, an event's).
        payload: the bytes sent.
    """

    index: int
    at: float
    kind: str
    run: int
    seq: int
    clock: str
    type: str
    retain: bool
    body: dict[str, Any]
    payload: bytes


class Tap:
    """A :class:`events.Publisher` that notes each message on its way to ``inner``."""

    def __init__(
        self, inner: Publisher, topics: Topics, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.inner = inner
        self.topics = topics
        self.clock = clock
        self.sent: list[Sent] = []

    async def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        props: MessageProps | None = None,
    ) -> None:
        """Note the message (match events and states), then publish it."""
        matched = self.topics.match(topic)
        if matched is not None and matched[0] in ("events", "state") and payload:
            body = json.loads(payload)  # the replayer's own encoding: trusted
            state = matched[0] == "state"
            clock = body.get("clock") or {}
            self.sent.append(
                Sent(
                    index=len(self.sent),
                    at=self.clock(),
                    kind=matched[0],
                    run=body.get("run", 0),
                    seq=body["last_seq"] if state else body["seq"],
                    clock=clock.get("label", "-"),
                    type="state" if state else body["type"],
                    retain=retain,
                    body=body,
                    payload=payload,
                )
            )
        await self.inner.publish(topic, payload, qos=qos, retain=retain, props=props)


@dataclass(frozen=True, slots=True)
class Step:
    """Something a scenario did besides the replayer's chaos: ``index`` is the first message
    it concerns (on the :class:`Tap`), ``text`` says what it did."""

    index: int
    text: str


@dataclass(slots=True)
class Played:
    """A scenario played.

    Attributes:
        match_id: the scenario's match.
        seed: the chaos seed used (searched from ``--seed`` on), None without chaos.
        chaos: the chaos SPEC, None without chaos.
        truth: the true final state: what a correct consumer ends with.
        faults: each fault the chaos injected; ``Fault.index`` counts from :attr:`first`.
        steps: what the scenario did besides (a start mid-match, a seek, a straggler).
        first: the :class:`Tap` index of the scenario's first message.
        end: one past the index of its last.
        sent: its messages, as the :class:`Tap` noted them.
    """

    match_id: str
    seed: int | None
    chaos: str | None
    truth: MatchState
    faults: tuple[Fault, ...] = ()
    steps: list[Step] = field(default_factory=list)
    first: int = 0
    end: int = 0
    sent: list[Sent] = field(default_factory=list)


def _until(match: Match, at: MatchClock) -> Recording:
    """The match up to its first event at or after ``at`` (that one included), as a recording
    the replayer plays like any other: the first run of a seek."""
    stream = expand(match)
    cut = next((i for i, s in enumerate(stream) if s.event.clock.sort_key >= at.sort_key), None)
    stream = stream[: len(stream) if cut is None else cut + 1]
    initial = state_before(match, stream, 0)
    events = tuple(s.event for s in stream)
    offsets = wall_offsets(
        stream, ReplayOptions(speed=1.0, break_seconds=None), match.break_minutes
    )
    return Recording(
        match_id=match.match_id,
        path=Path(f"<first run of {match.match_id}>"),
        initial=initial,
        events=events,
        states=ReplayStates(initial, events),
        offsets=tuple(offsets),
    )


async def play(
    scenario: Scenario, tap: Tap, topics: Topics, *, seed: int, speed: float | None
) -> Played:
    """Play ``scenario`` through ``tap`` at ``speed`` (None: as fast as the broker takes it)."""
    match = scenario_match(scenario)
    spec = scenario.spec(speed)
    used = chaos_seed(scenario, spec, seed) if spec is not None else None
    options = ReplayOptions(
        speed=speed, break_seconds=None, topics=topics, chaos=spec, seed=used or 0
    )
    first = len(tap.sent)
    log = _log.bind(scenario=scenario.name, match_id=match.match_id)
    log.info("scenario.started", chaos=str(spec) if spec else None, seed=used)
    steps: list[Step] = []
    if scenario.seek is not None:
        at, to = (parse_minute(m) for m in scenario.seek)
        part = await Replayer(tap, options).run(_until(match, at))
        report = await Replayer(tap, replace(options, start=to)).run(match)
        state = next(s for s in tap.sent[first:] if s.run == report.run)
        steps.append(
            Step(
                state.index,
                f"at {at.label} (seq {part.last_seq}) the replayer seeks back to {to.label}: "
                f"run {report.run} starts with the state at seq {state.seq} ({state.clock})",
            )
        )
    else:
        start = parse_minute(scenario.start) if scenario.start is not None else None
        report = await Replayer(tap, replace(options, start=start)).run(match)
        if start is not None:
            state = tap.sent[first]
            steps.append(
                Step(
                    first,
                    f"the stream starts at {start.label}: the state at seq {state.seq} "
                    f"({state.clock}) first, then the events from seq {report.first_seq}",
                )
            )
    truth = report.truth or report.final_state
    assert truth is not None  # a replay that ran to its end says where it ended
    if scenario.straggler:
        steps.append(await _straggle(tap, topics, first, truth, options.qos))
    log.info("scenario.played", messages=len(tap.sent) - first, score=truth.scoreline)
    return Played(
        match_id=match.match_id,
        seed=used,
        chaos=str(spec) if spec is not None else None,
        truth=truth,
        faults=report.faults,
        steps=steps,
        first=first,
        end=len(tap.sent),
        sent=tap.sent[first:],
    )


async def _straggle(tap: Tap, topics: Topics, first: int, truth: MatchState, qos: int) -> Step:
    """After full time, the last goal again and, after it, the snapshot from before it (not
    retained, as a broker's session queue redelivers): a late repeat and a stale snapshot."""
    sent = tap.sent[first:]
    goal = next(s for s in reversed(sent) if s.type == "goal")
    older = next(
        s
        for s in sent
        if s.kind == "state" and s.retain and (s.run, s.seq) == (goal.run, goal.seq - 1)
    )
    step = Step(
        len(tap.sent),
        f"after full time (seq {truth.last_seq}), the goal of seq {goal.seq} ({goal.clock}) "
        f"and the snapshot of seq {older.seq} are sent again",
    )
    await tap.publish(topics.events(truth.match_id), goal.payload, qos=qos)
    await tap.publish(topics.state(truth.match_id), older.payload, qos=qos)
    return step
