"""``run_replay``: a replayer on a broker, with its status topic and its control service.

Takes a broker URL; wiring an embedded broker in when there is none is the CLI's job (see
:mod:`matchcast.cli`).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Literal

import structlog
from pydantic_core import from_json

from events import (
    CONTENT_TYPE,
    MAX_COMMAND_BYTES,
    BrokerError,
    ConnectionLostError,
    ControlCommandError,
    ControlReply,
    Message,
    MessageProps,
    SubscribeDroppedError,
    SubscribeRefusedError,
    Topics,
    decode_command,
    encode_control,
)
from matchcast.app.replayers import Rivals
from matchcast.contract.status import ReplayerStatus
from matchcast.transport.connection import BrokerURL, Protocol, WillSpec
from matchcast.transport.mqtt import MqttClient
from simulator import Clock, Match, Recording, Replayer, ReplayOptions, ReplayReport, new_run

__all__ = ["ControlService", "run_replay", "status_payload"]

_log = structlog.get_logger("matchcast.app")

#: A control subscription refused at QoS 1, or a status not taken, is asked for again after
#: this, doubling to the max.
CONTROL_RETRY_S = 0.5
CONTROL_RETRY_MAX_S = 10.0


def status_payload(
    replayer_id: str,
    status: Literal["online", "offline"],
    matches: Sequence[str] = (),
    replayer: Replayer | None = None,
) -> bytes:
    """The retained status message of a replayer: ``{"status": "online", ...}``, with its
    playback when ``replayer`` is given."""
    extra = {}
    if replayer is not None:
        extra = {
            "state": replayer.state,
            "speed": "max" if replayer.speed is None else replayer.speed,
            "since": replayer.since,
            "playback": replayer.playback(),
        }
    body = ReplayerStatus(
        status=status,
        replayer_id=replayer_id,
        matches=list(matches),
        at=dt.datetime.now(dt.UTC),
        **extra,
    )
    return body.model_dump_json(exclude_none=True).encode()


class ControlService:
    """Takes a replayer's commands from its control topic and answers on their reply topic.

    One boundary per command, as per message: a command that is not one (not JSON, nested too
    deep, too large, unknown, a speed out of range) and a command whose handling fails (a bug
    it trips anywhere from reading it to answering it) cost that command only: an error reply
    where its reply topic could be read, a log line (``control.rejected``, ``control.failed``),
    and the replayer goes on. Only a lost connection leaves the loop, to wait for the
    reconnect. A reply goes only to ``{root}/replayers/{replayer_id}/replies/{id}``: a command
    cannot make the replayer publish anywhere else.
    """

    def __init__(
        self,
        client: MqttClient,
        replayer: Replayer,
        replayer_id: str,
        topics: Topics,
        say_status: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.client = client
        self.say_status = say_status
        #: Held while a command is answered, so a replay that the command ended (``stop``)
        #: still sends the reply before the service is cancelled.
        self.busy = asyncio.Lock()
        self.replayer = replayer
        self.replayer_id = replayer_id
        self.topics = topics
        self.reconnected = asyncio.Event()
        #: Called with each message not on the control topic (the replayers' statuses).
        self.on_other: Callable[[Message], None] | None = None
        self._reply_prefix = topics.reply(replayer_id, "")

    def _reply_topic(self, reply_to: str | None) -> str | None:
        if reply_to is None or not reply_to.startswith(self._reply_prefix):
            return None
        rest = reply_to[len(self._reply_prefix) :]
        if not rest or len(rest) > 64 or any(c in rest for c in "/+#\x00"):
            return None
        return reply_to

    def reply(self, request_id: str, error: str | None) -> ControlReply:
        """The answer to a command, with the replayer's playback after it."""
        r = self.replayer
        return ControlReply(
            request_id=request_id[:64],
            ok=error is None,
            error=error,
            replayer_id=self.replayer_id,
            state=r.state,
            speed="max" if r.speed is None else r.speed,
            matches=r.playback(),
        )

    def handle(self, payload: bytes, topic: str) -> tuple[str, bytes] | None:
        """Apply one command: ``(reply topic, reply)``, or None when there is nowhere to answer."""
        log = _log.bind(replayer_id=self.replayer_id)
        try:
            command = decode_command(payload, topic=topic)
        except ControlCommandError as err:
            log.warning(
                "control.rejected", reason=err.reason, request_id=err.request_id, size=len(payload)
            )
            reply_topic = self._reply_topic(err.reply_to)
            if reply_topic is None:
                return None
            return reply_topic, encode_control(self.reply(err.request_id or "", err.reason))
        reply_topic = self._reply_topic(command.reply_to)
        try:
            error = self.replayer.control(command)
        except Exception as exc:
            log.exception("control.failed", request_id=command.request_id)
            error = f"internal error: {type(exc).__name__}"
        if error is None:
            log.info(
                "control.applied",
                command=command.command,
                match_id=command.match,
                minute=command.minute,
                speed=command.speed,
                request_id=command.request_id,
            )
        else:
            log.warning(
                "control.refused",
                command=command.command,
                reason=error,
                request_id=command.request_id,
            )
        if reply_topic is None:
            if command.reply_to is not None:
                log.warning("control.reply_refused", reply_to=command.reply_to[:128])
            return None
        return reply_topic, encode_control(self.reply(command.request_id, error))

    def _failed(self, payload: bytes, topic: str) -> tuple[str, bytes] | None:
        """After a failure while handling a command: the error reply to it, where its reply
        topic can be read (best effort: None when even that fails)."""
        _log.exception(
            "control.failed", replayer_id=self.replayer_id, topic=topic, size=len(payload)
        )
        try:
            data = from_json(payload[:MAX_COMMAND_BYTES], allow_inf_nan=False)
            fields = data if isinstance(data, dict) else {}
            request_id, reply_to = fields.get("request_id"), fields.get("reply_to")
            reply_topic = self._reply_topic(reply_to if isinstance(reply_to, str) else None)
            if reply_topic is None:
                return None
            reply = ControlReply(
                request_id=request_id[:64] if isinstance(request_id, str) else "",
                ok=False,
                error="internal error while handling the command (logged by the replayer)",
                replayer_id=self.replayer_id,
                state=self.replayer.state,
                speed="max",
            )
            return reply_topic, encode_control(reply)
        except Exception:
            _log.exception("control.not_answered", replayer_id=self.replayer_id, topic=topic)
            return None

    async def _answer(self, payload: bytes, topic: str) -> None:
        """Handle one command and answer it: whatever fails costs this command only."""
        try:
            answer = self.handle(payload, topic)
        except Exception:
            answer = self._failed(payload, topic)
        if self.say_status is not None:
            # The retained status says the new state before the reply does.
            try:
                await self.say_status()
            except BrokerError:
                raise  # the connection: serve() waits for the reconnect
            except Exception:
                _log.exception("control.status_failed", replayer_id=self.replayer_id)
        if answer is not None:
            await self.client.publish(answer[0], answer[1], qos=1, props=MessageProps(CONTENT_TYPE))

    async def serve(self) -> None:
        """Take commands until cancelled; after a lost connection, wait for the reconnect."""
        while True:
            try:
                async for message in self.client.messages():
                    if message.topic != self.topics.control(self.replayer_id):
                        # Another replayer's status (``on_other``), or what a broker handed
                        # this connection unasked: never taken for a command.
                        if self.on_other is not None:
                            self.on_other(message)
                        continue
                    async with self.busy:
                        await self._answer(message.payload, message.topic)
            except BrokerError as err:
                _log.info("control.paused_by_connection", reason=err.reason)
                self.reconnected.clear()
                await self.reconnected.wait()


async def _stop_helpers(service: ControlService, helpers: Sequence[asyncio.Task[None]]) -> None:
    """Cancel the control service and the status task once the command being answered (a
    ``stop``'s reply) is out, or after 5 s."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(5), service.busy:
            for helper in helpers:
                helper.cancel()
    # A cancel that lands as a publish completes can be lost in asyncio.wait_for (Python
    # < 3.12, which aiomqtt uses): the task then waits forever, and so would the TaskGroup.
    pending = {h for h in helpers if not h.done()}
    for _ in range(20):
        if not pending:
            break
        _done, pending = await asyncio.wait(pending, timeout=0.5)
        for helper in pending:
            helper.cancel()


async def _play(
    replayer: Replayer,
    matches: Sequence[Match | Recording],
    waits: Sequence[float],
    one_after_another: bool,
) -> list[ReplayReport]:
    """Replay ``matches`` at once, or in sequence until a ``stop``."""
    if one_after_another:
        reports = []
        for m, d in zip(matches, waits, strict=True):
            if replayer.state == "stopped":
                break
            reports.append(await replayer.run(m, delay_s=d))
        return reports
    async with asyncio.TaskGroup() as tg:
        tasks = [
            tg.create_task(replayer.run(m, delay_s=d)) for m, d in zip(matches, waits, strict=True)
        ]
    return [t.result() for t in tasks]


#: How long the broker keeps an ``offline`` status a replayer's last will left (MQTT 5 message
#: expiry; an MQTT 3.1.1 broker keeps it until ``matchcast clear``): a day, then the matches'
#: own retained states still say whether each finished or stopped.
OFFLINE_STATUS_EXPIRY_S = 86_400


class _StatusTopic:
    """A replayer's retained status: ``online`` on every connection and every change of its
    playback; removed when the replayer ends (nothing of it is left behind), or ``offline``
    by the last will when the connection dies, expiring after
    :data:`OFFLINE_STATUS_EXPIRY_S` where the broker speaks MQTT 5."""

    def __init__(self, topics: Topics, replayer_id: str, ids: Sequence[str]) -> None:
        self.topic = topics.status(replayer_id)
        self.control_topic = topics.control(replayer_id)
        self.replayer_id = replayer_id
        self.ids = list(ids)
        self.replayer: Replayer | None = None
        self.service: ControlService | None = None
        #: Set on each change of the playback; :meth:`publish_changes` says it.
        self.dirty = asyncio.Event()
        self._props = MessageProps(content_type=CONTENT_TYPE)
        #: The announcements on new connections still under way.
        self._announcing: set[asyncio.Task[None]] = set()
        #: Node -> control subscriptions in a row it answered by closing the connection.
        self._dropped: dict[str, int] = {}
        #: Nodes this replayer takes no commands on (see :meth:`_listen`).
        self._no_control: set[str] = set()

    def will(self) -> WillSpec:
        """The last will: ``offline``, published by the broker if the connection dies."""
        return WillSpec(
            self.topic,
            status_payload(self.replayer_id, "offline", self.ids),
            expiry=OFFLINE_STATUS_EXPIRY_S,
        )

    async def say(self, client: MqttClient) -> None:
        """Publish ``online`` with the playback now."""
        await client.publish(
            self.topic,
            status_payload(self.replayer_id, "online", self.ids, self.replayer),
            qos=1,
            retain=True,
            props=self._props,
        )

    async def announce(self, client: MqttClient) -> None:
        """On a (new) connection: listen for commands, say ``online``, wake the service.

        Neither a control subscription the broker refuses nor a status it does not take stops
        the replay: a NATS node refuses a QoS 1 SUBSCRIBE, and times out a retained publish,
        while JetStream elects its leaders (one surviving node refused for minutes in a
        newcomer's run; ``control status`` then said no replayer was online, and ``watch``
        showed the replayer offline, from the will of the connection that node had dropped,
        for the rest of the replay). The replayer listens at QoS 0 where that is granted and
        asks for QoS 1 again beside the replay until granted (:meth:`_listen_again`); a status
        not taken is published again beside the replay until taken (:meth:`_say_again`), each
        until the connection is replaced, whose own announcement takes over.

        Raises:
            ConnectionLostError: the connection failed (:class:`events.SubscribeDroppedError`:
                in answer to the control subscription).
        """
        connection = client.reconnects
        node = str(client.url)
        granted = None if node in self._no_control else await self._listen(client)
        try:
            await self.say(client)
        except ConnectionLostError:
            raise
        except BrokerError as err:
            _log.warning(
                "replayer.status_not_published",
                replayer_id=self.replayer_id,
                reason=err.reason,
                then="asked again beside the replay",
            )
            self._beside(self._say_again(client, connection), "say")
        if self.service is not None:
            self.service.reconnected.set()
        if granted != 1 and node not in self._no_control:
            self._beside(self._listen_again(client, connection), "listen")

    async def _say_again(self, client: MqttClient, connection: int) -> None:
        """Publish the status again until the broker takes it (:meth:`_again`)."""
        await self._again(client, connection, self.say, BrokerError, "replayer.status_published")

    async def _again(
        self,
        client: MqttClient,
        connection: int,
        step: Callable[[MqttClient], Awaitable[None]],
        failure: type[BrokerError],
        done: str,
    ) -> None:
        """``step`` again, with a growing wait, while it fails with ``failure`` and the
        connection (number ``connection``) is not replaced (whose own announcement takes over);
        logs ``done`` once it succeeds. Another error ends it."""
        wait = CONTROL_RETRY_S
        tries = 1
        while client.reconnects == connection:
            await asyncio.sleep(wait)
            wait = min(wait * 2, CONTROL_RETRY_MAX_S)
            tries += 1
            try:
                await step(client)
            except failure:
                continue
            except BrokerError:
                return  # the connection is gone: the reconnect announces anew
            _log.info(done, replayer_id=self.replayer_id, tries=tries)
            return

    async def _listen(self, client: MqttClient) -> int | None:
        """Subscribe to the control topic at QoS 1, else 0: the QoS granted (None: neither).

        A node that closes the connection at it twice in a row (under the client id of its own
        a failover gives, or :meth:`MqttClient.start_clean`), or never answers it, is a node
        this replayer takes no commands on: it plays on there without asking again
        (``replayer.control_unavailable``), and asks on any other node it moves to. Asking on
        for ever made a replayer reconnect ten times a second and never finish (a tester's
        broker that closed every control subscription).

        Raises:
            SubscribeDroppedError: the node closed the connection in answer to it.
        """
        node = str(client.url)
        for qos in (1, 0):
            try:
                await client.subscribe(self.control_topic, qos=qos)
            except SubscribeRefusedError as err:
                _log.warning(
                    "replayer.control_refused",
                    replayer_id=self.replayer_id,
                    broker=node,
                    qos=qos,
                    reason=err.reason,
                )
                continue
            except SubscribeDroppedError as err:
                self._dropped[node] = self._dropped.get(node, 0) + 1
                if self._dropped[node] >= 2:
                    self._control_unavailable(node, err.reason)
                raise
            except ConnectionLostError:
                raise
            except BrokerError as err:  # no SUBACK: the connection may be well
                self._control_unavailable(node, err.reason)
                return None
            self._dropped.pop(node, None)
            if qos < 1:
                _log.info("replayer.control_degraded", replayer_id=self.replayer_id, qos=qos)
            return qos
        return None

    def _control_unavailable(self, node: str, reason: str) -> None:
        self._no_control.add(node)
        _log.warning(
            "replayer.control_unavailable",
            replayer_id=self.replayer_id,
            broker=node,
            reason=reason,
            then="no commands reach this replayer while it is on this node",
        )

    async def _listen_again(self, client: MqttClient, connection: int) -> None:
        """Ask for the control topic at QoS 1 again until granted (:meth:`_again`)."""

        async def listen(c: MqttClient) -> None:
            await c.subscribe(self.control_topic, qos=1)

        await self._again(
            client, connection, listen, SubscribeRefusedError, "replayer.control_subscribed"
        )

    def _beside(self, work: Coroutine[Any, Any, None], what: str) -> None:
        """Run ``work`` beside the replay, until it ends or :meth:`stop_announcing`."""
        task = asyncio.create_task(work, name=f"{what}-{self.replayer_id}")
        self._announcing.add(task)
        task.add_done_callback(self._announcing.discard)

    async def announce_again(self, client: MqttClient) -> None:
        """:meth:`announce` after a failover, in the background and best effort: a node whose
        JetStream is still electing leaders (NATS) takes a QoS 1 subscription and a retained
        publish only once it has them, 4-9 s after a leader died, while the events may flow
        at once. The replay resumes as soon as it is connected; this follows beside it."""
        # An earlier one still under way is left to end: on RabbitMQ its subscribe fails with
        # the connection that node drops, and its failure gives the client a fresh client id.
        self._beside(self._announce_again(client), "announce")

    def stop_announcing(self) -> None:
        """Cancel the announcements still under way (the replay is over)."""
        for task in list(self._announcing):
            task.cancel()

    async def _announce_again(self, client: MqttClient) -> None:
        try:
            await self.announce(client)
        except BrokerError as err:
            _log.warning("replayer.not_announced", replayer_id=self.replayer_id, reason=err.reason)
            # RabbitMQ 3.10 keeps a client id's subscription queue on the node that died: its
            # other nodes close the connection at a subscribe under that id (the control
            # topic). The next connection takes a client id of its own.
            client.start_clean()

    async def publish_changes(self, client: MqttClient) -> None:
        """Publish the status again after each change (changes in a burst: once)."""
        while True:
            await self.dirty.wait()
            self.dirty.clear()
            try:
                await self.say(client)
            except BrokerError as err:  # the reconnect announces the status anew
                _log.debug("replayer.status_not_published", reason=err.reason)

    async def say_gone(self, client: MqttClient) -> None:
        """Remove the retained status (an empty retained message): the replayer ended and
        leaves nothing behind. Best effort: on a dead connection the will says offline."""
        self.stop_announcing()
        try:
            await asyncio.wait_for(client.publish(self.topic, b"", qos=1, retain=True), timeout=2)
        except Exception:  # a CancelledError still propagates
            _log.debug("replayer.status_not_removed", replayer_id=self.replayer_id)
        else:
            _log.info("replayer.status_removed", replayer_id=self.replayer_id)


async def _hear_rivals(client: MqttClient, service: ControlService, rivals: Rivals) -> None:
    """Listen, on the replayer's own connection, to the other replayers' statuses: one online
    on a match of ours is said (:class:`Rivals`). Best effort: a broker that refuses the
    subscription costs the warning, never the replay.

    Only on an MQTT 5 broker: the embedded broker (amqtt, MQTT 3.1.1), with a replayer
    subscribed to the statuses, handed other clients those statuses on their state topics."""
    if client.protocol_version != "5":
        _log.debug("replayer.rivals_unknown", reason="an MQTT 3.1.1 broker")
        return
    service.on_other = rivals.heard
    try:
        await client.subscribe(service.topics.status(), qos=0)
    except SubscribeDroppedError:
        raise
    except BrokerError as err:
        _log.debug("replayer.rivals_unknown", reason=err.reason)


async def _serve_and_play(
    client: MqttClient,
    status: _StatusTopic,
    service: ControlService,
    matches: Sequence[Match | Recording],
    waits: Sequence[float],
    one_after_another: bool,
) -> list[ReplayReport]:
    """Play the matches while the control service and the status updates run beside them."""
    async with asyncio.TaskGroup() as tg:
        helpers = [
            tg.create_task(service.serve()),
            tg.create_task(status.publish_changes(client)),
        ]
        try:
            return await _play(service.replayer, matches, waits, one_after_another)
        finally:
            await _stop_helpers(service, helpers)


async def run_replay(
    matches: Sequence[Match | Recording],
    url: BrokerURL | Sequence[BrokerURL],
    options: ReplayOptions,
    *,
    replayer_id: str | None = None,
    protocol: Protocol = "auto",
    max_outage: float = 300.0,
    delays: Sequence[float] | None = None,
    one_after_another: bool = False,
    on_ready: Callable[[Replayer], None] | None = None,
    clock: Clock | None = None,
) -> list[ReplayReport]:
    """Replay ``matches`` (match files or recordings) concurrently onto the broker at ``url``
    (or the first of a list of brokers that answers; the others are failed over to).

    The replayer's status topic says ``online`` while it runs and ``offline`` after, or when
    the connection dies (the last will). A lost connection is replaced with backoff and the
    replay resumes at the first event the broker had not acknowledged; after ``max_outage``
    seconds without a broker it gives up with :class:`events.BrokerError`. ``delays`` holds
    wall seconds to wait before each match starts (see :func:`simulator.kickoff_delays`).

    The replayer takes commands on its control topic (docs/control.md) and publishes its
    status again on every change. ``one_after_another`` plays the matches in sequence
    instead of at once; a ``stop`` then ends the whole queue. ``on_ready`` is called with
    the replayer once it listens for commands. ``clock`` replaces the monotonic clock (tests).
    """
    if delays is not None and len(delays) != len(matches):
        raise ValueError(f"{len(delays)} delays for {len(matches)} matches")
    waits = list(delays) if delays is not None else [0.0] * len(matches)
    replayer_id = replayer_id or f"replayer-{uuid.uuid4().hex[:8]}"
    started_ms = new_run(dt.datetime.now(dt.UTC))
    status = _StatusTopic(options.topics, replayer_id, [m.match_id for m in matches])
    async with MqttClient(
        url,
        client_id=f"matchcast-{replayer_id}",
        protocol=protocol,
        will=status.will(),
        # More unacknowledged QoS 2 publishes than the broker's receive maximum (mosquitto: 20)
        # are refused by the broker yet reported sent by the client; paho queues the rest.
        max_inflight=20,
        on_reconnect=status.announce_again,
        max_outage=max_outage,
    ) as client:
        _log.info(
            "replayer.connected",
            broker=str(client.url),
            protocol=client.protocol_version,
            replayer_id=replayer_id,
        )
        replayer = Replayer(client, options, clock=clock)
        replayer.on_change = status.dirty.set
        service = ControlService(
            client, replayer, replayer_id, options.topics, say_status=lambda: status.say(client)
        )
        status.replayer, status.service = replayer, service
        try:
            await status.announce(client)
        except SubscribeDroppedError as err:
            # RabbitMQ 3.10, a replayer id whose last connection was on a node now down: its
            # other nodes close the connection at a subscribe under that client id. Go on
            # under one of its own; the reconnect announces the replayer (on_reconnect).
            _log.warning("replayer.client_id_refused", replayer_id=replayer_id, reason=err.reason)
            client.start_clean()
            await client.reconnect(same_node_first=True)
        except ConnectionLostError as err:
            # Lost as soon as made (a broker that sends a malformed packet at the first
            # SUBSCRIBE): replaced as any lost connection is, after the failover policy's
            # wait; the reconnect announces the replayer (on_reconnect).
            _log.warning("replayer.connection_lost", replayer_id=replayer_id, reason=err.reason)
            await client.reconnect()
        if on_ready is not None:
            on_ready(replayer)
        try:
            await _hear_rivals(client, service, Rivals(replayer_id, list(status.ids), started_ms))
            return await _serve_and_play(client, status, service, matches, waits, one_after_another)
        finally:
            await status.say_gone(client)
