"""Late join where wildcard subscriptions get no retained messages (RabbitMQ 3.10).

A consumer gets a match's state by the retained snapshot on ``{root}/matches/{match}/state``.
mosquitto and NATS hand retained messages to a ``{root}/matches/+/state`` subscription;
RabbitMQ 3.10 hands them only to a subscription of the exact topic (and keeps them on the node
they were published to). So wherever the runner knows a match id, from an event or a state it
has already seen, it also subscribes to that match's exact state topic: on every
(re)subscription, which is how a consumer that failed over to another node, or lost its
session, gets its snapshot there; and when it asks for a snapshot after a gap. Elsewhere the
extra subscription costs a duplicate snapshot, which the sequencer ignores (a state is applied
by its seq, once).

A consumer that knows no match id yet learns them from the retained status of a replayer it is
told the id of (``Runner(replayers=...)``, ``--replayer ID``): the status lists its matches
(:class:`events.ReplayerStatus`), and the runner subscribes to each one's exact state topic
(:class:`StatusDiscovery`). That is how a consumer joining after full time, or during a pause,
gets the score at once on RabbitMQ, where no event follows to name the match. A named replayer
whose status has not arrived ``REPLAYER_WAIT_S`` seconds after subscribing is reported once
(``replayer.not_found``, a warning: a mistyped id would otherwise wait in silence); the runner
goes on waiting, and says ``replayer.found`` if it turns up later (:class:`ReplayerWatch`).

A new connection that resumed no session (a clean one, or a persistent session the broker
lost or the consumer gave up) has missed what was published while it was away, and no event may
follow to show the gap (the match ended meanwhile): each known match then takes a newer snapshot
as the state, reported as a resynchronisation (``state.synchronised`` with ``reason=gap``).
Without it a consumer whose outage covered full time stayed on the score at the loss for good,
though the broker held the final state (a tester's run). A source says whether its connection
resumed a session (``session_resumed``); :func:`resumed` reads it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

import structlog

from consumers._sequencer import Sequencer
from events import (
    ConnectionLostError,
    MatchcastError,
    Message,
    MessageSource,
    ReplayerStatus,
    Topics,
    decode_status,
)

__all__ = [
    "MAX_DISCOVERED_PER_STATUS",
    "REPLAYER_WAIT_S",
    "ReplayerWatch",
    "StatusDiscovery",
    "exact_state_topics",
    "expect_snapshots",
    "listed_matches",
    "resumed",
    "subscribe_exact",
    "subscribe_exact_states",
]


class _HasSequencer(Protocol):
    seq: Sequencer


_log = structlog.get_logger("matchcast.consumer")


def exact_state_topics(topics: Topics, match_filter: str, known: Iterable[str]) -> list[str]:
    """The exact state topics of the ``known`` match ids; none when ``match_filter`` already
    names one match (its subscription is exact)."""
    if match_filter != "+":
        return []
    return [topics.state(m) for m in sorted(known)]


def expect_snapshots(lanes: Iterable[_HasSequencer]) -> None:
    """Let each lane's sequencer take a newer snapshot as the state, as after a gap."""
    for lane in lanes:
        seq = lane.seq
        if seq.state is not None and seq.resync_from is None:
            seq.resync_from = seq.state.last_seq + 1
            seq.uncounted = True
            _log.info("state.resync_expected", match_id=seq.match_id, after=seq.state.last_seq)


def resumed(source: MessageSource) -> bool:
    """Whether ``source``'s connection resumed a session: what was published while it was away
    comes queued. A source that does not say (a test's stand-in) resumed none."""
    return bool(getattr(source, "session_resumed", False))


async def subscribe_exact_states(
    source: MessageSource,
    topics: Topics,
    match_filter: str,
    known: Mapping[str, _HasSequencer],
    qos: int,
) -> None:
    """Subscribe to the exact state topic of every ``known`` match (see the module docstring);
    a refusal is logged and costs only that match's snapshot.

    Raises:
        ConnectionLostError: the connection ended meanwhile.
    """
    await subscribe_exact(source, exact_state_topics(topics, match_filter, known), qos)


async def subscribe_exact(
    source: MessageSource, state_topics: Iterable[str], qos: int, *, lost_ends: bool = True
) -> None:
    """Subscribe to each exact state topic; a refusal is logged and costs that topic only.

    Raises:
        ConnectionLostError: the connection ended (:class:`events.SubscribeDroppedError`:
            in answer to one of these), unless ``lost_ends`` is False (a subscription beside
            the reader, which reports the loss itself): then it is logged like a refusal.
    """
    for topic in state_topics:
        try:
            await source.subscribe(topic, qos=qos)
        except ConnectionLostError:
            if lost_ends:
                raise
            _log.info("state.exact_not_subscribed", topic=topic, reason="connection lost")
            return
        except MatchcastError as err:
            _log.warning("state.exact_not_subscribed", topic=topic, reason=str(err))
        else:
            _log.debug("state.exact_subscribed", topic=topic)


#: Match ids read of one replayer status: a replay day is 64 matches; a forged status listing
#: 100,000 would otherwise cost as many SUBSCRIBEs here, as many entries in the views'
#: replayer books (``watch``, ``web``) and as many lookups in ``clear``. The rest are ignored.
MAX_DISCOVERED_PER_STATUS = 1000


def listed_matches(status: ReplayerStatus, event: str, **context: object) -> list[str]:
    """The match ids of ``status`` a reader takes: the first :data:`MAX_DISCOVERED_PER_STATUS`.
    A status that lists more is logged as ``event`` (each reader's own name), with
    ``context``, how many it listed and the limit."""
    if len(status.matches) > MAX_DISCOVERED_PER_STATUS:
        _log.warning(event, **context, listed=len(status.matches), limit=MAX_DISCOVERED_PER_STATUS)
    return list(status.matches[:MAX_DISCOVERED_PER_STATUS])


class StatusDiscovery:
    """The exact state topics named by replayer statuses, subscribed once per connection.

    Args:
        topics: the topic tree.
        match_filter: the runner's match filter; a named match needs no discovery (its
            subscription is exact already).
        limit: match ids remembered per connection (the runner's bound on matches).
    """

    def __init__(self, topics: Topics, match_filter: str, limit: int) -> None:
        self.topics = topics
        self.match_filter = match_filter
        self.limit = limit
        self._asked: set[str] = set()

    def reset(self) -> None:
        """A new connection: its subscriptions start from nothing."""
        self._asked.clear()

    def new_topics(self, message: Message, known: Mapping[str, object]) -> list[str]:
        """The exact state topics to subscribe to for the status in ``message``: its matches
        not already known or asked for, up to the limit.

        Raises:
            DecodeError: the payload is not a replayer status.
        """
        if not message.payload:  # a cleared status
            return []
        status = decode_status(message.payload, topic=message.topic)
        if self.match_filter != "+":
            return []
        fresh: list[str] = []
        listed = listed_matches(status, "state.discovery_limited", replayer_id=status.replayer_id)
        for match_id in listed:
            if match_id in known or match_id in self._asked:
                continue
            if len(self._asked) >= self.limit:
                _log.warning(
                    "state.discovery_limited", replayer_id=status.replayer_id, limit=self.limit
                )
                break
            self._asked.add(match_id)
            fresh.append(self.topics.state(match_id))
        return fresh


#: Seconds a named replayer's status may take to arrive, after the subscription, before the
#: consumer says it has none (once; it goes on waiting: the replayer may start later).
REPLAYER_WAIT_S = 5.0


class ReplayerWatch:
    """The named replayers whose status has not arrived: each reported once after a wait,
    and again if it turns up after that.

    Args:
        topics: the topic tree (the status topics, for the log).
        replayers: the ids named (``--replayer``).
        notify: called with ``(replayer_id, False)`` when its status has not arrived within
            the wait, and ``(replayer_id, True)`` when it arrives after that.
    """

    def __init__(
        self,
        topics: Topics,
        replayers: Sequence[str],
        notify: Callable[[str, bool], None] | None = None,
    ) -> None:
        self.topics = topics
        self.notify = notify
        self._waiting = list(replayers)  # in the order named
        self._reported: set[str] = set()

    @property
    def waiting(self) -> list[str]:
        """The named replayers no status of which has arrived yet."""
        return list(self._waiting)

    async def wait(self, seconds: float) -> None:
        """After ``seconds``, report each named replayer whose status has not arrived."""
        await asyncio.sleep(seconds)
        for replayer_id in self._waiting:
            if replayer_id in self._reported:
                continue
            self._reported.add(replayer_id)
            _log.warning(
                "replayer.not_found",
                replayer_id=replayer_id,
                topic=self.topics.status(replayer_id),
                waited_s=seconds,
                hint="still waiting: it may start later; `matchcast control status` lists "
                "the replayers online",
            )
            self._tell(replayer_id, found=False)

    def arrived(self, replayer_id: str) -> None:
        """A status of ``replayer_id`` arrived (a readable one)."""
        if replayer_id not in self._waiting:
            return
        self._waiting.remove(replayer_id)
        if replayer_id in self._reported:
            _log.info("replayer.found", replayer_id=replayer_id)
            self._tell(replayer_id, found=True)

    def _tell(self, replayer_id: str, *, found: bool) -> None:
        if self.notify is None:
            return
        try:
            self.notify(replayer_id, found)
        except Exception:  # a hint that failed to print costs the hint only
            _log.exception("replayer.notify_failed", replayer_id=replayer_id)
