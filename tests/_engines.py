"""One node each of the 3.1.1-only engines (NATS with MQTT, RabbitMQ with ``rabbitmq_mqtt``),
started by the test suite on free loopback ports, with data directories of their own.

Single nodes, for the fast client's protocol tests; the clusters of the cluster issue live in
``tests/_clusters.py`` (the layout follows /work/shared/tools/README.md, measured there).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from matchcast.testbroker import wait_port
from matchcast.transport.broker import free_port

__all__ = ["NATS_SERVER", "RABBITMQ_SERVER", "nats_node", "rabbitmq_node"]

NATS_SERVER = shutil.which("nats-server") or "/usr/sbin/nats-server"
RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"


@contextmanager
def _process(
    args: list[str], port: int, log: Path, timeout: float, env: dict[str, str] | None = None
) -> Iterator[None]:
    with log.open("wb") as out:
        proc = subprocess.Popen(
            args,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            cwd=log.parent,  # what a broker writes where it runs stays in its folder
        )
    try:
        try:
            wait_port("127.0.0.1", port, timeout=timeout)
        except TimeoutError:
            raise TimeoutError(f"{args[0]} did not listen: {log.read_text()[-2000:]}") from None
        yield
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextmanager
def nats_node() -> Iterator[str]:
    """A NATS server with JetStream and MQTT; yields its MQTT URL."""
    work = Path(tempfile.mkdtemp(prefix="mc-nats-"))
    mqtt = free_port()
    conf = work / "nats.conf"
    conf.write_text(
        f'server_name: "mc-{mqtt}"\n'
        f"listen: 127.0.0.1:{free_port()}\n"
        f'jetstream {{ store_dir: "{work}/js" }}\n'
        f"mqtt {{ listen: 127.0.0.1:{mqtt} }}\n"
    )
    try:
        with _process([NATS_SERVER, "-c", str(conf)], mqtt, work / "nats.log", 20):
            yield f"mqtt://127.0.0.1:{mqtt}"
    finally:
        shutil.rmtree(work, ignore_errors=True)


@contextmanager
def rabbitmq_node() -> Iterator[str]:
    """A RabbitMQ node with ``rabbitmq_mqtt`` (about 15 s to boot); yields its MQTT URL."""
    work = Path(tempfile.mkdtemp(prefix="mc-rabbit-"))
    mqtt, amqp, dist = free_port(), free_port(), free_port()
    name = f"mc{mqtt}@localhost"
    (work / "home").mkdir()
    (work / "rabbitmq.conf").write_text(
        f"listeners.tcp.default = 127.0.0.1:{amqp}\n"
        f"mqtt.listeners.tcp.default = 127.0.0.1:{mqtt}\n"
        "mqtt.allow_anonymous = true\n"
        "mqtt.default_user = guest\n"
        "mqtt.default_pass = guest\n"
    )
    (work / "enabled_plugins").write_text("[rabbitmq_mqtt].\n")
    env = {
        **os.environ,
        "HOME": str(work / "home"),
        "RABBITMQ_NODENAME": name,
        "RABBITMQ_NODE_PORT": str(amqp),
        "RABBITMQ_DIST_PORT": str(dist),
        "RABBITMQ_MNESIA_BASE": str(work / "mnesia"),
        "RABBITMQ_LOG_BASE": str(work / "log"),
        "RABBITMQ_CONFIG_FILE": str(work / "rabbitmq"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(work / "enabled_plugins"),
        "ERL_CRASH_DUMP": str(work / "erl_crash.dump"),  # not the checkout
    }
    try:
        with _process([RABBITMQ_SERVER], mqtt, work / "server.log", 90, env=env):
            yield f"mqtt://127.0.0.1:{mqtt}"
    finally:
        shutil.rmtree(work, ignore_errors=True)
