"""Broker clusters of our own for the cluster tests: 3 NATS nodes and 2 RabbitMQ nodes.

Each cluster is started once per test session, on free loopback ports, with directories of
its own under a temporary directory (configs, JetStream stores, RabbitMQ's data, logs and
``HOME``, where its Erlang cookie lives). :meth:`Cluster.kill` kills one node with SIGKILL, as a
crash would; :meth:`Cluster.restart` brings it back on the same ports and data.

NATS 2.9 speaks MQTT 3.1.1 on JetStream; RabbitMQ 3.10 speaks it through ``rabbitmq_mqtt``.
The gotchas measured on this machine are in /work/shared/tools/README.md: NATS MQTT needs a
``server_name`` and JetStream a ``store_dir`` per node; a RabbitMQ node needs its own node name,
ports, data directories and ``HOME``, and is started with the package's own server script (the
wrapper on PATH switches user). ``MATCHCAST_REQUIRE_CLUSTERS=1`` (CI) turns a missing binary
into a failure instead of a skip.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from matchcast.testbroker import free_port, wait_port
from matchcast.transport.connection import BrokerURL

__all__ = [
    "NATS_SERVER",
    "RABBITMQ_CTL",
    "RABBITMQ_SERVER",
    "REQUIRE_CLUSTERS_ENV",
    "Cluster",
    "NatsCluster",
    "Node",
    "RabbitCluster",
]

REQUIRE_CLUSTERS_ENV = "MATCHCAST_REQUIRE_CLUSTERS"
NATS_SERVER = shutil.which("nats-server") or "/usr/sbin/nats-server"
RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
RABBITMQ_CTL = "/usr/lib/rabbitmq/bin/rabbitmqctl"


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
        client = [free_port() for _ in range(self.size)]
        routes = [free_port() for _ in range(self.size)]
        mqtt = [free_port() for _ in range(self.size)]
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
        except (TimeoutError, RuntimeError) as err:
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

    def restart(self, index: int) -> None:
        """Start a killed node again; it rejoins the cluster and JetStream catches it up."""
        super().restart(index)
        time.sleep(0)  # ready once its MQTT port listens (JetStream serves through the others)


@dataclass
class RabbitCluster(Cluster):
    """RabbitMQ 3.10 with ``rabbitmq_mqtt``: two nodes, joined into one cluster."""

    engine: str = "rabbitmq"
    size: int = 2
    tag: str = field(default_factory=lambda: uuid.uuid4().hex[:6])

    def _node_name(self, i: int) -> str:
        return f"mc{self.tag}n{i + 1}@localhost"

    def _env(
        self, i: int, home: Path, node_port: int, dist_port: int, mqtt_port: int
    ) -> dict[str, str]:
        conf = home / "rabbitmq.conf"
        conf.write_text(
            f"listeners.tcp.default = 127.0.0.1:{node_port}\n"
            f"mqtt.listeners.tcp.default = 127.0.0.1:{mqtt_port}\n"
            "mqtt.allow_anonymous = true\n"
            "mqtt.default_user = guest\n"
            "mqtt.default_pass = guest\n"
            "loopback_users = none\n"
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
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
        }

    def start(self) -> RabbitCluster:
        """Start the nodes in parallel (about 15 s each), then join node 2..n to node 1.

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
            mqtt_port = free_port()
            env = self._env(i, home, free_port(), free_port(), mqtt_port)
            node = Node(self._node_name(i), mqtt_port, [RABBITMQ_SERVER], env, home / "log")
            self.nodes.append(node)
            node.spawn()
        try:
            with ThreadPoolExecutor(self.size) as pool:
                list(pool.map(lambda n: self._wait_ready(n, timeout=90), self.nodes))
            for i in range(1, self.size):
                for step in (
                    ["stop_app"],
                    ["reset"],
                    ["join_cluster", self._node_name(0)],
                    ["start_app"],
                ):
                    self.ctl(i, *step)
                self._wait_ready(self.nodes[i], timeout=60)
        except (TimeoutError, RuntimeError, subprocess.CalledProcessError) as err:
            logs = self.logs()
            self.stop()
            raise RuntimeError(f"the RabbitMQ cluster did not start: {err}\n{logs}") from None
        return self

    def ctl(self, index: int, *args: str) -> str:
        """``rabbitmqctl -n NODE ARGS`` for node ``index``; its output.

        Raises:
            subprocess.CalledProcessError: it failed (the output is in the exception).
        """
        node = self.nodes[index]
        done = subprocess.run(
            [RABBITMQ_CTL, "-n", node.name, *args],
            env=node.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"rabbitmqctl -n {node.name} {' '.join(args)}: {done.stdout}{done.stderr}"
            )
        return done.stdout
