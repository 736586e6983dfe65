"""A raw asyncio HTTP/SSE client for the web tests: no library between the test and the bytes."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class SSEEvent:
    kind: str
    id: int | None
    data: Any


@dataclass
class SSEClient:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    buffer: bytes = b""

    async def _more(self) -> None:
        """Read on: one chunk of a chunked body (HTTP/1.1 streams are), else what is there."""
        if self.headers.get("transfer-encoding") != "chunked":
            data = await self.reader.read(65536)
            if not data:
                raise asyncio.IncompleteReadError(self.buffer, None)
            self.buffer += data
            return
        size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            raise asyncio.IncompleteReadError(self.buffer, None)
        self.buffer += (await self.reader.readexactly(size + 2))[:-2]

    async def next(self) -> SSEEvent:
        """The next event (comments and the retry line are skipped)."""
        while True:
            while b"\n\n" not in self.buffer:
                await self._more()
            block, _, self.buffer = self.buffer.partition(b"\n\n")
            kind, seq, data = "message", None, None
            for line in block.decode().splitlines():
                name, _, value = line.partition(": ")
                if name == "event":
                    kind = value
                elif name == "id":
                    seq = int(value)
                elif name == "data":
                    data = json.loads(value)
            if data is not None:
                return SSEEvent(kind, seq, data)

    def close(self) -> None:
        self.writer.close()


async def get(port: int, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode()
    )
    raw = await reader.read()
    writer.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
    return int(lines[0].split()[1]), headers, body


async def open_stream(
    port: int, match_id: str | None, last_event_id: int | None = None, *, rcvbuf: int | None = None
) -> SSEClient:
    """GET /events and read the response head."""
    if rcvbuf is not None:
        import socket

        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        reader, writer = await asyncio.open_connection(sock=sock)
    else:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    path = "/events" + (f"?match={match_id}" if match_id else "")
    extra = f"Last-Event-ID: {last_event_id}\r\n" if last_event_id is not None else ""
    writer.write(
        f"GET {path} HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n{extra}\r\n".encode()
    )
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:] if h)}
    return SSEClient(reader, writer, int(lines[0].split()[1]), headers)
