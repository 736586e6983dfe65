"""Opening one connection of the fast client: the socket, the CONNECT, the CONNACK, and which
MQTT version the broker speaks.

``protocol="auto"`` tries MQTT 5 and falls back to 3.1.1 when the broker refuses it (NATS:
return code 1), closes the connection before its CONNACK, or sends none within the probe
timeout (RabbitMQ 3.10 never answers a v5 CONNECT); the answer is remembered per broker
address (:data:`PROTOCOL_OF`), so only the first connection to a broker pays for the probe.
A refusal, or a broker that answers neither version, is a :class:`events.BrokerError` that
names the cause and what to do about it.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import structlog

from events import BrokerError
from matchcast.transport.connection import (
    BrokerURL,
    Protocol,
    WillSpec,
    cannot_connect,
    connect_hint,
)
from matchcast.transport.fast import codec5, codec311
from matchcast.transport.fast.link import Link, NoConnAckError
from matchcast.transport.fast.packets import Codec, ConnAck

__all__ = ["PROTOCOL_OF", "Hello", "open_link"]

_log = structlog.get_logger("matchcast.fastmqtt")

#: (host, port) -> the version the broker accepted, learnt by the first connection in auto.
PROTOCOL_OF: dict[tuple[str, int], Literal["5", "3.1.1"]] = {}
_CODECS: dict[str, Codec] = {"5": codec5.CODEC, "3.1.1": codec311.CODEC}
#: CONNACK reason of a v5 broker that does not speak 5 (a 3.1.1 one says return code 1).
_V5_UNSUPPORTED = 0x84
_AUTH_CODES = frozenset((4, 5, 0x86, 0x87))
_LISTENER_HINT = " (is this port an MQTT listener, plain for mqtt:// and TLS for mqtts://?)"
_V5_HINT = (
    " (a broker that speaks only 3.1.1, such as RabbitMQ 3.10, never answers an MQTT 5 "
    "CONNECT: use --protocol auto or 3.1.1)"
)


@dataclass(frozen=True, slots=True)
class Hello:
    """What a CONNECT says, whatever the version."""

    client_id: str
    clean_start: bool
    keepalive: int
    will: WillSpec | None
    session_expiry: int | None


class _SilentError(Exception):
    """No CONNACK in time, or the connection closed before it."""


class _RefusedError(Exception):
    """A CONNACK that refused us."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


async def open_link(
    url: BrokerURL,
    protocol: Protocol,
    hello: Hello,
    new_link: Callable[[Codec], Link],
    *,
    nodes: Sequence[BrokerURL],
    tls: ssl.SSLContext | None,
    wait: float,
    probe_timeout: float,
) -> tuple[Link, ConnAck]:
    """One connection to ``url``, in the version(s) ``protocol`` allows, waiting at most
    ``wait`` seconds for it; ``nodes`` are the other brokers of the same cluster.

    Returns:
        The connection (made by ``new_link``) and the CONNACK that accepted it.

    Raises:
        BrokerError: naming the cause and what to do about it.
    """
    key = (url.host, url.port)
    version = PROTOCOL_OF.get(key) if protocol == "auto" else protocol
    attempt = _Attempt(url, hello, new_link, protocol, tls)
    if version is not None:
        try:
            return await attempt.run(_CODECS[version], wait, wait)
        except _SilentError as err:
            hint = _LISTENER_HINT if version == "3.1.1" or protocol == "auto" else _V5_HINT
            raise BrokerError(str(url), f"{err}{hint}") from None
        except _RefusedError as err:
            raise BrokerError(str(url), f"connection refused: {err.reason}") from None
    try:
        found = await attempt.run(codec5.CODEC, min(probe_timeout, wait), wait)
    except _SilentError as err:
        v5_answer = str(err)
    except _RefusedError as err:
        if err.code not in (1, _V5_UNSUPPORTED):
            raise BrokerError(str(url), f"connection refused: {err.reason}") from None
        v5_answer = f"refused it ({err.reason})"
    else:
        PROTOCOL_OF[key] = "5"
        return found
    _log.info("broker.v5_refused", broker=str(url), answer=v5_answer, fallback="3.1.1")
    try:
        found = await attempt.run(codec311.CODEC, wait, wait)
    except _SilentError as err:
        raise BrokerError(
            str(url),
            f"no MQTT answer: to MQTT 5 it {v5_answer}, to 3.1.1 it {err}{_LISTENER_HINT}",
        ) from None
    except _RefusedError as err:
        raise BrokerError(str(url), f"connection refused: {err.reason}") from None
    # One cluster runs one engine: the other nodes of the list speak 3.1.1 only too, so a
    # failover costs no wait for an MQTT 5 answer that will not come.
    for other in nodes:
        PROTOCOL_OF.setdefault((other.host, other.port), "3.1.1")
    PROTOCOL_OF[key] = "3.1.1"
    return found


@dataclass(frozen=True, slots=True)
class _Attempt:
    url: BrokerURL
    hello: Hello
    new_link: Callable[[Codec], Link]
    protocol: Protocol
    tls: ssl.SSLContext | None

    async def run(self, codec: Codec, connack_timeout: float, wait: float) -> tuple[Link, ConnAck]:
        """Connect within ``wait`` seconds, then wait ``connack_timeout`` for the CONNACK.

        Raises:
            _SilentError: closed or silent before the CONNACK.
            _RefusedError: a CONNACK that refused us.
            BrokerError: no connection at all (the message says why).
        """
        url, hello = self.url, self.hello
        tls = self.tls
        if url.tls and tls is None:
            try:
                tls = url.context() or ssl.create_default_context()
            except ValueError as err:
                raise BrokerError(str(url), str(err)) from err
        link = self.new_link(codec)
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(wait):
                await loop.create_connection(lambda: link, url.host, url.port, ssl=tls)
        except (OSError, TimeoutError) as err:
            link.abort()
            raise cannot_connect(url, err, connect_hint(err, tls=url.tls)) from err
        link.send_connect(
            codec.connect(
                hello.client_id,
                clean_start=hello.clean_start,
                keepalive=hello.keepalive,
                will=hello.will,
                username=url.username,
                password=url.password,
                session_expiry=hello.session_expiry,
            )
        )
        try:
            async with asyncio.timeout(connack_timeout):
                ack = await link.connack
        except TimeoutError:
            link.abort()
            raise _SilentError(f"sent no CONNACK within {connack_timeout:g}s") from None
        except NoConnAckError as err:
            link.abort()
            raise _SilentError(str(err)) from None
        except BrokerError:
            link.abort()
            raise
        if ack.code:
            link.abort()
            raise self._refusal(ack)
        link.accept(ack)
        return link, ack

    def _refusal(self, ack: ConnAck) -> _RefusedError:
        text = (codec5.CODEC if not ack.v311 else codec311.CODEC).connack_reason(ack.code)
        if ack.code in (1, _V5_UNSUPPORTED):
            hint = (
                " (the broker does not speak this MQTT version: use --protocol auto)"
                if self.protocol != "auto"
                else ""
            )
        elif ack.code in _AUTH_CODES:
            hint = (
                " (check the user name and password: in the URL, or $MATCHCAST_USERNAME and "
                "$MATCHCAST_PASSWORD)"
            )
        elif ack.code in (2, 0x85):
            hint = " (the broker does not accept this client id: try another --client-id)"
        else:
            hint = ""
        return _RefusedError(ack.code, f"{text}{hint}")
