"""A lean asyncio MQTT 5 client on the Rust ``mqtt5`` packet codec, for load generation.

aiomqtt (on paho) spends about 0.2 ms of CPU per publish, which caps a Python load generator
far below what mosquitto routes. This client is a plain :class:`asyncio.Protocol`: packets are
encoded and decoded by ``mqtt5`` (Rust), outgoing packets are gathered and written once per
event-loop iteration (one ``send`` for many packets), and incoming ones are decoded in bulk as
each chunk of bytes arrives. It implements the same :class:`events.Publisher` and
:class:`events.MessageSource` protocols as :class:`matchcast.mqtt.MqttClient`, plus
``publish_nowait`` so a load generator can keep many publishes in flight without a task each,
and :class:`events.BatchSource` (``set_batch_handler``), so a consumer can take each read's
messages in one call instead of one at a time from :meth:`FastClient.messages`.

Scope: MQTT 5 only (no 3.1.1 fallback), QoS 0, 1 and 2 both ways, keepalive pings, clean
start, TLS, username/password, a clean DISCONNECT. No will, no session resumption, no
automatic reconnect: a lost connection ends :meth:`FastClient.messages` with ``BrokerError``
and fails every publish awaiting the broker.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ssl
import uuid
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Self

import mqtt5
import structlog

from events import BrokerError, Message, MessageProps
from matchcast.mqtt import BrokerURL

__all__ = ["FastClient"]

_log = structlog.get_logger("matchcast.fastmqtt")

_QOS = (mqtt5.QoS.AT_MOST_ONCE, mqtt5.QoS.AT_LEAST_ONCE, mqtt5.QoS.EXACTLY_ONCE)
#: Messages :meth:`FastClient.messages` yields before it lets the event loop run other work.
_YIELD_EVERY = 256
#: Write at once when this many packets are gathered, rather than at the end of the iteration.
_FLUSH_PACKETS = 2048


#: A publish waiting to be written: topic, payload, QoS, retain, properties.
_Outgoing = tuple[str, bytes, int, bool, MessageProps | None]
#: Takes every message that arrived in one read from the socket.
BatchHandler = Callable[[list[Message]], None]
#: Makes a Message without the named tuple's keyword-handling ``__new__`` (a third the cost).
_new = tuple.__new__


def _encode(msg: _Outgoing, packet_id: int | None) -> bytes:
    topic, payload, qos, retain, props = msg
    if props is None:
        return mqtt5.PublishPacket(
            topic, payload, qos=_QOS[qos], retain=retain, packet_id=packet_id
        ).write()
    return mqtt5.PublishPacket(
        topic,
        payload,
        qos=_QOS[qos],
        retain=retain,
        packet_id=packet_id,
        content_type=props.content_type,
        message_expiry_interval=props.message_expiry,
        user_properties=list(props.user) or None,
    ).write()


class _Protocol(asyncio.Protocol):
    def __init__(self, client: FastClient) -> None:
        self.client = client

    def data_received(self, data: bytes) -> None:
        self.client._on_data(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.client._on_lost(exc)

    def pause_writing(self) -> None:
        self.client._paused = True

    def resume_writing(self) -> None:
        self.client._resume()


class FastClient:
    """A connection to a broker over MQTT 5; implements ``Publisher`` and ``MessageSource``.

    Use as an async context manager, like :class:`matchcast.mqtt.MqttClient`.
    """

    def __init__(
        self,
        url: BrokerURL,
        *,
        client_id: str | None = None,
        keepalive: int = 30,
        connect_timeout: float = 10.0,
        tls_context: ssl.SSLContext | None = None,
    ) -> None:
        self.url = url
        self.client_id = client_id or f"matchcast-{uuid.uuid4().hex[:12]}"
        self.keepalive = keepalive
        self._timeout = connect_timeout
        self._tls = tls_context
        self._transport: asyncio.Transport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._buf = b""
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self._paused = False
        self._drain: asyncio.Future[None] | None = None
        self._connack: asyncio.Future[mqtt5.ConnAckPacket] | None = None
        self._next_id = 0
        self._acks: dict[int, asyncio.Future[None]] = {}
        self._subacks: dict[int, asyncio.Future[list[int]]] = {}
        self._quota = 0
        self._queued: collections.deque[tuple[_Outgoing, asyncio.Future[None]]] = (
            collections.deque()
        )
        self._inbound_qos2: set[int] = set()
        self._inbox: collections.deque[Message] = collections.deque()
        self._waiter: asyncio.Future[None] | None = None
        self._batch_handler: BatchHandler | None = None
        self._closed = False
        self._error: BrokerError | None = None
        self._ping: asyncio.TimerHandle | None = None
        self._lost: asyncio.Future[None] | None = None
        #: Packets and bytes written, and how many writes (flushes) it took.
        self.packets_out = 0
        self.writes = 0

    # ------------------------------------------------------------ connection

    async def __aenter__(self) -> Self:
        loop = self._loop = asyncio.get_running_loop()
        self._lost = loop.create_future()
        tls = self._tls
        if self.url.tls and tls is None:
            # the --ca-file/--cert-file/--key-file/--tls-insecure options ride on the URL
            context = getattr(self.url, "context", None)
            tls = context() if context is not None else None
            tls = tls or ssl.create_default_context()
        try:
            async with asyncio.timeout(self._timeout):
                transport, _ = await loop.create_connection(
                    lambda: _Protocol(self), self.url.host, self.url.port, ssl=tls
                )
                assert isinstance(transport, asyncio.Transport)
                self._transport = transport
                transport.set_write_buffer_limits(high=4 * 1024 * 1024)
                self._connack = loop.create_future()
                password = self.url.password.encode() if self.url.password else None
                self._write(
                    mqtt5.ConnectPacket(
                        self.client_id,
                        username=self.url.username,
                        password=password,
                        clean_start=True,
                        keep_alive=self.keepalive,
                    ).write()
                )
                connack = await self._connack
        except (OSError, TimeoutError) as err:
            self._abort()
            raise BrokerError(str(self.url), f"cannot connect: {err or 'timed out'}") from err
        code = int(connack.reason_code)
        if code >= 0x80:
            self._abort()
            raise BrokerError(str(self.url), f"connection refused: {connack.reason_code}")
        self._quota = connack.receive_max or 65535
        if self.keepalive:
            self._ping = loop.call_later(self.keepalive / 2, self._send_ping)
        _log.debug("broker.connected", broker=str(self.url), client_id=self.client_id)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        transport = self._transport
        self._closed = True
        if transport is not None and not transport.is_closing():
            self._write(mqtt5.DisconnectPacket().write())
            self._flush()
            # close() writes out what is buffered first; wait for it, or a process that exits
            # right after would lose the tail of what it published at QoS 0.
            transport.close()
            if self._lost is not None:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._timeout):
                        await self._lost
        self._fail_pending(BrokerError(str(self.url), "client closed"))
        self._wake()
        if self._ping is not None:
            self._ping.cancel()

    def _abort(self) -> None:
        if self._transport is not None:
            self._transport.abort()
        self._closed = True

    def _send_ping(self) -> None:
        if self._closed:
            return
        self._write(mqtt5.PingReqPacket().write())
        assert self._loop is not None
        self._ping = self._loop.call_later(self.keepalive / 2, self._send_ping)

    def _on_lost(self, exc: Exception | None) -> None:
        if self._lost is not None and not self._lost.done():
            self._lost.set_result(None)
        unexpected = not self._closed
        if unexpected:
            self._error = BrokerError(
                str(self.url), f"connection lost: {exc or 'closed by broker'}"
            )
        self._closed = True
        if self._ping is not None:
            self._ping.cancel()
        if self._connack is not None and not self._connack.done():
            self._connack.set_exception(ConnectionError("closed before CONNACK"))
        self._fail_pending(self._error or BrokerError(str(self.url), "connection closed"))
        self._resume()
        self._wake()
        if unexpected:  # last: state first, so a failing log handler cannot leave readers hanging
            _log.warning("broker.connection_lost", broker=str(self.url), error=str(exc))

    def _fail_pending(self, err: BrokerError) -> None:
        for fut in [*self._acks.values(), *(f for _, f in self._queued)]:
            if not fut.done():
                fut.set_exception(err)
                fut.exception()  # a load generator may never look; don't warn about it
        for sub in self._subacks.values():
            if not sub.done():
                sub.set_exception(err)
        self._acks.clear()
        self._queued.clear()
        self._subacks.clear()

    # ------------------------------------------------------------ writing

    def _write(self, packet: bytes) -> None:
        self._out.append(packet)
        if len(self._out) >= _FLUSH_PACKETS:
            self._flush()
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            assert self._loop is not None
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        out = self._out
        if not out:
            return
        self._out = []
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        self.packets_out += len(out)
        self.writes += 1
        transport.write(b"".join(out))

    def _resume(self) -> None:
        self._paused = False
        drain, self._drain = self._drain, None
        if drain is not None and not drain.done():
            drain.set_result(None)

    def _packet_id(self) -> int:
        for _ in range(65535):
            self._next_id = self._next_id % 65535 + 1
            if self._next_id not in self._acks:
                return self._next_id
        raise BrokerError(str(self.url), "65535 publishes in flight: no packet id free")

    # ------------------------------------------------------------ publishing

    def publish_nowait(
        self, topic: str, payload: bytes, qos: int, retain: bool
    ) -> asyncio.Future[None] | None:
        """Queue a publish without a task.

        Returns:
            None for QoS 0 when the connection can take more; else a future done when the
            write buffer drained (QoS 0) or the broker acknowledged (QoS 1) or completed (QoS 2).
        """
        return self._publish((topic, payload, qos, retain, None))

    def _publish(self, msg: _Outgoing) -> asyncio.Future[None] | None:
        if self._closed:
            raise BrokerError(str(self.url), "not connected")
        loop = self._loop
        assert loop is not None
        if msg[2] == 0:
            self._write(_encode(msg, None))
            if self._paused:
                if self._drain is None:
                    self._drain = loop.create_future()
                return self._drain
            return None
        fut: asyncio.Future[None] = loop.create_future()
        if self._quota > 0:
            self._send_acked(msg, fut)
        else:
            self._queued.append((msg, fut))
        return fut

    def _send_acked(self, msg: _Outgoing, fut: asyncio.Future[None]) -> None:
        self._quota -= 1
        pid = self._packet_id()
        self._acks[pid] = fut
        self._write(_encode(msg, pid))

    def _release(self) -> None:
        self._quota += 1
        while self._quota > 0 and self._queued:
            msg, fut = self._queued.popleft()
            self._send_acked(msg, fut)

    async def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        props: MessageProps | None = None,
    ) -> None:
        """Publish and wait for the broker per QoS.

        Raises:
            BrokerError: the connection is gone or the broker refused the message.
        """
        fut = self._publish((topic, payload, qos, retain, props))
        if fut is not None:
            await fut

    # ------------------------------------------------------------ subscribing

    async def subscribe(self, topic_filter: str, *, qos: int = 1) -> None:
        """Subscribe and wait for the SUBACK.

        Raises:
            BrokerError: the broker refused it or the connection is gone.
        """
        if self._closed:
            raise BrokerError(str(self.url), "not connected")
        assert self._loop is not None
        pid = self._packet_id()
        fut: asyncio.Future[list[int]] = self._loop.create_future()
        self._subacks[pid] = fut
        self._acks[pid] = self._loop.create_future()  # reserve the id
        flt = mqtt5.TopicFilter(topic_filter, max_qos=_QOS[qos])
        self._write(mqtt5.SubscribePacket(pid, [flt]).write())
        try:
            codes = await fut
        finally:
            self._acks.pop(pid, None)
        if any(c >= 0x80 for c in codes):
            raise BrokerError(
                str(self.url), f"subscribe to {topic_filter!r} refused (code {codes})"
            )

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def messages(self) -> AsyncIterator[Message]:
        """Messages as they arrive; ends when the connection is closed by us.

        Raises:
            BrokerError: the connection was lost.
        """
        inbox = self._inbox
        while True:
            # A chunk from the socket can hold thousands of messages. Hand the loop back every
            # so often, or the acks of this process's publishers wait behind them (a QoS 1
            # load run's sender stalled at a fifth of its rate).
            for _ in range(_YIELD_EVERY):
                if not inbox:
                    break
                yield inbox.popleft()
            else:
                await asyncio.sleep(0)
                continue
            if self._closed:
                if self._error is not None:
                    raise self._error
                return
            assert self._loop is not None
            self._waiter = self._loop.create_future()
            await self._waiter

    def set_batch_handler(self, handler: BatchHandler | None) -> None:
        """Hand received messages to ``handler`` in batches instead of to :meth:`messages`.

        ``handler`` is called from the socket's read callback with every message one read
        brought (hundreds under load; messages already queued go first): no queue and no
        task switch per message (see :class:`events.BatchSource`). It must not block. An
        exception from it is logged as ``broker.batch_handler_failed`` and the connection
        carries on. None goes back to :meth:`messages`.
        """
        self._batch_handler = handler
        if handler is not None and self._inbox:
            queued = list(self._inbox)
            self._inbox.clear()
            self._hand_over(handler, queued)

    def _hand_over(self, handler: BatchHandler, batch: list[Message]) -> None:
        try:
            handler(batch)
        except Exception as err:  # a handler bug must not drop the connection
            _log.error(
                "broker.batch_handler_failed",
                broker=str(self.url),
                messages=len(batch),
                error=str(err),
                exc_info=err,
            )

    async def wait_closed(self) -> None:
        """Wait until the connection ends.

        Raises:
            BrokerError: the connection was lost (not closed by us).
        """
        assert self._lost is not None, "not connected"
        await asyncio.shield(self._lost)
        if self._error is not None:
            raise self._error

    # ------------------------------------------------------------ reading

    def _on_data(self, data: bytes) -> None:
        buf = self._buf + data if self._buf else data
        view = memoryview(buf)
        end = len(buf)
        off = 0
        handler = self._batch_handler
        batch: list[Message] = []
        # messages() takes them from the inbox; a batch handler gets the whole read at once
        append = self._inbox.append if handler is None else batch.append
        read, publish, at_most_once = mqtt5.read, mqtt5.PublishPacket, mqtt5.QoS.AT_MOST_ONCE
        try:
            while off < end:
                packet, used = read(view[off:])
                off += used
                if type(packet) is publish:
                    qos = packet.qos
                    if qos == at_most_once:
                        append(_new(Message, (packet.topic, packet.payload, 0, packet.retain)))
                    elif self._acknowledge(packet):
                        append(
                            _new(Message, (packet.topic, packet.payload, int(qos), packet.retain))
                        )
                else:
                    self._on_control(packet)
        except IndexError:
            pass  # an incomplete packet: wait for the rest
        except ValueError as err:
            if batch and handler is not None:  # what came before the bad packet still counts
                self._hand_over(handler, batch)
            _log.error("broker.malformed_packet", broker=str(self.url), error=str(err))
            self._on_lost(ConnectionError(f"malformed packet from the broker: {err}"))
            if self._transport is not None:
                self._transport.abort()
            return
        finally:
            view.release()
        self._buf = buf[off:] if off < end else b""
        if handler is None:
            if self._inbox:
                self._wake()
        elif batch:
            self._hand_over(handler, batch)

    def _acknowledge(self, packet: mqtt5.PublishPacket) -> bool:
        """Ack a QoS 1 or 2 PUBLISH; False if it is a QoS 2 resend already delivered."""
        pid = packet.packet_id
        assert pid is not None
        if packet.qos == mqtt5.QoS.AT_LEAST_ONCE:
            self._write(mqtt5.PubAckPacket(pid).write())
            return True
        self._write(mqtt5.PubRecPacket(pid).write())
        if pid in self._inbound_qos2:
            return False
        self._inbound_qos2.add(pid)
        return True

    def _on_control(self, packet: mqtt5.Packet) -> None:
        if isinstance(packet, mqtt5.PubAckPacket | mqtt5.PubCompPacket):
            fut = self._acks.pop(packet.packet_id, None)
            if fut is not None and not fut.done():
                code = int(packet.reason_code)
                if code >= 0x80:
                    fut.set_exception(
                        BrokerError(str(self.url), f"publish refused: {packet.reason_code}")
                    )
                else:
                    fut.set_result(None)
            self._release()
        elif isinstance(packet, mqtt5.PubRecPacket):
            if int(packet.reason_code) >= 0x80:
                fut = self._acks.pop(packet.packet_id, None)
                if fut is not None and not fut.done():
                    fut.set_exception(
                        BrokerError(str(self.url), f"publish refused: {packet.reason_code}")
                    )
                self._release()
            else:
                self._write(mqtt5.PubRelPacket(packet.packet_id).write())
        elif isinstance(packet, mqtt5.PubRelPacket):
            self._inbound_qos2.discard(packet.packet_id)
            self._write(mqtt5.PubCompPacket(packet.packet_id).write())
        elif isinstance(packet, mqtt5.SubAckPacket):
            sub = self._subacks.pop(packet.packet_id, None)
            if sub is not None and not sub.done():
                sub.set_result([int(c) for c in packet.reason_codes])
        elif isinstance(packet, mqtt5.ConnAckPacket):
            if self._connack is not None and not self._connack.done():
                self._connack.set_result(packet)
        elif isinstance(packet, mqtt5.DisconnectPacket):
            self._on_lost(ConnectionError(f"broker disconnected: {packet.reason_code}"))
            if self._transport is not None:
                self._transport.close()
        # PINGRESP and anything else: nothing to do.
