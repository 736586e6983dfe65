"""The fast client's side of an MQTT session, across its connections: the subscriptions, and
the QoS 2 messages received and not yet released.

Every subscription is remembered, and restored on a new connection where the broker kept no
session for us (:meth:`Subscriptions.restore`). A filter the current connection already has is
not sent again, so the broker does not send its retained messages twice. The client id, clean
start and session-present flag are :class:`matchcast.transport.failover.Session`'s, shared with
the aiomqtt client.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import structlog

from events import BrokerError, SubscribeRefusedError

if TYPE_CHECKING:
    from matchcast.transport.fast.link import Link

__all__ = ["UPGRADE_RETRY_MAX_S", "UPGRADE_RETRY_S", "Subscriptions"]

_log = structlog.get_logger("matchcast.fastmqtt")

#: A subscription restored at QoS 0 asks for its own QoS again after this, doubling to the max.
UPGRADE_RETRY_S = 0.5
UPGRADE_RETRY_MAX_S = 5.0


class Subscriptions:
    """What the client subscribed to, and what the current connection has of it."""

    def __init__(self) -> None:
        #: Topic filter -> QoS of every subscription, restored after a reconnect.
        self.wanted: dict[str, int] = {}
        #: Ids of QoS 2 messages received and not released yet; the broker's session keeps
        #: the other half, so they go with it.
        self.inbound_qos2: set[int] = set()
        #: What the current connection has.
        self._active: dict[str, int] = {}
        #: Filters restored at QoS 0 while their own QoS is asked for again (:meth:`restore`).
        self._degraded: dict[str, int] = {}
        self._upgrades: set[asyncio.Task[None]] = set()

    def new_connection(self) -> None:
        """A new connection has nothing yet."""
        self._active.clear()
        self._degraded.clear()

    async def subscribe(self, link: Link, topic_filter: str, qos: int) -> None:
        """Subscribe on ``link`` and remember it, unless the connection already has it.

        Raises:
            BrokerError: the broker refused it (then it is not remembered) or the connection
                is gone.
        """
        if link.closed:
            raise link.error or BrokerError(str(link.url), "not connected")
        self.wanted[topic_filter] = qos
        if self._active.get(topic_filter) == qos or self._degraded.get(topic_filter) == qos:
            return  # restored, or restored at QoS 0 while this QoS is asked for again
        self._degraded.pop(topic_filter, None)
        try:
            await link.subscribe(topic_filter, qos)
        except SubscribeRefusedError:
            self.wanted.pop(topic_filter, None)
            raise
        self._active[topic_filter] = qos

    async def restore(self, link: Link, *, kept: bool) -> None:
        """Subscribe again on ``link`` to what the broker forgot: everything, unless it
        ``kept`` our session.

        A QoS 1 or 2 subscription the new node refuses is taken at QoS 0 at once and asked for
        again at its own QoS beside the traffic (:meth:`_upgrade`): NATS refuses a QoS 1
        SUBSCRIBE after 4 s while JetStream has no leader (4-9 s after the node that led it
        died), yet delivers at QoS 0 at once. A clean session has no queue to lose meanwhile;
        what QoS 1 adds on one connection (the broker's redelivery) is back once granted.

        Raises:
            SubscribeDroppedError: the broker closed the connection in answer to one.
            BrokerError: a QoS 0 subscription refused, or the connection is gone.
        """
        if kept:
            self._active = dict(self.wanted)
            return
        self.inbound_qos2.clear()
        for topic_filter, qos in list(self.wanted.items()):
            try:
                await self.subscribe(link, topic_filter, qos)
            except SubscribeRefusedError as err:
                if qos == 0:
                    raise
                _log.warning(
                    "broker.subscription_degraded",
                    broker=str(link.url),
                    topic_filter=topic_filter,
                    qos=qos,
                    reason=err.reason,
                )
                await self.subscribe(link, topic_filter, 0)
                self.wanted[topic_filter] = qos  # what to restore next time
                self._degraded[topic_filter] = qos
                task = asyncio.create_task(self._upgrade(link, topic_filter, qos))
                self._upgrades.add(task)
                task.add_done_callback(self._upgrades.discard)

    async def _upgrade(self, link: Link, topic_filter: str, qos: int) -> None:
        """Ask for ``topic_filter`` at ``qos`` again on ``link``, with backoff, until granted
        or the connection ends (the next one restores the subscription afresh)."""
        wait = UPGRADE_RETRY_S
        tries = 1
        while not link.closed:
            await asyncio.sleep(wait)
            wait = min(wait * 2, UPGRADE_RETRY_MAX_S)
            tries += 1
            try:
                await link.subscribe(topic_filter, qos)
            except SubscribeRefusedError:
                continue
            except BrokerError:
                return  # the connection is gone: the next reconnect restores it
            if not link.closed:
                self._degraded.pop(topic_filter, None)
                self._active[topic_filter] = qos
                _log.info(
                    "broker.subscription_restored",
                    broker=str(link.url),
                    topic_filter=topic_filter,
                    qos=qos,
                    tries=tries,
                )
            return

    def cancel(self) -> None:
        """Stop asking for any QoS again (the client is leaving)."""
        for task in list(self._upgrades):
            task.cancel()
