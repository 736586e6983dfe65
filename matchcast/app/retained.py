"""matchcast's retained topics on a broker: find them, and clear them.

Three kinds of topic are retained under a root (see :class:`events.Topics`): match states,
replayer statuses and consumer-state reports. Each outlives its run: an interrupted replay's
state, every load run's states. :func:`find_retained` lists them; :func:`clear_retained`
removes them (an empty retained payload deletes a retained message).

Some brokers send no retained messages to a wildcard subscription (RabbitMQ 3.10). There,
the topics found are those that can be named: the state of ``match_id``, the statuses of the
replayers named (``replay --replayer``), and the states of the matches that the retained
replayer statuses list: the first :data:`consumers.MAX_DISCOVERED_PER_STATUS` of each, for a
status can list any number (:attr:`RetainedTopic.listed` says how many it did).

Given the nodes of a cluster, every node is searched and cleared, each on its own connection:
RabbitMQ 3.10 keeps each node's retained messages on that node alone (NATS replicates them,
and clearing them again on each node costs a publish each). The matches a status lists on any
node are looked for by name on every node: a replayer that failed over leaves states on the
node it left and its status on the node it moved to. Each topic found says the node it was
found on, and is cleared there.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import structlog

from consumers import listed_matches
from events import (
    BrokerError,
    DecodeError,
    Message,
    PublishRefusedError,
    SubscribeRefusedError,
    Topics,
    clip,
    decode_state,
    decode_status,
)
from matchcast.transport.connection import READER_QOS, BrokerURL, Protocol, describe
from matchcast.transport.mqtt import MqttClient

__all__ = ["RetainedScan", "RetainedTopic", "clear_retained", "find_retained", "scan_retained"]

_log = structlog.get_logger("matchcast.retained")

#: Seconds without a retained message after which the broker is taken to have sent them all.
QUIET_S = 0.5
#: Connections a node's clearing may take: a clearing publish whose acknowledgement timed out,
#: or whose connection was lost, is sent again on a new connection (a client id of its own).
#: Clearing is idempotent, and a replicated retained store (NATS JetStream) under load can take
#: longer than one timeout and drop the connection with it (a CI run: "Operation timed out",
#: then "The client is not currently connected").
CLEAR_TRIES = 3
#: Seconds before the second connection of a clearing (doubling).
CLEAR_RETRY_S = 0.5
#: Seconds a search for retained messages lasts at most.
MAX_WAIT_S = 10.0
#: Tries of a subscription the broker refuses, and the wait before the second (doubling): NATS
#: refuses a QoS 1 SUBSCRIBE while JetStream cannot create its consumer (a young or electing
#: cluster), and grants it moments later.
SUBSCRIBE_TRIES = 4
SUBSCRIBE_RETRY_S = 0.5
#: Tries of a node that takes the connection and sends no CONNACK: NATS leaves a new client
#: id's CONNECT unanswered now and then (3 of 36 in a young cluster here, for over 15 s), and
#: answers the next CONNECT, under a client id of its own, at once.
CONNECT_TRIES = 3

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
    matches: tuple[str, ...] = ()  # a replayer status: the matches it replays (the first ...)
    listed: int = 0  # a replayer status: how many matches it lists (more than ``matches``?)
    node: BrokerURL | None = None  # the node it was found on (each node keeps its own copy)


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
            status = decode_status(message.payload, topic=message.topic)
        except DecodeError:
            return RetainedTopic(message.topic, kind, None, "replayer status (unreadable)")
        matches = ", ".join(status.matches[:5]) + (" ..." if len(status.matches) > 5 else "")
        listed = listed_matches(status, "retained.status_limited", topic=message.topic)
        return RetainedTopic(
            message.topic,
            kind,
            None,
            f"replayer {status.replayer_id} {status.status}: {matches}",
            online=status.status == "online",
            matches=tuple(listed),
            listed=len(status.matches),
        )
    try:
        state = decode_state(message.payload, topic=message.topic)
        said = f"{state.status}, {state.scoreline}, {state.display_clock}, run {state.run}"
    except DecodeError:
        said = _minimal_report(message.payload) if kind == "consumer_state" else "unreadable"
    what = "consumer report" if kind == "consumer_state" else "state"
    return RetainedTopic(message.topic, kind, ident, f"{what}: {said}")


def _minimal_report(payload: bytes) -> str:
    """A consumer's report of ``score`` and ``status`` alone (what ``matchcast verify``
    accepts): ``finished, JPN 2-3 NED``; ``unreadable`` for anything else."""
    from matchcast.verify import read_report  # noqa: PLC0415 - only for a report no state reads

    fields, _problem = read_report(payload)
    if fields is None:
        return "unreadable"
    score = clip(" ".join(f"{team} {goals}" for team, goals in fields["score"].items()), 60)
    return f"{clip(fields['status'], 20)}, {score or 'no score'}"


async def _subscribe(client: MqttClient, topic_filter: str) -> None:
    """Subscribe, asking again (up to :data:`SUBSCRIBE_TRIES` times) when refused.

    Raises:
        SubscribeRefusedError: refused every time (an ACL, or a node that stays unready).
    """
    for attempt in range(1, SUBSCRIBE_TRIES + 1):
        try:
            await client.subscribe(topic_filter, qos=READER_QOS)
        except SubscribeRefusedError as err:
            if attempt == SUBSCRIBE_TRIES:
                raise
            _log.warning(
                "retained.subscribe_retried",
                broker=str(client.url),
                topic_filter=topic_filter,
                attempt=attempt,
                reason=err.reason,
            )
            await asyncio.sleep(SUBSCRIBE_RETRY_S * 2 ** (attempt - 1))
        else:
            return


async def _collect(
    client: MqttClient, filters: Sequence[str], topics: Topics, found: dict[str, RetainedTopic]
) -> None:
    """Subscribe to ``filters`` and take the retained messages until the broker goes quiet."""
    for topic_filter in filters:
        await _subscribe(client, topic_filter)
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


@dataclass(frozen=True, slots=True)
class RetainedScan:
    """What a search of every node found: the topics (each with its node), and the nodes that
    could not be searched, with the reason."""

    found: list[RetainedTopic]
    unreachable: dict[BrokerURL, str] = field(default_factory=dict)


def _nodes(url: BrokerURL | Sequence[BrokerURL]) -> tuple[BrokerURL, ...]:
    nodes = (url,) if isinstance(url, BrokerURL) else tuple(dict.fromkeys(url))  # each once
    if not nodes:
        raise ValueError("no broker to search")
    return nodes


async def _open(
    stack: contextlib.AsyncExitStack,
    where: BrokerURL | Sequence[BrokerURL],
    protocol: Protocol,
) -> MqttClient:
    """A connection to ``where``, entered on ``stack``; a silent node (no CONNACK) is asked
    again under a new client id, up to :data:`CONNECT_TRIES` times.

    Raises:
        BrokerError: refused, unreachable, or silent every time.
    """
    for attempt in range(1, CONNECT_TRIES + 1):
        client_id = f"matchcast-clear-{uuid.uuid4().hex[:8]}"
        try:
            return await stack.enter_async_context(
                MqttClient(where, client_id=client_id, protocol=protocol)
            )
        except BrokerError as err:
            if "no CONNACK" not in err.reason or attempt == CONNECT_TRIES:
                raise
            _log.warning(
                "retained.connect_retried", broker=err.url, attempt=attempt, reason=err.reason
            )
    raise AssertionError("unreachable")  # pragma: no cover


async def _connect_each(
    stack: contextlib.AsyncExitStack,
    nodes: Sequence[BrokerURL],
    unreachable: dict[BrokerURL, str],
    protocol: Protocol = "auto",
) -> dict[BrokerURL, MqttClient]:
    """A connection to each node of ``nodes`` that answers (one node: its error is raised).

    The nodes of a list run one engine: once a node is found to speak MQTT 3.1.1 only, the
    others are asked in 3.1.1 at once (RabbitMQ 3.10 never answers a v5 CONNECT: 3 s each).

    Raises:
        BrokerError: a single node did not answer, or none of the list did.
    """
    clients: dict[BrokerURL, MqttClient] = {}
    for node in nodes:
        try:
            client = await _open(stack, node, protocol)
        except BrokerError as err:
            if len(nodes) == 1:
                raise
            unreachable[node] = err.reason
            _log.warning("retained.node_skipped", broker=str(node), reason=err.reason)
            continue
        if client.protocol_version == "3.1.1":
            protocol = "3.1.1"
        clients[node] = client
    if not clients:
        reasons = "; ".join(f"{node}: {why}" for node, why in unreachable.items())
        raise BrokerError(describe(nodes), f"no node answered ({reasons})")
    return clients


async def scan_retained(
    url: BrokerURL | Sequence[BrokerURL],
    topics: Topics,
    *,
    match_id: str | None = None,
    select: Callable[[str], bool] | None = None,
    replayers: Sequence[str] = (),
    protocol: Protocol = "auto",
) -> RetainedScan:
    """matchcast's retained topics under ``topics.root`` on every node of ``url``.

    Args:
        url: the broker, or the nodes of a cluster: each is searched on its own.
        topics: the topic tree (its root).
        match_id: only this match's state and consumer reports, and the statuses of
            replayers that replayed only it.
        select: only the matches whose id it accepts (and no replayer status).
        replayers: replayer ids whose status topics are read by name too (for brokers that
            give wildcard subscriptions no retained messages).
        protocol: the MQTT version to speak (``auto`` falls back to 3.1.1).

    Raises:
        BrokerError: a single broker did not answer, or no node of the list did (a node of
            a list that does not answer is named in :attr:`RetainedScan.unreachable`).
    """
    nodes = _nodes(url)
    ids = match_id or "+"
    unreachable: dict[BrokerURL, str] = {}
    found: dict[BrokerURL, dict[str, RetainedTopic]] = {}
    async with contextlib.AsyncExitStack() as stack:
        clients = await _connect_each(stack, nodes, unreachable, protocol)
        found = {node: {} for node in clients}
        filters = [topics.state(ids), topics.consumer_state("+", ids)]
        if select is None:
            filters += [topics.status(), *(topics.status(r) for r in replayers)]
        async with asyncio.TaskGroup() as tg:
            for node, client in clients.items():
                tg.create_task(_collect(client, filters, topics, found[node]))
        # A broker that gives wildcards no retained messages: name the listed matches' topics,
        # on every node (a status on one node may list states left on another).
        listed = {
            m for on_node in found.values() for item in on_node.values() for m in item.matches
        }
        if match_id is not None:
            listed = {match_id}
        elif select is not None:
            listed = {m for m in listed if select(m)}
        async with asyncio.TaskGroup() as tg:
            for node, client in clients.items():
                missing = [
                    topics.state(m) for m in sorted(listed) if topics.state(m) not in found[node]
                ]
                if missing:
                    tg.create_task(_collect(client, missing, topics, found[node]))
    out = []
    for node, on_node in found.items():
        for item in on_node.values():
            if item.kind != "status":
                if select is not None and not select(item.match_id or ""):
                    continue
            elif match_id is not None and item.matches != (match_id,):
                continue  # a replayer of other matches too
            out.append(replace(item, node=node))
    order = {node: i for i, node in enumerate(nodes)}
    out.sort(key=lambda t: (t.kind != "state", t.topic, order[t.node] if t.node else 0))
    return RetainedScan(out, unreachable)


async def find_retained(
    url: BrokerURL | Sequence[BrokerURL],
    topics: Topics,
    *,
    match_id: str | None = None,
    select: Callable[[str], bool] | None = None,
    replayers: Sequence[str] = (),
) -> list[RetainedTopic]:
    """:func:`scan_retained`'s topics, when every node answered.

    Raises:
        BrokerError: a node did not answer (the first one, with its reason).
    """
    scan = await scan_retained(url, topics, match_id=match_id, select=select, replayers=replayers)
    for node, reason in scan.unreachable.items():
        raise BrokerError(str(node), reason)
    return scan.found


async def clear_retained(
    url: BrokerURL | Sequence[BrokerURL],
    items: Sequence[RetainedTopic],
    *,
    protocol: Protocol = "auto",
) -> int:
    """Remove the retained messages of ``items`` (an empty retained payload each, on the node
    each was found on; on ``url`` if it names none); how many were removed.

    A status saying ``online`` is kept: its replayer runs, and would be shown as gone.

    Raises:
        BrokerError: a node did not answer (those before it are cleared).
    """
    by_node: dict[BrokerURL | None, list[RetainedTopic]] = {}
    for item in items:
        if not item.online:
            by_node.setdefault(item.node, []).append(item)
    cleared = 0  # ``protocol`` becomes 3.1.1 once a node speaks only that (see _connect_each)
    for node, doomed in by_node.items():
        where: BrokerURL | Sequence[BrokerURL] = url if node is None else node
        protocol = await _clear_on(where, [item.topic for item in doomed], protocol)
        cleared += len(doomed)
        shown = str(where) if isinstance(where, BrokerURL) else describe(where)
        _log.info("retained.cleared", topics=len(doomed), broker=shown)
    return cleared


async def _clear_on(
    where: BrokerURL | Sequence[BrokerURL], topics: Sequence[str], protocol: Protocol
) -> Protocol:
    """Publish the empty retained message that clears each of ``topics`` on ``where``; the
    protocol the node speaks.

    A publish that failed (its acknowledgement timed out, or the connection was lost) is sent
    again, with the ones after it, on a new connection, up to :data:`CLEAR_TRIES` connections.
    A publish the broker refused is not: it is refused again.

    Raises:
        BrokerError: the node did not answer, refused a publish, or failed every try.
    """
    left = list(topics)
    for attempt in range(1, CLEAR_TRIES + 1):
        async with contextlib.AsyncExitStack() as stack:
            client = await _open(stack, where, protocol)
            if client.protocol_version == "3.1.1":
                protocol = "3.1.1"
            try:
                while left:
                    await client.publish(left[0], b"", qos=1, retain=True)
                    del left[0]
            except PublishRefusedError:
                raise
            except BrokerError as err:
                if attempt == CLEAR_TRIES:
                    raise
                _log.warning(
                    "retained.clear_retried",
                    topic=left[0],
                    attempt=attempt,
                    left=len(left),
                    reason=str(err),
                )
            else:
                return protocol
        await asyncio.sleep(CLEAR_RETRY_S * 2 ** (attempt - 1))
    raise AssertionError("unreachable")  # pragma: no cover
