"""The documented import path of the aiomqtt client: ``from matchcast.mqtt import MqttClient``.

The code is :mod:`matchcast.transport.mqtt` and :mod:`matchcast.transport.connection`; this
module only re-exports their public names, so that the examples in docs/security.md and
docs/subscribers.md keep working.
"""

from matchcast.transport.connection import (
    ENV_BROKER,
    ENV_CA_FILE,
    ENV_CERT_FILE,
    ENV_KEY_FILE,
    ENV_KEY_PASSWORD,
    ENV_PASSWORD,
    ENV_USERNAME,
    BrokerURL,
    TLSOptions,
    WillSpec,
    broker_url_from,
    describe,
)
from matchcast.transport.mqtt import V5_CONNACK_TIMEOUT, MqttClient

__all__ = [
    "ENV_BROKER",
    "ENV_CA_FILE",
    "ENV_CERT_FILE",
    "ENV_KEY_FILE",
    "ENV_KEY_PASSWORD",
    "ENV_PASSWORD",
    "ENV_USERNAME",
    "V5_CONNACK_TIMEOUT",
    "BrokerURL",
    "MqttClient",
    "TLSOptions",
    "WillSpec",
    "broker_url_from",
    "describe",
]
