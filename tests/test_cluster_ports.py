"""The cluster fixture's ports: a RabbitMQ node is told its ports at the start of a boot and
binds them up to two minutes later; a port another test or an outgoing connection took
meanwhile failed a CI run (``dist_port_already_used``)."""

from __future__ import annotations

import socket
from pathlib import Path

from tests._clusters import _ephemeral_range, cluster_port


def test_cluster_ports_lie_below_the_ephemeral_range_and_are_never_handed_out_twice() -> None:
    low, _high = _ephemeral_range()
    ports = [cluster_port() for _ in range(50)]
    assert all(1024 <= p < low for p in ports), ports
    assert len(set(ports)) == len(ports)
    # What the kernel hands out for port 0 (other tests' brokers, outgoing connections)
    # never falls among them.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        assert s.getsockname()[1] >= low


def test_a_node_writes_where_it_runs_inside_its_own_folder_never_the_checkout(
    tmp_path: Path,
) -> None:
    """A RabbitMQ node that crashed wrote ``erl_crash.dump`` into the directory pytest ran
    from, the checkout, where it was once committed by accident."""
    from tests._clusters import Node

    home = tmp_path / "n1"
    home.mkdir()
    node = Node("n1", 0, ["sh", "-c", "echo crash > erl_crash.dump"], {}, home / "log")
    node.spawn()
    assert node.proc is not None
    node.proc.wait(10)
    assert (home / "erl_crash.dump").read_text() == "crash\n"
    assert not (Path.cwd() / "erl_crash.dump").exists()
