"""Shared fixtures: brokers of our own (mosquitto and the embedded one) and unique topics."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from events import Topics
from matchcast.logs import configure_logging
from matchcast.testbroker import REQUIRE_ENV, Mosquitto, mosquitto_binary
from matchcast.transport.broker import embedded_broker
from matchcast.transport.connection import BrokerURL

configure_logging("console", "DEBUG")  # capture_logs() needs every level to get through


@pytest.fixture(autouse=True)
def _logging_as_configured_here() -> Iterator[None]:
    """Put the logging back after a test whose command configured it (to another level or
    a stream that is gone): a later test's capture_logs() would miss what it filters out."""
    yield
    configure_logging("console", "DEBUG")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip mosquitto tests where it is missing, unless CI says they are mandatory."""
    if mosquitto_binary() is not None:
        return
    if os.environ.get(REQUIRE_ENV) == "1":
        return  # the fixture fails loudly instead
    skip = pytest.mark.skip(reason="mosquitto is not installed (apt-get install mosquitto)")
    for item in items:
        if "mosquitto" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def mosquitto() -> Iterator[Mosquitto]:
    """One mosquitto process for the session, on a free port."""
    binary = mosquitto_binary()
    if binary is None:
        pytest.fail(f"mosquitto is required ({REQUIRE_ENV}=1) but not installed")
    broker = Mosquitto(binary).start()
    yield broker
    broker.stop()


@pytest.fixture
def mosquitto_url(mosquitto: Mosquitto) -> BrokerURL:
    return BrokerURL.parse(mosquitto.url)


@pytest.fixture
async def amqtt_url() -> AsyncIterator[BrokerURL]:
    """The embedded broker, started for one test."""
    async with embedded_broker() as broker:
        yield BrokerURL(broker.host, broker.port)


@pytest.fixture(params=["amqtt", pytest.param("mosquitto", marks=pytest.mark.mosquitto)])
async def broker_url(request: pytest.FixtureRequest) -> AsyncIterator[BrokerURL]:
    """Each broker in turn: the embedded amqtt, then mosquitto."""
    if request.param == "mosquitto":
        yield BrokerURL.parse(request.getfixturevalue("mosquitto").url)
    else:
        async with embedded_broker() as broker:
            yield BrokerURL(broker.host, broker.port)


@pytest.fixture
def topics() -> Topics:
    """A topic root no other test uses, so tests never see each other's messages."""
    return Topics(f"mctest-{uuid.uuid4().hex[:10]}")


@pytest.fixture(params=["aiomqtt", "fast"])
def client_kind(request: pytest.FixtureRequest) -> str:
    """Each MQTT client in turn (``--client``): the contract tests hold for both.

    Make the client with :func:`matchcast.app.mqtt_client` (``client_kind, url, **options``).
    """
    kind: str = request.param
    return kind
