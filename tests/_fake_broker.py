"""A broker of the test's own making: a loopback TCP server whose handler reads and answers
the client's MQTT packets, for the hostile and quirky brokers no real one will play."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from matchcast.transport import mqtt, mqtt311
from matchcast.transport.connection import BrokerURL
from matchcast.transport.fast.connect import PROTOCOL_OF

__all__ = ["Handler", "fake_broker", "level", "read_packet"]

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def fake_broker(handler: Handler) -> AsyncIterator[BrokerURL]:
    """A TCP server on a free loopback port running ``handler`` per connection."""
    tasks: set[asyncio.Task[None]] = set()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            return  # the server is closing
        finally:
            writer.close()

    server = await asyncio.start_server(accept, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    _forget_protocol(port)
    try:
        yield BrokerURL("127.0.0.1", port)
    finally:
        server.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        _forget_protocol(port)


def _forget_protocol(port: int) -> None:
    """What either client learnt of the protocol a broker on this port speaks: a later fake
    broker may get the same port and speak another."""
    PROTOCOL_OF.pop(("127.0.0.1", port), None)
    mqtt._V5_SUPPORT.pop(("127.0.0.1", port), None)


async def read_packet(reader: asyncio.StreamReader) -> bytes:
    """One whole MQTT packet (either version: the framing is the same)."""
    data = await reader.readexactly(2)
    while mqtt311.frame(data) is None:
        if data[-1] & 0x80:
            data += await reader.readexactly(1)
        else:
            data += await reader.readexactly(data[-1] if len(data) == 2 else 0)
            found = mqtt311.frame(data)
            if found is None:  # a multi-byte length: read the rest it says
                length = 0
                for i, b in enumerate(data[1:5]):
                    length |= (b & 0x7F) << (7 * i)
                    if not b & 0x80:
                        body_start = i + 2
                        break
                data += await reader.readexactly(body_start + length - len(data))
    return data


def level(connect: bytes) -> int:
    """The protocol level of a CONNECT: 4 is 3.1.1, 5 is MQTT 5."""
    found = mqtt311.frame(connect)
    assert found is not None
    return connect[found[1] + 6]
