"""Sending a command to a running replayer and waiting for its answer.

Used by ``matchcast control`` (:mod:`matchcast.cli.control`) and the web page's controls
(``matchcast web --control``). The replayer is found from the retained statuses on
``{root}/replayers/+/status``: with one online, it need not be named; with several, the error
lists them. Every failure is a :class:`ControlError` a person can act on: no (such) replayer,
a minute past the match's end, a command the broker refused, no answer. See docs/control.md.

The sender's side of control: the wire form is events/_control.py, what the replayer does with
a command simulator/_control.py (and matchcast/app/replay.py's ``ControlService``, which
answers it), the command line matchcast/cli/control.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import typing
import uuid
from collections.abc import Sequence

import structlog
from pydantic import ValidationError

from consumers import listed_matches
from events import (
    CONTENT_TYPE,
    MESSAGE_LIMIT,
    SPEED_RANGE,
    BrokerError,
    ControlAction,
    ControlCommand,
    ControlCommandError,
    ControlReply,
    DecodeError,
    Message,
    MessageProps,
    MinutePastPlayError,
    ReplayerStatus,
    Topics,
    clip,
    decode_reply,
    decode_status,
    encode_control,
    parse_minute,
    parse_speed,
    quote,
    validation_problems,
)
from matchcast.transport.connection import READER_QOS, BrokerURL, Protocol
from matchcast.transport.mqtt import MqttClient

__all__ = [
    "ACTIONS",
    "MAX_REPLAYERS_FOUND",
    "ControlError",
    "find_replayers",
    "format_reply",
    "make_command",
    "send_command",
]

_log = structlog.get_logger("matchcast.control")

#: Seconds to wait for the retained statuses after subscribing, once the first one came.
STATUS_QUIET_S = 0.3
#: The longest the search for online replayers takes, however many statuses keep coming.
STATUS_SEARCH_S = 8.0
#: Online replayers a search keeps: anyone who may publish on the status topics could leave
#: thousands, each listing many matches (each kept with the first MAX_DISCOVERED_PER_STATUS).
MAX_REPLAYERS_FOUND = 1000


#: What ``matchcast control`` and the page can ask, from the command model.
ACTIONS: tuple[str, ...] = typing.get_args(ControlAction)


class ControlError(Exception):
    """A command that could not be carried out; the message is for the person at the terminal.

    Attributes:
        code: the exit status (2 bad input, 1 otherwise).
    """

    def __init__(self, message: str, code: int = 1) -> None:
        self.code = code
        super().__init__(message)


async def find_replayers(
    client: MqttClient,
    topics: Topics,
    inbox: asyncio.Queue[Message],
    named: str | None = None,
) -> dict[str, ReplayerStatus]:
    """The replayers whose retained status says online, by id (``inbox``: what ``client``
    receives). The ``named`` replayer's status is also asked for by its exact topic: a broker
    that gives wildcards no retained messages (RabbitMQ 3.10) sends it only there."""
    await client.subscribe(topics.status("+"), qos=READER_QOS)
    if named is not None:
        await client.subscribe(topics.status(named), qos=READER_QOS)
    found: dict[str, ReplayerStatus] = {}
    skipped = 0
    loop = asyncio.get_running_loop()
    # A deadline for the whole search: whoever keeps publishing on a status topic cannot keep
    # the command waiting; and only a retained message (the broker's answer to the
    # subscription) restarts the short wait for the next one.
    deadline = loop.time() + STATUS_SEARCH_S
    timeout = 3.0  # for the first retained message; the broker sends the rest right after
    while (left := deadline - loop.time()) > 0:
        try:
            async with asyncio.timeout(min(timeout, left)):
                message = await inbox.get()
        except TimeoutError:
            break
        parsed = topics.parse(message.topic)
        if not message.retain or parsed is None or parsed[0] != "status":
            continue
        timeout = STATUS_QUIET_S
        try:
            status = decode_status(message.payload, topic=message.topic)
        except DecodeError as err:
            _log.debug("status.unreadable", topic=message.topic, reason=err.reason[:200])
            continue
        if status.replayer_id != parsed[1]:  # a status for another's topic: not believed
            _log.debug("status.misplaced", topic=message.topic, replayer_id=status.replayer_id)
            continue
        if status.status != "online":
            found.pop(status.replayer_id, None)
        elif status.replayer_id not in found and len(found) >= MAX_REPLAYERS_FOUND:
            skipped += 1
        else:
            kept = listed_matches(status, "status.matches_limited", replayer_id=parsed[1])
            if len(kept) < len(status.matches):
                status = status.model_copy(update={"matches": kept})
            found[status.replayer_id] = status
    if skipped:
        _log.warning("status.too_many", kept=len(found), skipped=skipped)
    return found


def format_reply(reply: ControlReply) -> str:
    """The replayer's state in one line: ``r1: paused at speed 60; m1 55' (paused, run ...)``."""
    speed = reply.speed if reply.speed == "max" else f"{reply.speed:g}"
    parts = [f"{clip(reply.replayer_id)}: {reply.state} at speed {speed}"]
    for m in reply.matches:
        clock = m.clock.label if m.clock is not None else "before kickoff"
        parts.append(f"{m.match_id} {clock} {m.state}")
    return "; ".join(parts)


def make_command(
    action: str, argument: str | None, match: str | None, request_id: str, reply_to: str
) -> ControlCommand:
    """The command for ``action`` and its argument (a minute, a speed), checked.

    Raises:
        ControlError: (code 2) an argument missing, extra or not valid.
    """
    if action not in ACTIONS:
        raise ControlError(f"unknown command {quote(action)}: one of {', '.join(ACTIONS)}", 2)
    if action in ("seek", "speed") and argument is None:
        example = "80 or 90+2" if action == "seek" else SPEED_RANGE
        raise ControlError(f"{action} needs a value: {example}", 2)
    if action not in ("seek", "speed") and argument is not None:
        raise ControlError(f"{action} takes no value, got {quote(argument)}", 2)
    fields: dict[str, object] = {}
    if action == "seek":
        assert argument is not None
        try:
            parse_minute(argument)
        except MinutePastPlayError:
            pass  # the replayer knows the match: it answers with its last minute played
        except ValueError as err:
            raise ControlError(f"seek: {err}", 2) from None
        fields["minute"] = argument
    if action == "speed":
        assert argument is not None
        try:
            speed = parse_speed(argument)
        except ValueError as err:
            raise ControlError(str(err), 2) from None
        fields["speed"] = "max" if speed is None else speed
    try:
        return ControlCommand.model_validate(
            {
                "request_id": request_id,
                "command": action,
                "reply_to": reply_to,
                "match": match,
                **fields,
            }
        )
    except ValidationError as err:  # one line, what is wrong with which field
        problems = validation_problems(err, root="command")
        raise ControlError(f"{action}: {'; '.join(f'--{p}' for p in problems)}", 2) from None


async def send_command(
    url: BrokerURL | Sequence[BrokerURL],
    action: str,
    argument: str | None = None,
    *,
    replayer_id: str | None = None,
    match: str | None = None,
    topics: Topics | None = None,
    reply_timeout: float = 5.0,
    protocol: Protocol = "auto",
) -> ControlReply:
    """Send one command to a replayer and return its reply.

    Raises:
        ControlError: no (or no such) replayer online, several and none chosen, the broker
            refused the command, no answer came, or the replayer refused it.
        BrokerError: the broker cannot be reached.
    """
    topics = topics or Topics()
    request_id = uuid.uuid4().hex[:16]
    make_command(action, argument, match, request_id, "")  # bad input fails before connecting
    inbox: asyncio.Queue[Message] = asyncio.Queue()

    async def pump(client: MqttClient) -> None:
        async for message in client.messages():
            inbox.put_nowait(message)

    client_id = f"matchcast-control-{request_id}"
    async with MqttClient(url, client_id=client_id, protocol=protocol) as client:
        reader = asyncio.create_task(pump(client))
        try:
            reply = await _exchange(
                client,
                inbox,
                topics,
                action,
                argument,
                match,
                replayer_id,
                request_id,
                reply_timeout,
            )
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, BrokerError):
                await reader
    if not reply.ok:
        error = clip(reply.error or "", MESSAGE_LIMIT)  # whatever the replayer wrote
        raise ControlError(f"replayer {quote(reply.replayer_id)} refused {action}: {error}")
    return reply


async def _exchange(
    client: MqttClient,
    inbox: asyncio.Queue[Message],
    topics: Topics,
    action: str,
    argument: str | None,
    match: str | None,
    replayer_id: str | None,
    request_id: str,
    reply_timeout: float,
) -> ControlReply:
    """Find the replayer, send the command, wait for its reply."""
    online = await find_replayers(client, topics, inbox, replayer_id)
    if replayer_id is None:
        if not online:
            raise ControlError(f"no replayer is online under {topics.prefix('status')}")
        if len(online) > 1:
            listing = ", ".join(sorted(online))
            raise ControlError(
                f"{len(online)} replayers online, pick one with --replayer: {listing}", 2
            )
        replayer_id = next(iter(online))
    elif replayer_id not in online:
        known = ", ".join(sorted(online)) or "none"
        raise ControlError(f"no replayer {replayer_id!r} is online (online: {known})")
    reply_topic = topics.reply(replayer_id, request_id)
    command = make_command(action, argument, match, request_id, reply_topic)
    await client.subscribe(reply_topic, qos=READER_QOS)
    refusal = await client.publish_refusal(
        topics.control(replayer_id),
        encode_control(command),
        props=MessageProps(content_type=CONTENT_TYPE),
    )
    if refusal is not None:
        raise ControlError(
            f"the broker refused the command: {refusal}; only an operator may control "
            f"replayers (log in as one: $MATCHCAST_USERNAME)"
        )
    try:
        async with asyncio.timeout(reply_timeout):
            while True:
                message = await inbox.get()
                if message.topic != reply_topic:
                    continue
                try:
                    reply = decode_reply(message.payload)
                except ControlCommandError:
                    continue
                if reply.request_id == request_id:
                    return reply
    except TimeoutError:
        raise ControlError(
            f"no answer from replayer {replayer_id!r} within {reply_timeout:g}s: it "
            f"stopped, or the broker dropped the command (may this user publish to "
            f"{topics.control(replayer_id)}?)"
        ) from None
