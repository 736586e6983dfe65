"""What the commands do, as coroutines the CLI and the tests both call.

Each function takes a broker URL; wiring an embedded broker in when there is none is the
CLI's job (see :mod:`matchcast.cli`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import structlog

from consumers import Runner, Subscriber
from events import (
    CONTENT_TYPE,
    BrokerError,
    ConnectionLostError,
    MatchState,
    MessageProps,
    Topics,
)
from matchcast.mqtt import BrokerURL, MqttClient, Protocol, WillSpec
from matchcast.options import ClientKind
from matchcast.status import ReplayerStatus
from simulator import Match, Recording, Replayer, ReplayOptions, ReplayReport

if TYPE_CHECKING:
    from matchcast.fastmqtt import FastClient

__all__ = ["mqtt_client", "run_replay", "run_watch", "status_payload"]

_log = structlog.get_logger("matchcast.app")

#: Failed subscriptions in a row after a failover before a consumer gives up.
_RESUBSCRIBE_TRIES = 5


def mqtt_client(
    kind: ClientKind | str, url: BrokerURL | Sequence[BrokerURL], **options: Any
) -> MqttClient | FastClient:
    """A client of ``kind`` (``--client``) for ``url``; both take the same ``options``
    (``client_id``, ``protocol``, ``will``, ``clean_start``, ``session_expiry``, ``keepalive``,
    ``connect_timeout``, ``max_outage``, ``backoff_initial``, ``backoff_max``, ...)."""
    if ClientKind(kind) is ClientKind.fast:
        from matchcast.fastmqtt import FastClient  # noqa: PLC0415

        return FastClient(url, **options)
    return MqttClient(url, **options)


def status_payload(
    replayer_id: str, status: Literal["online", "offline"], matches: Sequence[str] = ()
) -> bytes:
    """The retained status message of a replayer: ``{"status": "online", ...}``."""
    body = ReplayerStatus(
        status=status, replayer_id=replayer_id, matches=list(matches), at=dt.datetime.now(dt.UTC)
    )
    return body.model_dump_json().encode()


async def run_replay(
    matches: Sequence[Match | Recording],
    url: BrokerURL | Sequence[BrokerURL],
    options: ReplayOptions,
    *,
    replayer_id: str | None = None,
    protocol: Protocol = "auto",
    max_outage: float = 300.0,
    delays: Sequence[float] | None = None,
) -> list[ReplayReport]:
    """Replay ``matches`` (match files or recordings) concurrently onto the broker at ``url``
    (or the first of a list of brokers that answers; the others are failed over to).

    The replayer's status topic says ``online`` while it runs and ``offline`` after, or when
    the connection dies (the last will). A lost connection is replaced with backoff and the
    replay resumes at the first event the broker had not acknowledged; after ``max_outage``
    seconds without a broker it gives up with :class:`events.BrokerError`. ``delays`` holds
    wall seconds to wait before each match starts (see :func:`simulator.kickoff_delays`).
    """
    if delays is not None and len(delays) != len(matches):
        raise ValueError(f"{len(delays)} delays for {len(matches)} matches")
    waits = list(delays) if delays is not None else [0.0] * len(matches)
    replayer_id = replayer_id or f"replayer-{uuid.uuid4().hex[:8]}"
    topics = options.topics
    ids = [m.match_id for m in matches]
    will = WillSpec(topics.status(replayer_id), status_payload(replayer_id, "offline", ids))
    props = MessageProps(content_type=CONTENT_TYPE)

    async def announce(client: MqttClient) -> None:
        await client.publish(
            topics.status(replayer_id),
            status_payload(replayer_id, "online", ids),
            qos=1,
            retain=True,
            props=props,
        )

    async def announce_again(client: MqttClient) -> None:
        # After a failover the status is best effort: a node whose retained store is still
        # electing a leader (NATS JetStream) must not stop the replay. The events go on.
        try:
            await announce(client)
        except BrokerError as err:
            _log.warning(
                "replayer.status_not_published", replayer_id=replayer_id, reason=err.reason
            )

    async with MqttClient(
        url,
        client_id=f"matchcast-{replayer_id}",
        protocol=protocol,
        will=will,
        # More unacknowledged QoS 2 publishes than the broker's receive maximum (mosquitto: 20)
        # are refused by the broker yet reported sent by the client; paho queues the rest.
        max_inflight=20,
        on_reconnect=announce_again,
        max_outage=max_outage,
    ) as client:
        _log.info(
            "replayer.connected",
            broker=str(client.url),
            protocol=client.protocol_version,
            replayer_id=replayer_id,
        )
        await announce(client)
        replayer = Replayer(client, options)
        try:
            async with asyncio.TaskGroup() as tg:
                tasks = [
                    tg.create_task(replayer.run(m, delay_s=d))
                    for m, d in zip(matches, waits, strict=True)
                ]
        finally:
            # Best effort: on a dead connection the will says offline instead.
            try:
                await asyncio.wait_for(
                    client.publish(
                        topics.status(replayer_id),
                        status_payload(replayer_id, "offline", ids),
                        qos=1,
                        retain=True,
                        props=props,
                    ),
                    timeout=2,
                )
            except Exception:  # a CancelledError still propagates
                _log.debug("replayer.offline_not_published", replayer_id=replayer_id)
        return [t.result() for t in tasks]


async def run_watch(
    url: BrokerURL | Sequence[BrokerURL],
    subscribers: Sequence[Subscriber],
    *,
    topics: Topics | None = None,
    match_filter: str = "+",
    until_finished: set[str] | None = None,
    qos: int = 1,
    client_id: str | None = None,
    protocol: Protocol = "auto",
    runner: Runner | None = None,
    clean_start: bool = True,
    session_expiry: int | None = None,
    client: ClientKind | str = ClientKind.aiomqtt,
) -> dict[str, MatchState]:
    """Run subscribers against the broker until stopped, or until every match named in
    ``until_finished`` has reached full time. Returns the final states.

    Full time counts for a run seen live: one live when the watch joined, or one that started
    after. A finished state retained by a run that ended before (the first state seen of its
    run) ends nothing, nor does a run that stops (``replay_stopped``): it waits for the next.

    Pass ``runner`` to watch its ``subscribed`` event or call its ``stop()`` from outside.
    ``clean_start=False`` with a fixed ``client_id`` (and, on MQTT 5, a ``session_expiry``
    in seconds) resumes the broker session: what was published while away is delivered.
    ``client`` picks the MQTT client (:func:`mqtt_client`); the fast one hands the runner each
    read's messages in one batch.

    The connection is closed before the lanes drain, so nothing is acknowledged to the
    broker that the handlers will not see. A lost connection is replaced with backoff
    (:meth:`matchcast.mqtt.MqttClient.reconnect`), up to its ``max_outage``.
    """
    remaining = set(until_finished or ())
    subs = list(subscribers)
    if remaining:
        finisher = Subscriber("until-finished")
        # The runs seen before their end, per match: a state that arrives already finished
        # (retained by a run that ended before we joined) ends nothing.
        live_runs: set[tuple[str, int]] = set()

        def _check(state: MatchState) -> None:
            key = (state.match_id, state.run)
            if state.status not in ("finished", "stopped"):
                live_runs.add(key)
            elif state.status == "finished" and key in live_runs:
                remaining.discard(state.match_id)
                if not remaining:
                    assert runner is not None
                    runner.stop()

        finisher.on()(lambda _event, state: _check(state))
        finisher.on_state(_check)
        subs.append(finisher)
    if runner is None:
        runner = Runner(subs, topics=topics, match_filter=match_filter)
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
        failed_resubscribes = 0
        while True:
            try:
                await runner.run(connection, qos=qos)
                break
            except ConnectionLostError as err:
                # The lanes and states live on; a persistent session gets what was queued,
                # a clean one re-subscribes and resynchronises from the retained snapshot.
                _log.warning("consumer.connection_lost", reason=err.reason)
                failed_resubscribes = 0
                await connection.reconnect()
            except BrokerError as err:
                # A subscribe failed on the node failed over to. The first connection's
                # failure, or one that keeps failing, is an error to report.
                failed_resubscribes += 1
                if not connection.reconnects or failed_resubscribes > _RESUBSCRIBE_TRIES:
                    raise
                if isinstance(connection, MqttClient) and connection.persistent:
                    # A node that cannot resume the session (RabbitMQ 3.10 keeps it on the
                    # lost node only, and a subscribe there hangs): go on with a clean one.
                    # The gap is reported and the state taken from the snapshot.
                    _log.warning(
                        "consumer.session_abandoned", broker=str(connection.url), reason=err.reason
                    )
                    connection.start_clean()
                else:  # a node still electing leaders (NATS JetStream) may refuse at first
                    _log.warning(
                        "consumer.resubscribe_failed", broker=str(connection.url), reason=err.reason
                    )
                await connection.reconnect()
    return runner.states
