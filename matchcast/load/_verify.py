"""Did each consumer end up with the true final state of every match?

A consumer taking part in a load test reports what it believes: a :class:`StateReporter` keeps
the consumer's own state per match (folding in only the events the consumer actually handled)
and publishes it, retained, at full time to::

    {root}/consumers/{consumer_id}/state/{match_id}

``matchcast load --verify-state`` reads those topics after the run and compares each with the
truth the sender knows: the final score, and the goals (by id), so a consumer that lost a goal
under load is caught even though the full-time event carries the right score.
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
    DecodeError,
    Event,
    FullTime,
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


def consumer_state_topic(topics: Topics, consumer_id: str, match_id: str) -> str:
    """Where consumer ``consumer_id`` reports its final state of ``match_id`` (retained)."""
    return topics.consumer_state(consumer_id, match_id)


def consumer_state_filter(topics: Topics) -> str:
    """Every consumer's reported state of every match."""
    return topics.consumer_state()


class StateReporter:
    """Keeps a consumer's own state per match and publishes it, retained, at full time.

    Feed it the events the consumer handled (:meth:`handle`), or register :attr:`subscriber`
    with a :class:`consumers.Runner` to feed it every event the runner dispatches.
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

    async def _on_event(self, event: BaseEvent, _state: MatchState) -> None:
        await self.handle(cast(Event, event))

    async def handle(self, event: Event) -> None:
        """Fold ``event`` into this consumer's state; at full time, report it."""
        state = self.states.get(event.match_id) or MatchState.new(event.match_id)
        state = self.states[event.match_id] = apply(state, event)
        if isinstance(event, FullTime):
            await self.report(event.match_id)

    async def report(self, match_id: str) -> None:
        """Publish the current state of ``match_id`` (retained, QoS 1)."""
        state = self.states[match_id]
        topic = consumer_state_topic(self.topics, self.consumer_id, match_id)
        await self.publisher.publish(topic, encode_state(state), qos=1, retain=True)
        self.reported += 1


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
    """The states consumers reported: ``{consumer_id: {match_id: state}}``.

    Waits until every consumer seen (and every one named in ``consumers``) has reported every
    match in ``expected``, or ``timeout_s`` passed; with no consumer named, waits at least
    ``settle_s`` for retained messages to arrive.
    """
    wanted = set(expected)
    got: dict[str, dict[str, MatchState]] = {c: {} for c in consumers}
    await source.subscribe(consumer_state_filter(topics), qos=1)

    complete = asyncio.Event()

    def done() -> bool:
        return bool(got) and all(wanted <= set(states) for states in got.values())

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
