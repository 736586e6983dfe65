"""``run_watch``: subscribers run against a broker, through reconnects and failovers."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Literal

import structlog

from consumers import MAX_MATCHES, Runner, Subscriber
from events import (
    BrokerError,
    ConnectionLostError,
    MatchState,
    SubscribeDroppedError,
    SubscribeRefusedError,
    Topics,
)
from matchcast.transport.clients import ClientKind, mqtt_client
from matchcast.transport.connection import BrokerURL, Protocol
from matchcast.transport.mqtt import MqttClient

if TYPE_CHECKING:
    from matchcast.transport.fastmqtt import FastClient

__all__ = ["run_watch"]

_log = structlog.get_logger("matchcast.app")

#: Failed subscriptions in a row after a failover before a consumer gives up.
_RESUBSCRIBE_TRIES = 5


async def run_watch(
    url: BrokerURL | Sequence[BrokerURL],
    subscribers: Sequence[Subscriber],
    *,
    topics: Topics | None = None,
    match_filter: str = "+",
    until_finished: set[str] | Literal["live"] | None = None,
    qos: int = 1,
    client_id: str | None = None,
    protocol: Protocol = "auto",
    runner: Runner | None = None,
    clean_start: bool = True,
    session_expiry: int | None = None,
    client: ClientKind | str = ClientKind.aiomqtt,
    replayers: Sequence[str] = (),
) -> dict[str, MatchState]:
    """Run subscribers against the broker until stopped, or until every match named in
    ``until_finished`` has reached full time. Returns the final states.

    Full time counts for a run seen live: one live when the watch joined, or one that started
    after. A finished state retained by a run that ended before (the first state seen of its
    run) ends nothing, nor does a run that stops (``replay_stopped``): it waits for the next.
    ``until_finished="live"`` follows every match seen live instead, and returns once each has
    ended (full time, or its replay stopped), waiting for a first one to start.

    Pass ``runner`` to watch its ``subscribed`` event or call its ``stop()`` from outside.
    ``clean_start=False`` with a fixed ``client_id`` (and, on MQTT 5, a ``session_expiry``
    in seconds) resumes the broker session: what was published while away is delivered.
    ``client`` picks the MQTT client (:func:`mqtt_client`); the fast one hands the runner each
    read's messages in one batch.

    The connection is closed before the lanes drain, so nothing is acknowledged to the
    broker that the handlers will not see. A lost connection is replaced with backoff
    (:meth:`matchcast.transport.mqtt.MqttClient.reconnect`), up to its ``max_outage``.
    """
    follow_live = until_finished == "live"
    remaining = set() if until_finished is None or follow_live else set(until_finished)
    subs = list(subscribers)
    if remaining or follow_live:
        finisher = Subscriber("until-finished")
        # The runs seen before their end, per match: a state that arrives already finished
        # (retained by a run that ended before we joined) ends nothing.
        live_runs: set[tuple[str, int]] = set()

        def _check(state: MatchState) -> None:
            key = (state.match_id, state.run)
            if state.status not in ("finished", "stopped"):
                if key not in live_runs and len(live_runs) < MAX_MATCHES * 4:
                    live_runs.add(key)
                    if follow_live:
                        remaining.add(state.match_id)
            elif key in live_runs and (state.status == "finished" or follow_live):
                live_runs.discard(key)
                remaining.discard(state.match_id)
                if not remaining:
                    assert runner is not None
                    runner.stop()

        finisher.on()(lambda _event, state: _check(state))
        finisher.on_state(_check)
        subs.append(finisher)
    if runner is None:
        runner = Runner(subs, topics=topics, match_filter=match_filter, replayers=replayers)
    else:
        runner.subscribers.extend(s for s in subs if s not in runner.subscribers)
    # Its dead letters go to a topic named after its broker user, which the ACL lets it write.
    runner.use_broker_user((url if isinstance(url, BrokerURL) else url[0]).username)
    # The connection closes (last in, first out) before the runner drains its lanes.
    async with (
        runner,
        mqtt_client(
            client,
            url,
            client_id=client_id,
            protocol=protocol,
            clean_start=clean_start,
            session_expiry=session_expiry,
        ) as connection,
    ):
        await _run_through_failovers(runner, connection, qos)
    return runner.states


async def _unless_stopped(runner: Runner, step: Awaitable[None]) -> None:
    """Await ``step``; cancel it if the runner is stopped first (a reconnect can take up to
    ``max_outage``: a stop must not wait for it)."""
    task = asyncio.ensure_future(step)
    stop = asyncio.ensure_future(runner.wait_stopping())
    try:
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (task, stop):
            pending.cancel()
        await asyncio.gather(task, stop, return_exceptions=True)
    if not task.cancelled():
        task.result()  # its error, if it failed


def _replacement(connection: MqttClient | FastClient, abandoned: bool) -> Awaitable[None]:
    """The reconnect that replaces ``connection``: on the same node first when its session
    was given up there (the node is up), else over the failover schedule."""
    if abandoned:
        return connection.reconnect(same_node_first=True)
    return connection.reconnect()


def _subscribe_tries(connection: MqttClient | FastClient) -> int:
    """Connections in a row whose subscription may fail before the consumer gives up with the
    last failure. One on a first connection to a single broker: a refusal there is the
    broker's answer (an ACL), to report. Otherwise every node of the list at least, and
    ``_RESUBSCRIBE_TRIES``: a NATS node refuses while JetStream elects leaders (and one
    surviving node refused for minutes here while the others subscribed at once)."""
    if len(connection.urls) == 1 and not connection.reconnects:
        return 1
    return max(len(connection.urls), _RESUBSCRIBE_TRIES)


class _Outages:
    """What the consumer's connections did so far, and what that means for the next one."""

    def __init__(self, connection: MqttClient | FastClient) -> None:
        self.connection = connection
        self.failed_subscribes = 0  # connections in a row whose subscription failed
        #: The last connection was given up, not lost, on a node that is up (a session it
        #: would not serve): the next connection is asked of that node first.
        self.abandoned = False

    def dropped(self, err: SubscribeDroppedError) -> None:
        """The broker closed the connection in answer to a SUBSCRIBE. It takes connections
        at once: the failover policy waits as for any connection that died at once. A
        persistent session is given up there (a clean one under an id of its own, on that
        node first: RabbitMQ 3.10 will not serve the session while its node is down); a clean
        one goes to the next node (a node that closes a clean session's subscribe too is no
        place for this consumer).

        Raises:
            BrokerError: it kept doing so.
        """
        connection = self.connection
        self.failed_subscribes += 1
        self.abandoned = False
        if self.failed_subscribes >= max(_subscribe_tries(connection), _RESUBSCRIBE_TRIES):
            raise BrokerError(
                err.url,
                f"{err.reason}, {self.failed_subscribes} times in a row: is this user allowed "
                "to subscribe to it (the broker's ACL)?",
            ) from err
        if connection.persistent:
            _abandon_session(connection, err)
            self.abandoned = True
        else:
            _log.warning(
                "consumer.subscribe_dropped",
                broker=str(connection.url),
                reason=err.reason,
                next="another node" if len(connection.urls) > 1 else "the same broker",
            )

    def lost(self, err: ConnectionLostError) -> None:
        """A connection was lost (its replacement waits as the failover policy says)."""
        _log.warning("consumer.connection_lost", reason=err.reason)
        self.abandoned = False
        self.failed_subscribes = 0

    def failed(self, err: BrokerError) -> None:
        """A subscribe failed: refused, or unanswered. Another node may take it.

        Raises:
            BrokerError: ``err``, when it keeps failing (or at a lone broker's first refusal).
        """
        connection = self.connection
        self.failed_subscribes += 1
        self.abandoned = False
        if self.failed_subscribes >= _subscribe_tries(connection):
            raise err
        if connection.persistent and not isinstance(err, SubscribeRefusedError):
            # Unanswered under a persistent session: the node cannot resume it.
            _abandon_session(connection, err)
            self.abandoned = True
        else:  # a node still electing leaders (NATS JetStream) may refuse at first
            _log.warning(
                "consumer.resubscribe_failed"
                if connection.reconnects
                else "consumer.subscribe_refused",
                broker=str(connection.url),
                reason=err.reason,
                next="another node" if len(connection.urls) > 1 else "the same broker",
            )


async def _run_through_failovers(
    runner: Runner, connection: MqttClient | FastClient, qos: int
) -> None:
    """Run ``runner`` on ``connection``, replacing it when lost, until the runner ends or is
    stopped. A connection that keeps dying at once is replaced with a growing wait (the one
    failover policy, :mod:`matchcast.transport.failover`).

    A subscription that fails (refused, unanswered, or answered by closing the connection)
    moves the consumer to the next node of the list. A node that closes the connection in
    answer to a subscription, or never answers it, under a persistent session will not serve
    that session (RabbitMQ 3.10 keeps it on the node that died): the session is given up and
    the consumer goes on with a clean one on that same node (``consumer.session_abandoned``).
    """
    outages = _Outages(connection)
    lost = False
    while True:
        reconnects = connection.reconnects
        try:
            if lost:
                if runner.stopping:  # a stop while the connection was being lost
                    break
                # Inside the try: the fast client re-subscribes within reconnect(), so a
                # node that refuses the subscription raises here, not in the runner.
                await _unless_stopped(runner, _replacement(connection, outages.abandoned))
                if runner.stopping:
                    break
                lost = outages.abandoned = False
            await runner.run(connection, qos=qos)
            break
        except SubscribeDroppedError as err:  # before ConnectionLostError, which it is
            outages.dropped(err)
        except ConnectionLostError as err:
            # The lanes and states live on; a persistent session gets what was queued,
            # a clean one re-subscribes and resynchronises from the retained snapshot.
            outages.lost(err)
        except BrokerError as err:
            if lost and connection.reconnects == reconnects:
                raise  # no node answered for max_outage: reconnect() gave up
            outages.failed(err)
        lost = True


def _abandon_session(connection: MqttClient | FastClient, err: BrokerError) -> None:
    """Give the persistent session up (``consumer.session_abandoned``) and go on with a clean
    one under a new client id, on the node that would not serve the session (it is up, and on
    RabbitMQ 3.10 it may be the only node that holds the match's retained snapshot, the
    replayer's): the gap is reported and the state taken from the snapshot."""
    _log.warning("consumer.session_abandoned", broker=str(connection.url), reason=err.reason)
    connection.start_clean()
