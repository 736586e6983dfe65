"""A TCP proxy in front of a broker that reads the client's MQTT 3.1.1 packets and may answer
or swallow some itself: a broker's quirks (NATS refusing a QoS 1 SUBSCRIBE, RabbitMQ hanging
a session's SUBSCRIBE) on a mosquitto. The broker's side is passed on as it comes."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Self

from matchcast.transport import mqtt311


@dataclass
class Connection:
    """One client connection through the proxy."""

    writer: asyncio.StreamWriter  # to the client
    client_id: str = ""  # from its CONNECT


class PacketProxy:
    """Forwards to ``127.0.0.1:upstream_port``; override :meth:`client_packet` to answer or
    swallow a client's packet (return False: not passed on)."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def client_packet(self, conn: Connection, first: int, start: int, packet: bytes) -> bool:
        """Whether to pass on the client's ``packet`` (its body starts at ``start``)."""
        return True

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        up_r, up_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)

        async def upstream() -> None:
            with contextlib.suppress(OSError):
                while data := await up_r.read(65536):
                    writer.write(data)
                    await writer.drain()

        back = asyncio.create_task(upstream())
        conn, buf = Connection(writer), b""
        try:
            while data := await reader.read(65536):
                buf += data
                while (found := mqtt311.frame(buf)) is not None:
                    first, start, end = found
                    packet, buf = buf[:end], buf[end:]
                    if first == 0x10:  # CONNECT 3.1.1: 10 bytes of header, then the id
                        size = int.from_bytes(packet[start + 10 : start + 12], "big")
                        conn.client_id = packet[start + 12 : start + 12 + size].decode()
                    if self.client_packet(conn, first, start, packet):
                        up_w.write(packet)
        except OSError:
            pass
        finally:
            back.cancel()
            up_w.close()
            writer.close()
            self._tasks.discard(task)


class QoS1Refuser(PacketProxy):
    """Forwards MQTT 3.1.1 to a broker, but answers a QoS 1 SUBSCRIBE itself with SUBACK 0x80
    while ``refusing`` (NATS while JetStream has no leader); QoS 0 ones go through."""

    def __init__(self, upstream_port: int) -> None:
        super().__init__(upstream_port)
        self.refusing = True
        self.subscribes: list[tuple[str, int, bool]] = []  # filter, QoS, refused

    def client_packet(self, conn: Connection, first: int, start: int, packet: bytes) -> bool:
        if first != 0x82:  # SUBSCRIBE: id, then (filter, QoS) pairs
            return True
        pid = int.from_bytes(packet[start : start + 2], "big")
        size = int.from_bytes(packet[start + 2 : start + 4], "big")
        flt = packet[start + 4 : start + 4 + size].decode()
        qos = packet[start + 4 + size]
        refused = self.refusing and qos > 0
        self.subscribes.append((flt, qos, refused))
        if refused:
            conn.writer.write(mqtt311.SubAck(pid, (0x80,)).encode())
        return not refused


class SubscribeCloser(PacketProxy):
    """Forwards MQTT 3.1.1 to a broker, but closes the connection at a SUBSCRIBE, as RabbitMQ
    3.10 does under a client id whose subscription queue is on a node that is down: under the
    client id ``client_id`` only (exactly: not one that starts with it), or any; to a filter
    holding ``topic_part`` only, or any. Counts the CONNECTs and the closes."""

    def __init__(
        self,
        upstream_port: int,
        client_id: str | None = None,
        *,
        topic_part: bytes | None = None,
    ) -> None:
        super().__init__(upstream_port)
        self.client_id = client_id
        self.topic_part = topic_part
        self.connects = 0
        self.closed = 0

    def client_packet(self, conn: Connection, first: int, start: int, packet: bytes) -> bool:
        if first == 0x10:
            self.connects += 1
        if (
            first == 0x82
            and self.client_id in (None, conn.client_id)
            and (self.topic_part is None or self.topic_part in packet[start:])
        ):
            self.closed += 1
            conn.writer.transport.abort()
            return False
        return True
