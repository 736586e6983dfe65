"""The embedded broker: amqtt running in this process, for demos and tests.

amqtt 0.12 speaks MQTT 3.1.1 only (it refuses a v5 CONNECT), delivers nothing to shared
subscriptions, and routes a few thousand messages a second at full CPU. That is plenty for a
replay (a match is a few hundred events) and never the target of a load test: use mosquitto
or a broker cluster for that (see the README).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
from collections.abc import AsyncIterator
from typing import Any

import structlog

__all__ = ["DEFAULT_HOST", "FREE_PORT_TRIES", "EmbeddedBroker", "embedded_broker", "free_port"]

_log = structlog.get_logger("matchcast.broker")
DEFAULT_HOST = "127.0.0.1"


def free_port(host: str = DEFAULT_HOST) -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


class EmbeddedBroker:
    """An amqtt broker bound to ``host:port`` (127.0.0.1 unless told otherwise)."""

    def __init__(self, host: str = DEFAULT_HOST, port: int = 1883) -> None:
        self.host = host
        self.port = port
        self._broker: Any = None

    @property
    def url(self) -> str:
        """``mqtt://host:port`` of this broker."""
        return f"mqtt://{self.host}:{self.port}"

    async def start(self) -> None:
        """Start listening; returns once the port accepts connections.

        Raises:
            OSError: the port is taken or cannot be bound.
        """
        for name in ("amqtt", "transitions"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        config = {
            "listeners": {"default": {"type": "tcp", "bind": f"{self.host}:{self.port}"}},
            # A plugins dict replaces amqtt's defaults: anonymous auth must be listed or
            # every CONNECT is refused.
            "plugins": {
                "amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}
            },
        }
        self._broker = _closing_broker()(config)  # must be created inside a running loop
        try:
            await self._broker.start()
        except Exception as err:
            raise OSError(
                f"cannot start the embedded broker on {self.host}:{self.port}: {err}"
            ) from err
        _log.info("broker.started", host=self.host, port=self.port, kind="amqtt")

    async def stop(self) -> None:
        """Stop the broker; idempotent."""
        if self._broker is not None:
            broker, self._broker = self._broker, None
            with contextlib.suppress(Exception):
                await asyncio.wait_for(broker.shutdown(), timeout=5)
            _log.info("broker.stopped", host=self.host, port=self.port)


def _closing_broker() -> type[Any]:
    """amqtt's ``Broker``, closing each connection's stream once amqtt is done with it.

    amqtt 0.12 leaves the stream open when a connection ends before its CONNECT is read (a
    client that gives up while connecting, as a cancelled connect or a short timeout does);
    the garbage collector then reports the socket, in whichever later test it runs. Closing
    a stream twice is harmless. ``stream_connected`` is what amqtt's listener calls for each
    connection; ``tests/matchcast/test_broker.py`` checks that it still is.
    """
    from amqtt.broker import Broker  # noqa: PLC0415 - heavy import, only when used

    class ClosingBroker(Broker):  # type: ignore[misc]
        async def stream_connected(
            self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, listener_name: str
        ) -> None:
            try:
                await super().stream_connected(reader, writer, listener_name)
            finally:
                writer.close()

    return ClosingBroker


#: Free ports tried in turn when another program takes the one found before it is bound.
FREE_PORT_TRIES = 5


@contextlib.asynccontextmanager
async def embedded_broker(
    host: str = DEFAULT_HOST, port: int | None = None
) -> AsyncIterator[EmbeddedBroker]:
    """Run an embedded broker for the duration of the block (on a free port by default).

    A free port is found, then bound: another program can take it in between (tests and
    brokers starting at once on a busy machine), so a port taken that way is tried again
    with another, up to :data:`FREE_PORT_TRIES` times. A port given is tried once."""
    tries = 1 if port is not None else FREE_PORT_TRIES
    for attempt in range(1, tries + 1):
        broker = EmbeddedBroker(host, port if port is not None else free_port(host))
        try:
            await broker.start()
            break
        except OSError as err:
            await broker.stop()
            if attempt == tries or f"[Errno {errno.EADDRINUSE}]" not in str(err):
                raise
            _log.info("broker.port_taken", host=host, port=broker.port, attempt=attempt)
    try:
        yield broker
    finally:
        await broker.stop()
