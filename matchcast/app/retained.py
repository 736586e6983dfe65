"""matchcast's retained topics on a broker: find them, and clear them.

Three kinds of topic are retained under a root (see :class:`events.Topics`): match states,
replayer statuses and consumer-state reports. Each outlives its run: an interrupted replay's
state, every load run's states. :func:`find_retained` lists them; :func:`clear_retained`
removes them (an empty retained payload deletes a retained message).

Some brokers send no retained messages to a wildcard subscription (RabbitMQ 3.10). There,
the topics found are those that can be named: the state of ``match_id``, the statuses of the
replayers named (``replay --replayer-id``), and the states of the matches that the retained
replayer statuses list.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import structlog
from pydantic import ValidationError

from events import DecodeError, Message, Topics, decode_state
from matchcast.contract.status import ReplayerStatus
from matchcast.transport.connection import BrokerURL
from matchcast.transport.mqtt import MqttClient

__all__ = ["RetainedTopic", "clear_retained", "find_retained"]

_log = structlog.get_logger("matchcast.retained")

#: Seconds without a retained message after which the broker is taken to have sent them all.
QUIET_S = 0.5
#: Seconds a search for retained messages lasts at most.
MAX_WAIT_S = 10.0

RetainedKind = Literal["state", "status", "consumer_state"]


@dataclass(frozen=True, slots=True)
class RetainedTopic:
    """A retained topic of matchcast's: where, what kind, the match it is about, and a line
    saying what it holds."""

    topic: str
    kind: RetainedKind
    match_id: str | None
    summary: str
    online: bool = False  # a replayer status saying online: its replayer runs
    matches: tuple[str, ...] = ()  # a replayer status: the matches it replays


def _kind(topics: Topics, topic: str) -> tuple[RetainedKind, str] | None:
    """``(kind, match id or replayer id)`` of one of matchcast's retained topics."""
    matched = topics.match(topic)
    if matched is None:
        return None
    kind, ids = matched
    if kind in ("state", "consumer_state"):
        return kind, ids["match_id"]
    if kind == "status":
        return kind, ids["replayer_id"]
    return None


def _describe(topics: Topics, message: Message) -> RetainedTopic | None:
    kind_id = _kind(topics, message.topic)
    if kind_id is None:
        return None
    kind, ident = kind_id
    if kind == "status":
        try:
            status = ReplayerStatus.model_validate_json(message.payload)
        except ValidationError:
            return RetainedTopic(message.topic, kind, None, "replayer status (unreadable)")
        matches = ", ".join(status.matches[:5]) + (" ..." if len(status.matches) > 5 else "")
        return RetainedTopic(
            message.topic,
            kind,
            None,
            f"replayer {status.replayer_id} {status.status}: {matches}",
            online=status.status == "online",
            matches=tuple(status.matches),
        )
    try:
        state = decode_state(message.payload, topic=message.topic)
        said = f"{state.status}, {state.scoreline}, {state.display_clock}, run {state.run}"
    except DecodeError:
        said = "unreadable"
    what = "consumer report" if kind == "consumer_state" else "state"
    return RetainedTopic(message.topic, kind, ident, f"{what}: {said}")


async def _collect(
    client: MqttClient, filters: Sequence[str], topics: Topics, found: dict[str, RetainedTopic]
) -> None:
    """Subscribe to ``filters`` and take the retained messages until the broker goes quiet."""
    for topic_filter in filters:
        await client.subscribe(topic_filter, qos=1)
    messages = client.messages()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(MAX_WAIT_S):
            while True:
                async with asyncio.timeout(QUIET_S):
                    message = await anext(messages)
                if not message.retain or not message.payload:
                    continue
                described = _describe(topics, message)
                if described is not None:
                    found[message.topic] = described


async def find_retained(
    url: BrokerURL | Sequence[BrokerURL],
    topics: Topics,
    *,
    match_id: str | None = None,
    select: Callable[[str], bool] | None = None,
    replayers: Sequence[str] = (),
) -> list[RetainedTopic]:
    """matchcast's retained topics on the broker at ``url`` under ``topics.root``.

    Args:
        url: the broker.
        topics: the topic tree (its root).
        match_id: only this match's state and consumer reports, and the statuses of
            replayers that replayed only it.
        select: only the matches whose id it accepts (and no replayer status).
        replayers: replayer ids whose status topics are read by name too (for brokers that
            give wildcard subscriptions no retained messages).
    """
    ids = match_id or "+"
    found: dict[str, RetainedTopic] = {}
    client_id = f"matchcast-clear-{uuid.uuid4().hex[:8]}"
    async with MqttClient(url, client_id=client_id) as client:
        filters = [topics.state(ids), topics.consumer_state("+", ids)]
        if select is None:
            filters += [topics.status(), *(topics.status(r) for r in replayers)]
        await _collect(client, filters, topics, found)
        # A broker that gives wildcards no retained messages: name the listed matches' topics.
        listed = {m for item in found.values() for m in item.matches}
        if match_id is not None:
            listed = {match_id}
        elif select is not None:
            listed = {m for m in listed if select(m)}
        missing = [topics.state(m) for m in sorted(listed) if topics.state(m) not in found]
        if missing:
            await _collect(client, missing, topics, found)
    out = []
    for item in found.values():
        if item.kind != "status":
            if select is not None and not select(item.match_id or ""):
                continue
        elif match_id is not None and item.matches != (match_id,):
            continue  # a replayer of other matches too
        out.append(item)
    return sorted(out, key=lambda t: (t.kind != "state", t.topic))


async def clear_retained(
    url: BrokerURL | Sequence[BrokerURL], items: Sequence[RetainedTopic]
) -> int:
    """Remove the retained messages of ``items`` (an empty retained payload each); how many.

    A status saying ``online`` is kept: its replayer runs, and would be shown as gone.
    """
    cleared = 0
    client_id = f"matchcast-clear-{uuid.uuid4().hex[:8]}"
    async with MqttClient(url, client_id=client_id) as client:
        for item in items:
            if item.online:
                continue
            await client.publish(item.topic, b"", qos=1, retain=True)
            cleared += 1
    _log.info("retained.cleared", topics=cleared, broker=str(url))
    return cleared
