"""Did each consumer end up with the true final state of every match?

A consumer taking part in a load test reports what it believes: a :class:`StateReporter` keeps
the consumer's own state per match (folding in only the events the consumer actually handled)
and publishes it, retained, after every change, to::

    {root}/consumers/{consumer_id}/state/{match_id}

(the topic ``matchcast verify`` reads too). ``matchcast load --verify-state`` reads those
topics after the run, waits for each match's report to say it is over, and compares each with
the truth the sender knows: the final score, and the goals (by id), so a consumer that lost a
goal under load is caught even though the full-time event carries the right score.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from typing import Any, cast

import pydantic_core
import structlog

from consumers import Subscriber
from events import (
    MAX_PAYLOAD_BYTES,
    BaseEvent,
    BrokerError,
    DecodeError,
    Event,
    MatchState,
    MessageSource,
    Publisher,
    Topics,
    apply,
    decode_state,
    encode_state,
)

__all__ = [
    "StateReporter",
    "collect_reported_states",
    "consumer_state_filter",
    "consumer_state_topic",
    "verify_states",
]

_log = structlog.get_logger("matchcast.load.verify")

#: The statuses of a match that is over: its last report is its final state.
_OVER = ("finished", "stopped")


def consumer_state_topic(topics: Topics, consumer_id: str, match_id: str) -> str:
    """Where consumer ``consumer_id`` reports its final state of ``match_id`` (retained)."""
    return topics.consumer_state(consumer_id, match_id)


def consumer_state_filter(topics: Topics) -> str:
    """Every consumer's reported state of every match."""
    return topics.consumer_state()


class StateReporter:
    """Keeps a consumer's own state per match and publishes it, retained, after every change.

    Feed it the events the consumer handled (:meth:`handle`), or register :attr:`subscriber`
    with a :class:`consumers.Runner` to feed it every event the runner dispatches.

    A match has at most one report in flight: the changes made while it is sent are reported
    together, by the next one, so a consumer under load sends one report per round trip and
    per match, not one per event, and the last report of a match is its last state.
    :meth:`flush` waits for the reports in flight.
    """

    def __init__(self, publisher: Publisher, topics: Topics, consumer_id: str) -> None:
        if not consumer_id or any(c in consumer_id for c in "/+#"):
            raise ValueError(f"consumer id {consumer_id!r} must be a name without / + #")
        self.publisher = publisher
        self.topics = topics
        self.consumer_id = consumer_id
        self.states: dict[str, MatchState] = {}
        self.reported = 0
        self.subscriber = Subscriber(f"state-reporter-{consumer_id}")
        self.subscriber.on(BaseEvent)(self._on_event)
        self._sending: dict[str, asyncio.Task[None]] = {}  # match id -> its report in flight
        self._sent: dict[str, MatchState] = {}  # match id -> the state its last report said

    async def _on_event(self, event: BaseEvent, _state: MatchState) -> None:
        await self.handle(cast(Event, event))

    async def handle(self, event: Event) -> None:
        """Fold ``event`` into this consumer's state, and report the change."""
        match_id = event.match_id
        before = self.states.get(match_id) or MatchState.new(match_id)
        state = apply(before, event)
        if state is before:
            return  # a repeat: nothing changed
        self.states[match_id] = state
        if match_id not in self._sending:
            task = asyncio.ensure_future(self._report_changes(match_id))
            self._sending[match_id] = task

    async def _report_changes(self, match_id: str) -> None:
        """Report ``match_id`` until its report says its latest state; a failed publish is
        logged and tried again at the next change."""
        try:
            while self._sent.get(match_id) is not self.states[match_id]:
                state = self.states[match_id]
                await self.report(match_id)
                self._sent[match_id] = state
        except BrokerError as err:
            _log.warning("state.report_failed", match_id=match_id, reason=err.reason)
        finally:
            del self._sending[match_id]

    async def report(self, match_id: str) -> None:
        """Publish the current state of ``match_id`` (retained, QoS 1)."""
        state = self.states[match_id]
        topic = consumer_state_topic(self.topics, self.consumer_id, match_id)
        await self.publisher.publish(topic, encode_state(state), qos=1, retain=True)
        self.reported += 1

    async def flush(self) -> None:
        """Wait for every report in flight (and the ones they leave to send)."""
        while self._sending:
            await asyncio.gather(*self._sending.values(), return_exceptions=True)


def _reported_state(payload: bytes, topic: str) -> MatchState:
    """A consumer's report, parsed first by pydantic-core (which refuses deep nesting instead
    of recursing), so one hostile report is rejected and the others are still read."""
    if len(payload) <= MAX_PAYLOAD_BYTES:  # larger: decode_state refuses it unparsed
        try:
            pydantic_core.from_json(payload)
        except ValueError as err:
            raise DecodeError(f"not JSON: {err}", topic=topic, payload=payload) from None
    return decode_state(payload, topic=topic)


async def collect_reported_states(
    source: MessageSource,
    topics: Topics,
    expected: Sequence[str],
    *,
    consumers: Sequence[str] = (),
    timeout_s: float = 10.0,
    settle_s: float = 1.0,
) -> dict[str, dict[str, MatchState]]:
    """The states consumers reported last: ``{consumer_id: {match_id: state}}``.

    Waits until every consumer seen (and every one named in ``consumers``) has reported every
    match in ``expected`` over (finished, or stopped), or ``timeout_s`` passed; with no
    consumer named, waits at least ``settle_s`` for retained messages to arrive. Consumers
    report after every change, so a report of a match still live means one still to come.
    """
    wanted = set(expected)
    got: dict[str, dict[str, MatchState]] = {c: {} for c in consumers}
    await source.subscribe(consumer_state_filter(topics), qos=1)

    complete = asyncio.Event()

    def done() -> bool:
        return bool(got) and all(
            all(m in states and states[m].status in _OVER for m in wanted)
            for states in got.values()
        )

    async def read() -> None:
        async for message in source.messages():
            matched = topics.match(message.topic)
            if matched is None or matched[0] != "consumer_state":
                continue
            consumer, match_id = matched[1]["consumer"], matched[1]["match_id"]
            try:
                state = _reported_state(message.payload, message.topic)
            except DecodeError as err:
                _log.warning("state.rejected", topic=message.topic, reason=err.reason)
                continue
            got.setdefault(consumer, {})[match_id] = state
            if done():
                complete.set()

    reader = asyncio.ensure_future(read())
    try:
        async with asyncio.timeout(timeout_s):
            if not consumers:
                await asyncio.sleep(settle_s)  # let every retained report arrive
            await complete.wait()
    except TimeoutError:
        _log.warning("state.reports_incomplete", consumers=sorted(got), timeout_s=timeout_s)
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reader
    return got


def verify_states(
    reported: Mapping[str, Mapping[str, MatchState]],
    truth: Mapping[str, MatchState],
) -> dict[str, Any]:
    """Compare what each consumer reported with the true final state of each match.

    A match is right when the score and the set of goal ids agree; a match the consumer never
    reported is missing. ``ok`` is true only if at least one consumer reported and every
    consumer got every match right.
    """
    consumers = []
    for consumer, states in sorted(reported.items()):
        wrong = []
        missing = []
        for match_id, true_state in truth.items():
            state = states.get(match_id)
            if state is None:
                missing.append(match_id)
                continue
            true_goals = sorted(g.goal_id for g in true_state.goals)
            goals = sorted(g.goal_id for g in state.goals)
            if state.score != true_state.score or goals != true_goals:
                wrong.append(
                    {
                        "match_id": match_id,
                        "expected_score": true_state.score,
                        "reported_score": state.score,
                        "missing_goals": sorted(set(true_goals) - set(goals)),
                        "extra_goals": sorted(set(goals) - set(true_goals)),
                    }
                )
        consumers.append(
            {
                "consumer": consumer,
                "matches": len(truth),
                "right": len(truth) - len(wrong) - len(missing),
                "wrong": len(wrong),
                "missing": len(missing),
                "wrong_sample": wrong[:10],
                "missing_sample": missing[:10],
            }
        )
    ok = bool(consumers) and all(c["wrong"] == 0 and c["missing"] == 0 for c in consumers)
    return {"ok": ok, "matches": len(truth), "consumers": consumers}
