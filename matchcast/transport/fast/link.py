"""One network connection of the fast client, and the one QoS state machine over it.

A :class:`Link` is an :class:`asyncio.Protocol` that speaks one MQTT version through a
:class:`~matchcast.transport.fast.packets.Codec`; nothing in it depends on the version. It
reads each chunk of bytes as it arrives and decodes every whole packet in it at once; it
gathers outgoing packets and writes them once per event-loop iteration (one ``send`` for many
packets). It runs the flows of the standard both ways:

- QoS 1 and 2 publishes out, at most the broker's receive maximum in flight (MQTT 5) or
  ``max_inflight`` (3.1.1, which has none); the rest wait in a queue;
- QoS 1 and 2 publishes in, acknowledged as they are decoded, a QoS 2 resend delivered once;
- SUBSCRIBE and its SUBACK; keepalive pings that also notice a silent broker; the broker's
  MQTT 5 DISCONNECT.

**A packet that may not come closes the connection** (a CONNECT, SUBSCRIBE or PINGREQ from the
broker, a second CONNACK, an AUTH we did not ask for, a DISCONNECT in 3.1.1), in both
versions alike, as bytes that are not a packet do. Both standards say so (3.1.1 section 4.8,
5.0 section 4.13: a protocol violation closes the network connection; in 5.0 after a
DISCONNECT with reason 0x82 Protocol Error, or 0x81 Malformed Packet). A broker that sends one
is broken or is not the broker we think, and going on would guess at a state the two sides no
longer share; the loss is a clean :class:`events.ConnectionLostError` that names the packet,
logged once, and the client's reconnect starts afresh. What was decoded before it still
counts. A well-formed acknowledgement of a packet id with nothing in flight (a late PUBACK
after a loss was given up on, an UNSUBACK) is not a violation and is ignored.

The connection's lifetime, protocol negotiation and reconnects are the client's
(:mod:`matchcast.transport.fastmqtt`, :mod:`matchcast.transport.fast.connect`).
"""

from __future__ import annotations

import asyncio
import collections
from typing import TYPE_CHECKING, assert_never

import structlog

from events import (
    BrokerError,
    ConnectionLostError,
    Message,
    PublishRefusedError,
    SubscribeDroppedError,
    SubscribeRefusedError,
)
from matchcast.transport.connection import SUBSCRIBE_DROP_WINDOW_S
from matchcast.transport.fast.packets import (
    MALFORMED_PACKET,
    ConnAck,
    Control,
    Disconnect,
    PingResp,
    ProtocolViolationError,
    PubRec,
    PubRel,
    SubAck,
    Unexpected,
    UnsubAck,
)
from matchcast.transport.mqtt311 import MalformedPacketError

if TYPE_CHECKING:
    from events import MessageProps
    from matchcast.transport.connection import BrokerURL
    from matchcast.transport.fast.inbox import Inbox
    from matchcast.transport.fast.packets import Codec

__all__ = ["Link", "NoConnAckError", "WriteCounts"]

_log = structlog.get_logger("matchcast.fastmqtt")

#: Write at once when this many packets are gathered, rather than at the end of the iteration.
_FLUSH_PACKETS = 2048
#: Keepalive periods without a byte from the broker after which the connection counts as lost.
_SILENT_PERIODS = 1.5
#: A publish waiting for room in flight: topic, payload, QoS, retain, properties.
_Outgoing = tuple[str, bytes, int, bool, "MessageProps | None"]


class NoConnAckError(Exception):
    """The broker closed the connection before its CONNACK."""


class WriteCounts:
    """Packets written, and in how many writes, over every connection of a client."""

    __slots__ = ("packets", "writes")

    def __init__(self) -> None:
        self.packets = 0
        self.writes = 0


class Link(asyncio.Protocol):
    """One connection to ``url`` in ``codec``'s version, from the CONNECT to its end.

    Received messages go to ``inbox``; ``inbound_qos2`` holds the ids of QoS 2 messages
    received and not yet released, which outlive a connection when the broker keeps the
    session. ``timeout`` bounds the wait for a SUBACK.
    """

    def __init__(
        self,
        url: BrokerURL,
        codec: Codec,
        inbox: Inbox,
        inbound_qos2: set[int],
        counts: WriteCounts,
        *,
        max_inflight: int,
        keepalive: int,
        timeout: float,
    ) -> None:
        self.loop = asyncio.get_running_loop()
        self.url = url
        self.codec = codec
        self.inbox = inbox
        self.keepalive = keepalive
        self.timeout = timeout
        self.max_inflight = max_inflight
        self.transport: asyncio.Transport | None = None
        #: Done when the connection ends, however it ends.
        self.lost: asyncio.Future[None] = self.loop.create_future()
        #: The broker's CONNACK.
        self.connack: asyncio.Future[ConnAck] = self.loop.create_future()
        #: No more traffic: lost, given up, or being closed by us.
        self.closed = False
        #: Why the connection was lost (None while it lives, or when we closed it).
        self.error: BrokerError | None = None
        self._handshake = True
        self._gone = False  # the transport's callbacks are ignored from now on
        self._inbound_qos2 = inbound_qos2
        self._counts = counts
        self._encode = codec.publish
        self._deliver = inbox.queue.append
        self._buf = b""
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self._paused = False
        self._drain: asyncio.Future[None] | None = None
        self._next_id = 0
        #: Packet id -> the future of a QoS 1 or 2 publish in flight, and its topic.
        self._acks: dict[int, tuple[asyncio.Future[None], str]] = {}
        self._subacks: dict[int, asyncio.Future[tuple[int, ...]]] = {}
        #: Packet id -> the filter of a SUBSCRIBE awaiting its SUBACK, and when it was sent.
        self._subscribing: dict[int, tuple[str, float]] = {}
        self._quota = 0
        self._queued: collections.deque[tuple[_Outgoing, asyncio.Future[None]]] = (
            collections.deque()
        )
        self._ping: asyncio.TimerHandle | None = None
        self._heard = True
        self._silent = 0.0

    # ------------------------------------------------------------ asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """The socket is open: the CONNECT can go."""
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.set_write_buffer_limits(high=4 * 1024 * 1024)

    def connection_lost(self, exc: Exception | None) -> None:
        """The socket closed: by the broker, unless we ended the link first."""
        if not self._gone:
            self._end(exc, by_broker=True)

    def pause_writing(self) -> None:
        """The write buffer is full: QoS 0 publishers wait (:meth:`publish`)."""
        self._paused = True

    def resume_writing(self) -> None:
        """The write buffer drained."""
        self._resume()

    def data_received(self, data: bytes) -> None:
        """Decode every whole packet that arrived, deliver the messages in one go."""
        if self._gone:
            return
        self._heard = True
        if self._handshake:
            self._on_handshake(data)
            return
        buf = self._buf + data if self._buf else data
        inbox = self.inbox
        handler = inbox.handler
        batch: list[Message] = []
        # messages() takes them from the queue; a batch handler gets the whole read at once
        self._deliver = inbox.queue.append if handler is None else batch.append
        try:
            used = self.codec.read(buf, self._deliver, self)
        except (MalformedPacketError, ProtocolViolationError) as err:
            self._hand_over(batch)  # what came before the bad packet still counts
            self._violation(err)
            return
        self._buf = buf[used:] if used < len(buf) else b""
        self._hand_over(batch)

    def _hand_over(self, batch: list[Message]) -> None:
        handler = self.inbox.handler
        if handler is None:
            if self.inbox.queue:
                self.inbox.wake()
        elif batch:
            self.inbox.hand_over(handler, batch, str(self.url))

    # ------------------------------------------------------------ the handshake

    def send_connect(self, packet: bytes) -> None:
        """Write the CONNECT; :attr:`connack` is the answer."""
        self._write(packet)

    def _on_handshake(self, data: bytes) -> None:
        """The CONNACK, in whichever shape the broker answered; what follows it is read on."""
        buf = self._buf + data
        try:
            found = self.codec.connack(buf)
        except MalformedPacketError as err:
            _log.error("broker.malformed_packet", broker=str(self.url), error=str(err))
            if not self.connack.done():
                self.connack.set_exception(
                    BrokerError(str(self.url), f"malformed CONNACK from the broker: {err}")
                )
            self.closed = True
            if self.transport is not None:
                self.transport.abort()
            return
        if found is None:
            self._buf = buf
            return
        ack, end = found
        self._handshake = False
        self._buf = b""
        if not self.connack.done():
            self.connack.set_result(ack)
        if end < len(buf) and not ack.code:
            self.data_received(buf[end:])  # session messages can come in the CONNACK's read

    def accept(self, ack: ConnAck) -> None:
        """Start the session the CONNACK ``ack`` accepted: publishes in flight, keepalive.

        Raises:
            BrokerError: the connection was lost in the CONNACK's own read (a bad packet).
        """
        if self.error is not None:
            raise self.error
        self._quota = self.max_inflight if ack.v311 else ack.receive_max or 65535
        if self.keepalive:
            self._ping = self.loop.call_later(self.keepalive / 2, self._tick)

    # ------------------------------------------------------------ inbound flows

    def acknowledge(self, message: Message, packet_id: int) -> None:
        """A QoS 1 PUBLISH: PUBACK and deliver. QoS 2: PUBREC, and deliver unless it is a
        resend of one not released yet (its PUBREL completes it)."""
        if message.qos == 1:
            self._write(self.codec.puback(packet_id))
            self._deliver(message)
            return
        self._write(self.codec.pubrec(packet_id))
        if packet_id not in self._inbound_qos2:
            self._inbound_qos2.add(packet_id)
            self._deliver(message)

    def control(self, packet: Control) -> None:
        """Every packet but a PUBLISH, in either version.

        Raises:
            ProtocolViolationError: a packet that may not come (see the module docstring).
        """
        match packet:
            case PubRec(packet_id=pid, code=code):
                if code >= 0x80:  # refused: the flow ends here, with no PUBREL
                    self.settle(pid, code)
                else:
                    self._write(self.codec.pubrel(pid))
            case PubRel(packet_id=pid):
                self._inbound_qos2.discard(pid)
                self._write(self.codec.pubcomp(pid))
            case SubAck(packet_id=pid, codes=codes):
                sub = self._subacks.pop(pid, None)
                if sub is not None and not sub.done():
                    sub.set_result(codes)
            case PingResp() | UnsubAck():
                pass  # heard: that is all a PINGRESP says; we send no UNSUBSCRIBE
            case Disconnect(code=code, reason=reason):
                self._end(
                    ConnectionError(f"broker disconnected: {reason} ({code:#x})"), by_broker=True
                )
                if self.transport is not None:
                    self.transport.close()
            case ConnAck():
                raise ProtocolViolationError("a second CONNACK")
            case Unexpected(name=name):
                raise ProtocolViolationError(f"a {name} is not sent by a broker")
            case _:
                assert_never(packet)

    # ------------------------------------------------------------ outbound flows

    def publish(
        self, topic: str, payload: bytes, qos: int, retain: bool, props: MessageProps | None
    ) -> asyncio.Future[None] | None:
        """Queue a publish.

        Returns:
            None for QoS 0 when the connection can take more; else a future done when the
            write buffer drained (QoS 0) or the broker acknowledged (QoS 1) or completed (QoS 2).

        Raises:
            BrokerError: the connection is gone.
        """
        if self.closed:
            raise self.error or BrokerError(str(self.url), "not connected")
        if not qos:
            self._write(self._encode(topic, payload, 0, retain, None, props))
            if self._paused:
                if self._drain is None:
                    self._drain = self.loop.create_future()
                return self._drain
            return None
        fut: asyncio.Future[None] = self.loop.create_future()
        if self._quota > 0:
            self._quota -= 1
            pid = self._packet_id()
            self._acks[pid] = (fut, topic)
            self._write(self._encode(topic, payload, qos, retain, pid, props))
        else:
            self._queued.append(((topic, payload, qos, retain, props), fut))
        return fut

    def settle(self, pid: int, code: int) -> None:
        """A publish of ours acknowledged (PUBACK, PUBCOMP) or refused (MQTT 5: a code of
        0x80 or more, in a PUBACK or a PUBREC); a free place in flight for the next."""
        entry = self._acks.pop(pid, None)
        if entry is None:
            return  # nothing of ours in flight under this id: no place is freed
        fut = entry[0]
        if not fut.done():
            if code < 0x80:
                fut.set_result(None)
            else:
                refused = self.codec.ack_reason(code)
                fut.set_exception(PublishRefusedError(str(self.url), entry[1], code, refused))
        self._quota += 1
        if self._queued:
            self._send_queued()

    def _send_queued(self) -> None:
        """Publishes that waited for a place in flight, as many as there are places."""
        while self._quota > 0 and self._queued:
            (topic, payload, qos, retain, props), fut = self._queued.popleft()
            self._quota -= 1
            pid = self._packet_id()
            self._acks[pid] = (fut, topic)
            self._write(self._encode(topic, payload, qos, retain, pid, props))

    def _packet_id(self) -> int:
        acks, subacks = self._acks, self._subacks
        for _ in range(65535):
            self._next_id = pid = self._next_id % 65535 + 1
            if pid not in acks and pid not in subacks:
                return pid
        raise BrokerError(str(self.url), "65535 packets in flight: no packet id free")

    async def subscribe(self, topic_filter: str, qos: int) -> None:
        """One SUBSCRIBE and its SUBACK, waited for ``timeout`` seconds.

        Raises:
            SubscribeRefusedError: the broker refused it.
            SubscribeDroppedError: the broker closed the connection in answer to it.
            BrokerError: the connection is gone, or no SUBACK came in time (RabbitMQ 3.10 can
                hold one under a client id whose queue is on a node that is down).
        """
        if self.closed:
            raise self.error or BrokerError(str(self.url), "not connected")
        pid = self._packet_id()
        fut: asyncio.Future[tuple[int, ...]] = self.loop.create_future()
        self._subacks[pid] = fut
        self._subscribing[pid] = (topic_filter, self.loop.time())
        self._write(self.codec.subscribe(pid, topic_filter, qos))
        try:
            async with asyncio.timeout(self.timeout):
                codes = await fut
        except TimeoutError:
            raise BrokerError(
                str(self.url),
                f"no SUBACK to a subscribe to {topic_filter!r} within {self.timeout:g}s",
            ) from None
        finally:
            self._subacks.pop(pid, None)
            self._subscribing.pop(pid, None)
        if any(c >= 0x80 for c in codes):
            raise SubscribeRefusedError(str(self.url), topic_filter, list(codes))

    # ------------------------------------------------------------ writing

    def _write(self, packet: bytes) -> None:
        self._out.append(packet)
        if len(self._out) >= _FLUSH_PACKETS:
            self._flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        out = self._out
        if not out:
            return
        self._out = []
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        self._counts.packets += len(out)
        self._counts.writes += 1
        transport.write(b"".join(out))

    def _resume(self) -> None:
        self._paused = False
        drain, self._drain = self._drain, None
        if drain is not None and not drain.done():
            drain.set_result(None)

    # ------------------------------------------------------------ the end

    def _tick(self) -> None:
        """Every half keepalive: ping, and give up on a broker silent for 1.5 keepalives."""
        if self.closed:
            return
        if self._heard:
            self._heard, self._silent = False, 0.0
        else:
            self._silent += 0.5
            if self._silent >= _SILENT_PERIODS:
                waited = self._silent * self.keepalive
                self._end(TimeoutError(f"no answer from the broker for {waited:g}s"))
                if self.transport is not None:
                    self.transport.abort()
                return
        self._write(self.codec.pingreq())
        self._ping = self.loop.call_later(self.keepalive / 2, self._tick)

    def _violation(self, err: MalformedPacketError | ProtocolViolationError) -> None:
        """Close the connection on a packet that is not one, or may not come (the module
        docstring says why), after what is owed: the acknowledgements of what was delivered,
        and in MQTT 5 a DISCONNECT with the reason."""
        malformed = isinstance(err, MalformedPacketError)
        code = MALFORMED_PACKET if isinstance(err, MalformedPacketError) else err.code
        event = "broker.malformed_packet" if malformed else "broker.protocol_violation"
        _log.error(event, broker=str(self.url), protocol=self.codec.version, error=str(err))
        self._flush()
        transport = self.transport
        if transport is not None and not transport.is_closing() and self.codec.version == "5":
            transport.write(self.codec.disconnect(code))
        what = "malformed packet" if malformed else "protocol violation"
        self._end(ConnectionError(f"{what} from the broker: {err}"))
        if transport is not None:
            # close() sends what is buffered first; a broker that reads nothing gets an abort
            if transport.get_write_buffer_size():
                transport.abort()
            else:
                transport.close()

    def _end(self, exc: BaseException | None, *, by_broker: bool = False) -> None:
        """The connection ended; ``by_broker``: the broker closed it (EOF, a reset, an MQTT 5
        DISCONNECT), not our keepalive or a bad packet."""
        self._gone = True
        if not self.lost.done():
            self.lost.set_result(None)
        if self._handshake:  # no connection yet: the attempt reports it
            self.closed = True
            if not self.connack.done():
                self.connack.set_exception(
                    NoConnAckError(f"closed the connection before its CONNACK ({exc or 'EOF'})")
                )
            return
        unexpected = not self.closed
        if unexpected:
            self.error = ConnectionLostError(
                str(self.url), f"connection lost: {exc or 'closed by broker'}"
            )
        self.closed = True
        if self._ping is not None:
            self._ping.cancel()
        if unexpected and by_broker:
            self._fail_dropped_subscribes()
        self._fail_pending(self.error or BrokerError(str(self.url), "connection closed"))
        self._resume()
        self.inbox.wake()
        if unexpected:  # last: state first, so a failing log handler cannot leave readers hanging
            _log.warning(
                "broker.connection_lost",
                broker=str(self.url),
                error=str(exc) if exc else "closed by the broker",
            )

    def _fail_dropped_subscribes(self) -> None:
        """Fail each SUBSCRIBE sent just before the broker closed the connection with
        :class:`events.SubscribeDroppedError`: the close was its answer."""
        now = self.loop.time()
        for pid, (topic_filter, sent) in self._subscribing.items():
            sub = self._subacks.get(pid)
            if sub is not None and not sub.done() and now - sent <= SUBSCRIBE_DROP_WINDOW_S:
                sub.set_exception(SubscribeDroppedError(str(self.url), topic_filter))

    def _fail_pending(self, err: BrokerError) -> None:
        for fut in [*(f for f, _ in self._acks.values()), *(f for _, f in self._queued)]:
            if not fut.done():
                fut.set_exception(err)
                fut.exception()  # a load generator may never look; don't warn about it
        for sub in self._subacks.values():
            if not sub.done():
                sub.set_exception(err)
        self._acks.clear()
        self._queued.clear()
        self._subacks.clear()

    def abort(self, reason: str = "connection replaced") -> None:
        """End the connection at once (a failed attempt, or one being replaced); what is in
        flight fails with :class:`events.ConnectionLostError` (``reason``)."""
        self.closed = True
        if self._ping is not None:
            self._ping.cancel()
        if self.transport is not None:
            self.transport.abort()
        if self._gone:
            return
        self._gone = True
        if not self.lost.done():
            self.lost.set_result(None)
        self._fail_pending(self.error or ConnectionLostError(str(self.url), reason))
        self.inbox.wake()

    async def close(self, err: BrokerError) -> None:
        """Leave cleanly: DISCONNECT, then wait (``timeout`` at most) until every byte
        written is sent, or a process that exits right after would lose the tail of what it
        published at QoS 0. What is still in flight fails with ``err``."""
        self.closed = True
        transport = self.transport
        if transport is not None and not transport.is_closing() and not self._gone:
            self._write(self.codec.disconnect())
            self._flush()
            transport.close()
            try:
                async with asyncio.timeout(self.timeout):
                    await asyncio.shield(self.lost)
            except TimeoutError:
                pass
        self._fail_pending(err)
        self.inbox.wake()
        if self._ping is not None:
            self._ping.cancel()
