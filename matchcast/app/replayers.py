"""Follow the replayers' retained status topics: which matches lost their replayer.

A replayer's status is ``online`` while it runs and ``offline`` after, from its last will when
it died (``kill -9``, a lost connection) without a word. ``watch`` and the page subscribe here
beside their runner, and show a match whose replayer is offline as such.

Anyone who may publish a status can list any match ids in it, so the book reads the first
:data:`consumers.MAX_DISCOVERED_PER_STATUS` of a status, and keeps at most
:data:`consumers.MAX_MATCHES` matches (as many as a runner tracks), forgetting the least
recently named first.
"""

from __future__ import annotations

import datetime as dt
import itertools
import uuid
from collections.abc import Callable, Sequence
from typing import Literal

import structlog

from consumers import MAX_MATCHES, listed_matches
from events import (
    BrokerError,
    ConnectionLostError,
    DecodeError,
    Message,
    ReplayerStatus,
    Topics,
    decode_status,
)
from matchcast.transport.connection import READER_QOS, BrokerURL, Protocol
from matchcast.transport.mqtt import MqttClient

__all__ = ["ReplayerBook", "Rivals", "follow_replayers"]

_log = structlog.get_logger("matchcast.replayers")


Status = Literal["online", "offline"]


class ReplayerBook:
    """Per match, the status of its latest replayer: the one that started last (``at``: a
    last will carries its replayer's start), so a replayer that died before another took the
    match over does not mark the match offline. A replayer's own messages replace each other
    in the order they arrive (its will is older than its ``online``, yet comes after)."""

    def __init__(self, limit: int = MAX_MATCHES) -> None:
        self.limit = limit
        # Least recently named first: the first forgotten past ``limit``.
        self._latest: dict[str, tuple[dt.datetime, str, Status]] = {}
        self._forgot = False

    def __len__(self) -> int:
        """How many matches the book keeps (at most ``limit``)."""
        return len(self._latest)

    def update(self, status: ReplayerStatus) -> list[tuple[str, Status]]:
        """Take ``status``; the matches whose status it changes, with the new status."""
        listed = listed_matches(
            status, "replayer_status.matches_limited", replayer_id=status.replayer_id
        )
        changed: list[tuple[str, Status]] = []
        for match_id in listed:
            known = self._latest.pop(match_id, None)  # named again: the last to forget
            if known is not None and known[1] != status.replayer_id and known[0] > status.at:
                self._latest[match_id] = known
                continue  # an older replayer's
            at = max(status.at, known[0]) if known is not None else status.at
            self._latest[match_id] = (at, status.replayer_id, status.status)
            if known is None or known[2] != status.status:
                changed.append((match_id, status.status))
        self._forget_oldest()
        return changed

    def _forget_oldest(self) -> None:
        excess = len(self._latest) - self.limit
        if excess <= 0:
            return
        for match_id in list(itertools.islice(self._latest, excess)):
            del self._latest[match_id]
        if not self._forgot:  # once: a flood of statuses must not flood the log too
            self._forgot = True
            _log.warning("replayer_status.forgotten", forgotten=excess, limit=self.limit)


async def follow_replayers(
    url: BrokerURL | Sequence[BrokerURL],
    topics: Topics,
    on_change: Callable[[str, Status], None],
    protocol: Protocol = "auto",
) -> None:
    """Call ``on_change(match_id, status)`` when the status of a match's replayer changes
    (see :class:`ReplayerBook`), retained statuses first, until cancelled. Best effort: an
    unreadable status is skipped; a lost connection is replaced (the client's failover over
    the list) and the statuses read afresh; a broker that stays away, or refuses the
    subscription, ends the following (logged), never the caller."""
    book = ReplayerBook()
    try:
        status_id = f"matchcast-status-{uuid.uuid4().hex[:8]}"
        async with MqttClient(url, client_id=status_id, protocol=protocol) as c:
            while True:
                try:
                    await _read_statuses(c, topics, book, on_change)
                except ConnectionLostError as err:
                    _log.info("replayer_status.reconnecting", reason=err.reason)
                    await c.reconnect()
                else:
                    return  # closed by us
    except BrokerError as err:
        _log.warning("replayer_status.lost", reason=str(err))


async def _read_statuses(
    client: MqttClient,
    topics: Topics,
    book: ReplayerBook,
    on_change: Callable[[str, Status], None],
) -> None:
    await client.subscribe(topics.status(), qos=READER_QOS)
    async for message in client.messages():
        if not message.payload:
            continue  # a cleared status
        try:
            status = decode_status(message.payload, topic=message.topic)
        except DecodeError as err:
            _log.info("replayer_status.rejected", topic=message.topic, reason=err.reason)
            continue
        for match_id, said in book.update(status):
            on_change(match_id, said)


class Rivals:
    """Another replayer online on a match this one replays: said once per replayer and match.

    Consumers follow a match's newest run and drop every message of an older one as stale
    (docs/wire-format.md, runs), so two replayers on one match are never merged: the one
    that started last wins, and the other's events are dropped until it ends.

    Args:
        replayer_id: this replayer's id.
        match_ids: its matches.
        started_ms: when it started (ms since the epoch), to tell which of two is newer.
        limit: pairs remembered as said (a flood of statuses costs a bounded set).
    """

    def __init__(
        self, replayer_id: str, match_ids: Sequence[str], started_ms: int, limit: int = 1024
    ) -> None:
        self.replayer_id = replayer_id
        self.match_ids = set(match_ids)
        self.started_ms = started_ms
        self.limit = limit
        self.said: set[tuple[str, str]] = set()

    def heard(self, message: Message) -> None:
        """Take a message of the status topics: log ``replayer.match_shared`` (a warning)
        for each match of ours another replayer is online on, once each."""
        if not message.payload:
            return  # a status removed
        try:
            status = decode_status(message.payload, topic=message.topic)
        except DecodeError:
            _log.debug("replayer_status.rejected", topic=message.topic)
            return
        for warning in self.take(status):
            _log.warning("replayer.match_shared", replayer_id=self.replayer_id, **warning)

    def take(self, status: ReplayerStatus) -> list[dict[str, object]]:
        """The warnings ``status`` calls for (each a log line's fields), once each."""
        if status.status != "online" or status.replayer_id == self.replayer_id:
            return []
        runs = {p.match_id: p for p in status.playback}
        out: list[dict[str, object]] = []
        for match_id in listed_matches(
            status, "replayer_status.matches_limited", replayer_id=status.replayer_id
        ):
            key = (status.replayer_id, match_id)
            if match_id not in self.match_ids or key in self.said:
                continue
            played = runs.get(match_id)
            if played is not None and played.state == "stopped":
                continue
            if len(self.said) < self.limit:
                self.said.add(key)
            # Its run of the match, else (a status before the match started) when it spoke.
            began = played.run if played is not None else int(status.at.timestamp() * 1000)
            newer = began > self.started_ms
            out.append(
                {
                    "match_id": match_id,
                    "other_replayer": status.replayer_id,
                    "consumers": (
                        f"follow {status.replayer_id}'s newer run and drop this replay's "
                        "events as stale"
                        if newer
                        else f"follow this replay's newer run and drop {status.replayer_id}'s "
                        "events as stale until it ends"
                    ),
                    "hint": f"matchcast control stop --replayer {status.replayer_id}"
                    if not newer
                    else "stop one of the two replays",
                }
            )
        return out
