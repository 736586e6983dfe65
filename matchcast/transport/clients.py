"""Which MQTT client a connection uses: ``--client aiomqtt`` or ``--client fast``.

Both implement the same :mod:`events` protocols (publisher, message source, reconnectable), so
everything above this module picks one by :class:`ClientKind` and never looks further.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from matchcast.transport.connection import BrokerURL
from matchcast.transport.mqtt import MqttClient

if TYPE_CHECKING:
    from matchcast.transport.fastmqtt import FastClient

__all__ = ["ClientKind", "mqtt_client"]


class ClientKind(StrEnum):
    """Which MQTT client a command uses (``--client``)."""

    aiomqtt = "aiomqtt"
    fast = "fast"


def mqtt_client(
    kind: ClientKind | str, url: BrokerURL | Sequence[BrokerURL], **options: Any
) -> MqttClient | FastClient:
    """A client of ``kind`` (``--client``) for ``url``; both take the same ``options``
    (``client_id``, ``protocol``, ``will``, ``clean_start``, ``session_expiry``, ``keepalive``,
    ``connect_timeout``, ``max_outage``, ``backoff_initial``, ``backoff_max``, ...)."""
    if ClientKind(kind) is ClientKind.fast:
        from matchcast.transport.fastmqtt import FastClient  # noqa: PLC0415

        return FastClient(url, **options)
    return MqttClient(url, **options)
