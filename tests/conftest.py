"""Shared fixtures: brokers of our own (mosquitto, the embedded one, the NATS and RabbitMQ
clusters), unique topics, and the system Chromium for the browser tests.

The clusters boot in the background from the end of collection, when a collected test needs
one (a RabbitMQ node takes 15-40 s), so their nodes boot while other tests run; the first test
that needs a cluster waits for the rest of its boot. Under pytest-xdist (the README's
``-n auto --dist loadgroup``) every test that needs a cluster is in one group, so one worker
runs them all and boots the clusters when its first such test asks.
"""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from events import Topics
from matchcast.logs import configure_logging
from matchcast.testbroker import REQUIRE_ENV, Mosquitto, clean_leftovers, mosquitto_binary
from matchcast.transport.broker import embedded_broker
from matchcast.transport.connection import BrokerURL
from tests._browser import CHROMIUM, CHROMIUM_ARGS, REQUIRE_BROWSER_ENV, missing
from tests._clusters import (
    NATS_SERVER,
    RABBITMQ_SERVER,
    REQUIRE_CLUSTERS_ENV,
    Boot,
    Cluster,
    NatsCluster,
    RabbitCluster,
)

configure_logging("console", "DEBUG")  # capture_logs() needs every level to get through


@pytest.fixture(autouse=True)
def _logging_as_configured_here() -> Iterator[None]:
    """Put the logging back after a test whose command configured it (to another level or
    a stream that is gone): a later test's capture_logs() would miss what it filters out."""
    yield
    configure_logging("console", "DEBUG")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Two workers per core for ``-n auto``: the tests spend most of their time waiting on
    brokers, subprocesses and timers (a run on 2 workers kept the 2 cores about a quarter
    busy), so more workers finish sooner. ``-n N`` still says exactly how many."""
    return 2 * (os.cpu_count() or 1)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep each cluster's tests on one worker (``--dist loadgroup``); skip mosquitto tests
    where it is missing, unless CI says they are mandatory."""
    for item in items:
        engines = _engines_needed([item])
        if engines:  # one worker per engine's cluster: the two boot and run side by side
            item.add_marker(pytest.mark.xdist_group("cluster-" + "-".join(sorted(engines))))
        if {"mosquitto", "mosquitto_url"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.mosquitto)  # what it uses, marked or not
    if mosquitto_binary() is not None:
        return
    if os.environ.get(REQUIRE_ENV) == "1":
        return  # the fixture fails loudly instead
    skip = pytest.mark.skip(reason="mosquitto is not installed (apt-get install mosquitto)")
    for item in items:
        if "mosquitto" in item.keywords:
            item.add_marker(skip)


#: Each engine's cluster fixture, its binary, and how to make one.
_CLUSTERS: dict[str, tuple[str, str, type[Cluster]]] = {
    "nats": ("nats_cluster", NATS_SERVER, NatsCluster),
    "rabbitmq": ("rabbit_cluster", RABBITMQ_SERVER, RabbitCluster),
}
_boots: dict[str, Boot[Cluster]] = {}


def _engines_needed(items: list[pytest.Item]) -> set[str]:
    """The engines whose cluster some collected test uses (directly, or by the ``cluster``
    fixture's parameter)."""
    needed: set[str] = set()
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        callspec = getattr(item, "callspec", None)
        param = callspec.params.get("cluster") if callspec is not None else None
        for engine, (fixture, _, _) in _CLUSTERS.items():
            if fixture in names or param == engine:
                needed.add(engine)
    return needed


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM and SIGHUP end the run as Ctrl-C does: the fixtures' teardown stops the brokers
    and clusters and removes their folders (the default action would leave them behind)."""
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGHUP, _interrupt)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start booting the clusters that the collected tests use, each in a thread of its own."""
    if session.config.option.collectonly:
        return
    if hasattr(session.config, "workerinput"):
        _check_grouped(session)
        return  # an xdist worker: every worker collects every test; boot where one is used
    for engine in sorted(_engines_needed(session.items)):
        _, binary, kind = _CLUSTERS[engine]
        if os.path.exists(binary):
            _boots[engine] = Boot(kind())


def _check_grouped(session: pytest.Session) -> None:
    """Refuse to run when ``--dist loadgroup`` does not group (pytest-xdist names a grouped
    test ``id@group``): each worker would boot a cluster of its own, as every run did while
    this hook ran after xdist's and again on pytest 9.2."""
    if not session.config.getoption("loadgroup", False):
        return
    for item in session.items:
        mark = item.get_closest_marker("xdist_group")
        if mark is not None and not item.nodeid.endswith("@" + str(mark.args[0])):
            raise pytest.UsageError(
                f"--dist loadgroup does not group {item.nodeid}: this pytest and pytest-xdist "
                "do not work together (pyproject.toml pins pytest below 9.2)"
            )


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop every cluster booted, used or not."""
    while _boots:
        _, boot = _boots.popitem()
        boot.stop()


def _joined(engine: str) -> Cluster:
    """The engine's cluster, once booted; a skip (or a failure in CI) without its binary."""
    _, binary, kind = _CLUSTERS[engine]
    if not os.path.exists(binary):
        if os.environ.get(REQUIRE_CLUSTERS_ENV) == "1":
            pytest.fail(f"{binary} is required ({REQUIRE_CLUSTERS_ENV}=1) but not installed")
        pytest.skip(f"{binary} is not installed (apt-get install nats-server rabbitmq-server)")
    if engine not in _boots:  # asked for by a test the collection did not see coming
        _boots[engine] = Boot(kind())
    return _boots[engine].join()


@pytest.fixture(scope="session")
def nats_cluster() -> NatsCluster:
    """Three NATS nodes (JetStream, MQTT), booted once for the session."""
    cluster = _joined("nats")
    assert isinstance(cluster, NatsCluster)
    return cluster


@pytest.fixture(scope="session")
def rabbit_cluster() -> RabbitCluster:
    """Three RabbitMQ nodes (rabbitmq_mqtt) forming one cluster, booted once."""
    cluster = _joined("rabbitmq")
    assert isinstance(cluster, RabbitCluster)
    return cluster


@pytest.fixture(scope="session")
def mosquitto() -> Iterator[Mosquitto]:
    """One mosquitto process for the session, on a free port."""
    binary = mosquitto_binary()
    if binary is None:
        pytest.fail(f"mosquitto is required ({REQUIRE_ENV}=1) but not installed")
    clean_leftovers()  # of an earlier run that was killed
    broker = Mosquitto(binary).start()
    yield broker
    broker.close()


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


@pytest.fixture(scope="module")
def _browser_available() -> None:
    """Go on where the system Chromium and Playwright are; skip where they are missing, or
    fail when ``MATCHCAST_REQUIRE_BROWSER=1`` (CI) says they must be there."""
    reason = missing()
    if reason is None:
        return
    if os.environ.get(REQUIRE_BROWSER_ENV) == "1":
        pytest.fail(f"{reason}; required by {REQUIRE_BROWSER_ENV}=1")
    pytest.skip(reason)


@pytest.fixture
async def browser(_browser_available: None) -> AsyncIterator[Any]:
    """The system Chromium, headless, driven by Playwright (never a downloaded browser)."""
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        b = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        await b.close()
