"""Broker clusters of our own for the cluster tests: 3 NATS nodes and 3 RabbitMQ nodes.

Each cluster is started once per test session, on free loopback ports, with directories of
its own under a temporary directory (configs, JetStream stores, RabbitMQ's data, logs and
``HOME``, where its Erlang cookie lives). :class:`Boot` starts one in a background thread at
the start of the session (tests/conftest.py), so its nodes boot while other tests run; the
first test that needs it joins the boot. :meth:`Cluster.kill` kills one node with SIGKILL, as
a crash would; :meth:`Cluster.restart` brings it back on the same ports and data (a RabbitMQ
node takes about 100 s more after a SIGKILL, so :meth:`Cluster.ready_for_a_kill` restarts
one only when fewer than two would be left up).

NATS 2.9 speaks MQTT 3.1.1 on JetStream; RabbitMQ 3.10 speaks it through ``rabbitmq_mqtt``.
The gotchas measured on this machine are in /work/shared/tools/README.md: NATS MQTT needs a
``server_name`` and JetStream a ``store_dir`` per node; a RabbitMQ node needs its own node name,
ports, data directories and ``HOME``, and is started with the package's own server script (the
wrapper on PATH switches user). ``MATCHCAST_REQUIRE_CLUSTERS=1`` (CI) turns a missing binary
into a failure instead of a skip.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Self, TypeVar

import aiomqtt

from matchcast.testbroker import wait_port
from matchcast.transport.connection import BrokerURL

__all__ = [
    "NATS_SERVER",
    "RABBITMQ_SERVER",
    "REQUIRE_CLUSTERS_ENV",
    "Boot",
    "Cluster",
    "NatsCluster",
    "Node",
    "RabbitCluster",
    "cluster_port",
]

REQUIRE_CLUSTERS_ENV = "MATCHCAST_REQUIRE_CLUSTERS"
NATS_SERVER = shutil.which("nats-server") or "/usr/sbin/nats-server"
RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"


#: Ports handed out by :func:`cluster_port` in this process (never twice).
_HANDED_OUT: set[int] = set()
_PORTS_LOCK = threading.Lock()


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def cluster_port() -> int:
    """A free loopback port for a cluster node, below the kernel's ephemeral range.

    ``free_port()`` (bind to port 0) hands out ephemeral ports, as the kernel does for every
    outgoing connection: a node told its port at the start but bound to it a minute later
    (RabbitMQ nodes boot one after another, 15-40 s each) found it taken by another test's
    broker or connection (a CI run: ``dist_port_already_used``). Below the ephemeral range no
    bind to port 0 and no outgoing connection takes the port meanwhile; a port is never handed
    out twice in this process, and one something else listens on is skipped.
    """
    low, _high = _ephemeral_range()
    floor = max(1024, low - 12000)
    with _PORTS_LOCK:
        for _ in range(1000):
            port = random.randrange(floor, low)
            if port in _HANDED_OUT:
                continue
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            _HANDED_OUT.add(port)
            return port
    raise RuntimeError(f"no free port in {floor}-{low - 1}")


def _connack(host: str, port: int) -> bool:
    """Whether an MQTT 3.1.1 CONNECT (clean session) gets an accepting CONNACK within 5 s."""
    client_id = f"mc-ready-{uuid.uuid4().hex[:8]}".encode()
    body = b"\x00\x04MQTT\x04\x02\x00\x3c" + len(client_id).to_bytes(2, "big") + client_id
    try:
        with socket.create_connection((host, port), timeout=5) as sock:
            sock.sendall(bytes([0x10, len(body)]) + body)
            answer = sock.recv(4)
            sock.sendall(b"\xe0\x00")  # DISCONNECT
    except OSError:
        return False
    return answer[:1] == b"\x20" and answer[3:4] == b"\x00"


@dataclass
class Node:
    """One broker process of a cluster."""

    name: str
    mqtt_port: int
    argv: list[str]
    env: dict[str, str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> BrokerURL:
        """The node's MQTT listener."""
        return BrokerURL("127.0.0.1", self.mqtt_port)

    @property
    def alive(self) -> bool:
        """True while the process runs."""
        return self.proc is not None and self.proc.poll() is None

    def spawn(self) -> None:
        """Start the process (its output goes to :attr:`log`)."""
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                self.argv,
                env=self.env,
                cwd=self.log.parent,  # what a node writes where it runs stays in its folder
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a kill of its group takes the Erlang helpers too
            )

    def kill(self) -> None:
        """SIGKILL the node (and its process group), as a crash would."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        # The Erlang VM outlives its shell by a moment: wait until the whole group is gone.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.killpg(self.proc.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it lingers."""
        if self.proc is None or self.proc.poll() is not None:
            return
        with_group = os.getpgid(self.proc.pid) == self.proc.pid
        if with_group:
            os.killpg(self.proc.pid, signal.SIGTERM)
        else:
            self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.kill()


@dataclass
class Cluster:
    """Nodes of one engine; subclasses know how to start them."""

    engine: str
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="mc-cluster-")))
    nodes: list[Node] = field(default_factory=list)

    @property
    def urls(self) -> tuple[BrokerURL, ...]:
        """Every node's MQTT URL, in node order."""
        return tuple(n.url for n in self.nodes)

    @property
    def broker_list(self) -> str:
        """The ``--broker`` list naming every node."""
        return ",".join(str(u) for u in self.urls)

    def live(self) -> list[int]:
        """The indices of the nodes that run."""
        return [i for i, n in enumerate(self.nodes) if n.alive]

    def start(self) -> Self:
        """Start every node and wait until the cluster serves MQTT (in the subclasses)."""
        raise NotImplementedError

    def kill(self, index: int) -> None:
        """SIGKILL node ``index``; it stays down until :meth:`restart`."""
        self.nodes[index].kill()

    def restart(self, index: int) -> None:
        """Start a killed node again on its ports and data, and wait until it serves MQTT."""
        node = self.nodes[index]
        if node.alive:
            return
        node.spawn()
        self._wait_ready(node, timeout=150)  # a RabbitMQ node takes 15-60 s on a busy machine

    def heal(self) -> None:
        """Restart every node that is down."""
        for i, node in enumerate(self.nodes):
            if not node.alive:
                self.restart(i)

    def ready_for_a_kill(self) -> list[int]:
        """Bring up what a test that kills one node needs; the indices of the nodes up.

        Every node, by default (:class:`RabbitCluster` makes do with two).
        """
        self.heal()
        return self.live()

    def wait_routed(self, timeout: float = 60) -> None:
        """Until a message published on the first node reaches a subscriber on every other
        node: the nodes form one cluster (not several clusters of one node each).

        Raises:
            TimeoutError: some node got nothing within ``timeout`` seconds.
        """
        asyncio.run(self._routed(time.monotonic() + timeout))

    async def _routed(self, deadline: float) -> None:
        topic = f"mc-routed/{uuid.uuid4().hex[:8]}"
        v311 = aiomqtt.ProtocolVersion.V311
        async with contextlib.AsyncExitStack() as stack:
            subs = []
            for url in self.urls[1:]:
                sub = aiomqtt.Client(url.host, url.port, protocol=v311)
                subs.append(await stack.enter_async_context(sub))
                await sub.subscribe(topic, qos=1)
            first = self.urls[0]
            pub = await stack.enter_async_context(
                aiomqtt.Client(first.host, first.port, protocol=v311)
            )
            for url, sub in zip(self.urls[1:], subs, strict=True):
                while True:
                    await pub.publish(topic, b"ping", qos=1)
                    try:
                        async with asyncio.timeout(1):
                            await anext(aiter(sub.messages))
                        break
                    except TimeoutError:
                        if time.monotonic() > deadline:
                            raise TimeoutError(f"{url} gets nothing published on {first}") from None

    def stop(self) -> None:
        """Stop every node and remove the cluster's directory."""
        for node in self.nodes:
            node.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def _wait_ready(self, node: Node, timeout: float) -> None:
        """Until the node answers an MQTT 3.1.1 CONNECT with a CONNACK (NATS listens before
        its MQTT streams exist, and stalls CONNECTs until they do)."""
        deadline = time.monotonic() + timeout
        wait_port("127.0.0.1", node.mqtt_port, timeout=timeout)
        while not _connack("127.0.0.1", node.mqtt_port):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{node.name} gave no CONNACK within {timeout:g}s")
            time.sleep(0.2)

    def logs(self) -> str:
        """The tail of every node's log, for a failing test's report."""
        return "\n".join(
            f"--- {n.name}\n{n.log.read_text(errors='replace')[-3000:]}"
            for n in self.nodes
            if n.log.exists()
        )


@dataclass
class NatsCluster(Cluster):
    """NATS 2.9: three nodes routed to each other, JetStream and MQTT on each."""

    engine: str = "nats"
    size: int = 3

    def start(self) -> NatsCluster:
        """Write the configs, start every node, and wait for MQTT and a JetStream leader.

        Raises:
            RuntimeError: a node did not start; the message has its log.
        """
        client = [cluster_port() for _ in range(self.size)]
        routes = [cluster_port() for _ in range(self.size)]
        mqtt = [cluster_port() for _ in range(self.size)]
        route_list = ", ".join(f"nats-route://127.0.0.1:{p}" for p in routes)
        for i in range(self.size):
            name = f"n{i + 1}"
            home = self.root / name
            home.mkdir(parents=True)
            conf = home / "nats.conf"
            conf.write_text(
                f"server_name: {name}\n"
                f"listen: 127.0.0.1:{client[i]}\n"
                f'jetstream {{ store_dir: "{home / "js"}" }}\n'
                f"cluster {{ name: mc, listen: 127.0.0.1:{routes[i]}, routes: [{route_list}] }}\n"
                # Every MQTT stream and session consumer on all three nodes: one may die.
                f"mqtt {{ listen: 127.0.0.1:{mqtt[i]}, stream_replicas: 3, consumer_replicas: 3 }}\n"
            )
            node = Node(
                name, mqtt[i], [NATS_SERVER, "-c", str(conf)], dict(os.environ), home / "log"
            )
            self.nodes.append(node)
            node.spawn()
        try:
            for node in self.nodes:
                self._wait_ready(node, timeout=30)
            self._wait_leader(timeout=30)
            self.wait_routed()
            self._wait_settled(timeout=60)
        except (TimeoutError, RuntimeError, OSError) as err:
            logs = self.logs()
            self.stop()
            raise RuntimeError(f"the NATS cluster did not start: {err}\n{logs}") from None
        return self

    def _wait_leader(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any("new metadata leader" in n.log.read_text(errors="replace") for n in self.nodes):
                return
            time.sleep(0.1)
        raise TimeoutError("no JetStream metadata leader")

    def _wait_settled(self, timeout: float, rounds: int = 3) -> None:
        """Until ``rounds`` passes in a row over every node each CONNACK a new client id within
        1 s. In its first seconds a cluster can take a CONNECT and not answer it for more than
        15 s (seen here: 3 new client ids of 36 on one node, a CI run's first cluster test
        failed on one); a test that connects once to one node would fail on that alone.

        Raises:
            TimeoutError: the nodes still stalled connections after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        quick = 0
        while quick < rounds:
            if time.monotonic() > deadline:
                raise TimeoutError(f"CONNECTs still stall after {timeout:g}s")
            answered = True
            for node in self.nodes:
                started = time.monotonic()
                answered &= _connack("127.0.0.1", node.mqtt_port)
                answered &= time.monotonic() - started < 1
            quick = quick + 1 if answered else 0

    def restart(self, index: int) -> None:
        """Start a killed node again; it rejoins the cluster and JetStream catches it up."""
        super().restart(index)
        self._wait_settled(timeout=60)


@dataclass
class RabbitCluster(Cluster):
    """RabbitMQ 3.10 with ``rabbitmq_mqtt``: three nodes, which form one cluster as they boot.

    Three, so that a test may kill one node and the next test another with no restart in
    between (a restart after a SIGKILL costs about 100 s): the MQTT listener of the last node
    up still takes connections, as the survivor of two did (its client-id registry has lost
    its quorum, and closes the connections it had once: they reconnect at once).
    """

    engine: str = "rabbitmq"
    size: int = 3
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:6])

    def _node_name(self, i: int) -> str:
        return f"mc{self.tag}n{i + 1}@localhost"

    def _env(
        self, i: int, home: Path, node_port: int, dist_port: int, mqtt_port: int
    ) -> dict[str, str]:
        conf = home / "rabbitmq.conf"
        # Nodes 2..n find node 1 by peer discovery as they boot (no stop_app, reset,
        # join_cluster, start_app afterwards): they ask for it every second until it answers.
        discovery = (
            "cluster_formation.peer_discovery_backend = classic_config\n"
            f"cluster_formation.classic_config.nodes.1 = {self._node_name(0)}\n"
            "cluster_formation.discovery_retry_limit = 180\n"
            "cluster_formation.discovery_retry_interval = 1000\n"
            if i > 0
            else ""
        )
        conf.write_text(
            f"listeners.tcp.default = 127.0.0.1:{node_port}\n"
            f"mqtt.listeners.tcp.default = 127.0.0.1:{mqtt_port}\n"
            "mqtt.allow_anonymous = true\n"
            "mqtt.default_user = guest\n"
            "mqtt.default_pass = guest\n"
            "loopback_users = none\n" + discovery
        )
        (home / "enabled_plugins").write_text("[rabbitmq_mqtt].\n")
        (home / "env.conf").write_text("")
        return {
            **{k: v for k, v in os.environ.items() if not k.startswith("RABBITMQ_")},
            "HOME": str(home),
            "RABBITMQ_NODENAME": self._node_name(i),
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(node_port),
            "RABBITMQ_DIST_PORT": str(dist_port),
            "RABBITMQ_MNESIA_BASE": str(home / "mnesia"),
            "RABBITMQ_LOG_BASE": str(home / "logs"),
            "RABBITMQ_CONFIG_FILE": str(conf.with_suffix("")),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(home / "enabled_plugins"),
            "RABBITMQ_CONF_ENV_FILE": str(home / "env.conf"),
            "RABBITMQ_PID_FILE": str(home / "rabbit.pid"),
            "RABBITMQ_LOGS": "-",
            "ERL_CRASH_DUMP": str(home / "erl_crash.dump"),  # not the checkout
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
        }

    def start(self) -> RabbitCluster:
        """Start the nodes one after another (15-40 s each here), each once the one before
        serves MQTT; nodes 2..n join node 1 as they boot. Started at once, a node could ask to
        join the MQTT client-id registry (a Ra cluster) while its leader was still being
        elected: refused (``cluster_change_not_permitted`` in node 1's log), never asked
        again, and the node then refused every connection (``client ID registration timed
        out``), seen once in a benchmark's boot.

        Raises:
            RuntimeError: a node did not start or join; the message has the logs.
        """
        cookie = uuid.uuid4().hex
        for i in range(self.size):
            home = self.root / f"n{i + 1}"
            home.mkdir(parents=True)
            cookie_file = home / ".erlang.cookie"
            cookie_file.write_text(cookie)
            cookie_file.chmod(0o400)
            mqtt_port = cluster_port()
            env = self._env(i, home, cluster_port(), cluster_port(), mqtt_port)
            node = Node(self._node_name(i), mqtt_port, [RABBITMQ_SERVER], env, home / "log")
            self.nodes.append(node)
        try:
            for node in self.nodes:
                node.spawn()
                self._wait_ready(node, timeout=180)
            self.wait_routed()
        except (TimeoutError, RuntimeError, OSError) as err:
            logs = self.logs()
            self.stop()
            raise RuntimeError(f"the RabbitMQ cluster did not start: {err}\n{logs}") from None
        return self

    def ready_for_a_kill(self) -> list[int]:
        """Two nodes up at least, so one may die: a node is restarted only when fewer are."""
        for i, node in enumerate(self.nodes):
            if len(self.live()) >= 2:
                break
            if not node.alive:
                self.restart(i)
        return self.live()


C = TypeVar("C", bound=Cluster)


class Boot(Generic[C]):
    """A cluster's :meth:`start`, run in a thread of its own from the moment it is made."""

    def __init__(self, cluster: C) -> None:
        self.cluster = cluster
        self._started: C | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"boot-{cluster.engine}", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        try:
            self._started = self.cluster.start()
        except BaseException as err:  # handed to whoever joins
            self._error = err

    def join(self) -> C:
        """The cluster, once every node serves MQTT.

        Raises:
            RuntimeError: it did not start (the same error for every test that asks).
        """
        self._thread.join()
        if self._error is not None:
            raise RuntimeError(str(self._error)) from None
        assert self._started is not None
        return self._started

    def stop(self) -> None:
        """Wait for the boot to end, then stop every node."""
        self._thread.join()
        self.cluster.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m tests._clusters nats|rabbitmq``: a cluster of the tests' own, to try
    matchcast on by hand (docs/cluster.md). Prints the broker list and how to kill each node,
    and runs until Ctrl-C (or SIGTERM), which stops every node and removes the cluster's
    directory, during the boot too."""
    parser = argparse.ArgumentParser(
        prog="python -m tests._clusters",
        description="A 3-node cluster of the tests' own on loopback ports, until Ctrl-C.",
    )
    parser.add_argument("engine", choices=["nats", "rabbitmq"])
    args = parser.parse_args(argv)

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)
    cluster: Cluster = NatsCluster() if args.engine == "nats" else RabbitCluster()
    print(f"starting a 3-node {args.engine} cluster in {cluster.root} ...", flush=True)
    try:
        try:
            cluster.start()
        except RuntimeError as err:
            print(f"error: {err}", flush=True)
            return 1
        print(f"export MATCHCAST_BROKER={cluster.broker_list}")
        for node in cluster.nodes:
            assert node.proc is not None
            print(f"  {node.name}: {node.url}  (to kill it: kill -9 -- -{node.proc.pid})")
        print("Ctrl-C stops the cluster and removes its directory.", flush=True)
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("stopping the cluster ...", flush=True)
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
