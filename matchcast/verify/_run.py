"""The battery's run: each scenario played, the consumer waited for, its last report judged.

After a scenario's stream has gone out, verify waits for the consumer's report to reach the
truth's end (its ``status``, and its ``last_seq`` and ``run`` where the report says them),
then :data:`SETTLE_S` more with no new report, so a change a late message makes is seen; at
most ``timeout_s``. Then the last report is compared with the truth; for a failure, every
report received is walked for the first divergence and the fault before it. A consumer that
sent nothing in the first scenario is not waited for again: the others fail at once, saying
so. Everything the scenarios left retained is cleared at the end, however the run ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog

from events import VERIFY_ROOT, BrokerError, MessageSource, Publisher, Topics, clip
from matchcast.verify._compare import (
    Difference,
    Divergence,
    Point,
    arrived,
    differences,
    first_divergence,
    state_fields,
)
from matchcast.verify._feed import Played, Tap, play
from matchcast.verify._reports import Report, Reports
from matchcast.verify._scenarios import Scenario, select_scenarios

__all__ = [
    "DEFAULT_SPEED",
    "SETTLE_S",
    "TIMEOUT_S",
    "Client",
    "ScenarioResult",
    "Verdict",
    "VerifyOptions",
    "run_verify",
]

_log = structlog.get_logger("matchcast.verify")

#: Match seconds per wall second by default: a 90-minute match in under 3 s.
DEFAULT_SPEED = 2000.0
#: Seconds to wait for the consumer after a scenario's stream has gone out.
TIMEOUT_S = 10.0
#: Seconds without a new report, once the consumer reached the end, before it is judged.
SETTLE_S = 0.3


class Client(Publisher, MessageSource, Protocol):
    """A connection that publishes the scenarios and reads the reports."""


@dataclass(frozen=True, slots=True)
class VerifyOptions:
    """What to run.

    Attributes:
        consumer_id: the consumer under test: it reports on ``consumers/{id}/state/...``.
        topics: the topic tree the scenarios play under (root ``matchcast-verify``).
        scenarios: the names to run, in the battery's order; empty for all.
        seed: the seed the scenarios' chaos starts searching from.
        speed: match seconds per wall second; None for as fast as the broker takes it.
        timeout_s: seconds to wait for the consumer after each stream.
        settle_s: seconds with no new report before a consumer at the end is judged.
    """

    consumer_id: str
    topics: Topics = field(default_factory=lambda: Topics(VERIFY_ROOT))
    scenarios: tuple[str, ...] = ()
    seed: int = 0
    speed: float | None = DEFAULT_SPEED
    timeout_s: float = TIMEOUT_S
    settle_s: float = SETTLE_S


@dataclass(slots=True)
class ScenarioResult:
    """How the consumer did in one scenario.

    Attributes:
        scenario: the scenario.
        passed: its last report says what the truth says, on every field it carries.
        reason: for a failure, one line: the first divergence, or why there is none.
        played: what was sent (None when the scenario was not played).
        reports: every report received on the scenario's match, in arrival order.
        wrong: the fields the last report has wrong.
        divergence: where the consumer first parted from the truth.
        cause: the fault before the divergence: a chaos log line, or ``{"step": ...}``.
        duration_s: wall seconds the scenario took.
    """

    scenario: Scenario
    passed: bool
    reason: str = ""
    played: Played | None = None
    reports: list[Report] = field(default_factory=list)
    wrong: list[Difference] = field(default_factory=list)
    divergence: Divergence | None = None
    cause: dict[str, Any] | None = None
    duration_s: float = 0.0

    @property
    def final(self) -> dict[str, Any] | None:
        """The last report's fields (None if there was none, or it could not be read)."""
        return self.reports[-1].fields if self.reports else None


@dataclass(slots=True)
class Verdict:
    """The battery's outcome."""

    options: VerifyOptions
    results: list[ScenarioResult]
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        """True when every scenario run passed (and at least one ran)."""
        return bool(self.results) and all(r.passed for r in self.results)


async def run_verify(
    client: Client, options: VerifyOptions, *, clock: Callable[[], float] = time.monotonic
) -> Verdict:
    """Play the scenarios of ``options`` on ``client`` and judge the consumer's reports.

    Raises:
        ValueError: a scenario name that is no scenario's.
        events.BrokerError: the broker was lost.
    """
    scenarios = select_scenarios(options.scenarios)
    topics = options.topics
    tap = Tap(client, topics, clock)
    reports = Reports(topics, options.consumer_id, lambda: len(tap.sent), clock)
    started = clock()
    results: list[ScenarioResult] = []
    # No report of a run before this one may pass for an answer: cleared before subscribing.
    await _clear(client, topics, options.consumer_id, scenarios)
    await client.subscribe(topics.consumer_state(options.consumer_id), qos=1)
    log = _log.bind(consumer_id=options.consumer_id, root=topics.root)
    log.info("verify.started", scenarios=len(scenarios), seed=options.seed)
    reader = asyncio.ensure_future(reports.follow(client))
    try:
        for scenario in scenarios:
            if results and not reports.any:
                results.append(_not_played(scenario, options))
                continue
            t0 = clock()
            reports.watched.add(scenario.match_id)
            played = await play(scenario, tap, topics, seed=options.seed, speed=options.speed)
            await _wait(reports, played, options, clock)
            if reader.done():
                reader.result()  # the connection is gone: say so, not a verdict
            result = _judge(scenario, played, reports.of(played.match_id), options)
            result.duration_s = clock() - t0
            log.info("scenario.judged", scenario=scenario.name, passed=result.passed)
            results.append(result)
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, BrokerError):
            await reader
        await _clear(client, topics, options.consumer_id, scenarios)
    verdict = Verdict(options, results, clock() - started)
    log.info("verify.finished", ok=verdict.ok, passed=sum(r.passed for r in results))
    return verdict


async def _wait(
    reports: Reports, played: Played, options: VerifyOptions, clock: Callable[[], float]
) -> None:
    """Until the consumer's last report reached the truth and :attr:`settle_s` passed with
    no other, or ``timeout_s`` after the stream ended."""
    end = clock()
    deadline = end + options.timeout_s
    while True:
        got = reports.of(played.match_id)
        now = clock()
        if now >= deadline:
            return
        wait = deadline - now
        last = got[-1] if got else None
        if last is not None and last.fields is not None and arrived(last.fields, played.truth):
            quiet = now - max(end, last.at)
            if quiet >= options.settle_s:
                return
            wait = min(wait, options.settle_s - quiet)
        reports.changed.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait):
                await reports.changed.wait()


def _not_played(scenario: Scenario, options: VerifyOptions) -> ScenarioResult:
    return ScenarioResult(
        scenario,
        passed=False,
        reason=f"not played: consumer {options.consumer_id!r} sent no report in the first "
        f"scenario (on {options.topics.consumer_state(options.consumer_id)})",
    )


def _judge(
    scenario: Scenario, played: Played, reports: list[Report], options: VerifyOptions
) -> ScenarioResult:
    """The consumer's last report against the truth; for a failure, where it went wrong."""
    result = ScenarioResult(scenario, passed=False, played=played, reports=list(reports))
    topic = options.topics.consumer_state(options.consumer_id, played.match_id)
    if not reports:
        result.reason = (
            f"no report on {topic} within {options.timeout_s:g} s of the stream's end: "
            "is the consumer running, subscribed under this root, and publishing there?"
        )
        return result
    last = reports[-1]
    if last.fields is None:
        result.reason = f"its last report could not be read: {last.problem}"
        return result
    truth = played.truth
    result.wrong = differences(state_fields(truth), last.fields)
    if not result.wrong:
        result.passed = True
        return result
    points = [Point(s.index, s.body) for s in played.sent if s.kind == "state" and s.retain]
    readable = [(r.fed, r.fields) for r in reports if r.fields is not None]
    divergence = first_divergence(points, readable, [d.field for d in result.wrong])
    if divergence is None:  # no snapshot was published: nothing to walk
        d = result.wrong[0]
        divergence = Divergence(
            d.field,
            d.expected,
            d.reported,
            truth.last_seq,
            truth.clock.label if truth.clock else "-",
            truth.run,
            played.end - 1,
            "end",
        )
    result.divergence = divergence
    result.cause = _cause(played, divergence.index)
    result.reason = _say(divergence, result.wrong)
    if not arrived(last.fields, truth):
        result.reason += (
            f"; after {options.timeout_s:g} s it had not reached the end "
            f"(status {truth.status}, last seq {truth.last_seq})"
        )
    return result


def _cause(played: Played, index: int) -> dict[str, Any] | None:
    """The last fault or step at or before message ``index``: what made them part."""
    causes = [(played.first + f.index, f.to_json()) for f in played.faults]
    causes += [(s.index, {"step": s.text}) for s in played.steps]
    before = [c for c in sorted(causes, key=lambda c: c[0]) if c[0] <= index]
    return before[-1][1] if before else None


def _short(value: Any) -> str:
    """``value`` as JSON, a long one cut (the JSON report has it whole)."""
    return clip(json.dumps(value, sort_keys=True, ensure_ascii=False), limit=120)


def _say(d: Divergence, wrong: list[Difference]) -> str:
    """One line for a failure: how the consumer ended, when that is not what it said where
    it first parted from the truth, then where that was."""
    there = (
        f"{d.field}: expected {_short(d.expected)}, reported {_short(d.reported)} "
        f"at seq {d.seq} ({d.minute})"
    )
    end = next((w for w in wrong if w.field == d.field), None)
    if end is None or (end.expected, end.reported) == (d.expected, d.reported):
        return there
    return (
        f"{d.field}: ended {_short(end.reported)}, expected {_short(end.expected)}; "
        f"first parted {there.removeprefix(d.field + ': ')}"
    )


async def _clear(
    client: Publisher, topics: Topics, consumer_id: str, scenarios: tuple[Scenario, ...]
) -> None:
    """Remove what the scenarios left retained: their states and the consumer's reports (an
    empty retained message deletes one). Best effort, within a few seconds: on a dead
    connection, ``matchcast clear --root ...`` removes them later."""
    try:
        async with asyncio.timeout(5.0):
            for scenario in scenarios:
                for topic in (
                    topics.state(scenario.match_id),
                    topics.consumer_state(consumer_id, scenario.match_id),
                ):
                    await client.publish(topic, b"", qos=1, retain=True)
    except (TimeoutError, BrokerError) as err:
        _log.warning("verify.not_cleared", root=topics.root, reason=str(err) or type(err).__name__)
