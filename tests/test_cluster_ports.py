"""The cluster fixture's ports: a RabbitMQ node is told its ports at the start of a boot and
binds them up to two minutes later; a port another test or an outgoing connection took
meanwhile failed a CI run (``dist_port_already_used``)."""

from __future__ import annotations

import socket

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
