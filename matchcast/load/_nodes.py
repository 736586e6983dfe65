"""Which node of a broker list each load connection goes to, and what flowed through each.

``matchcast load --broker A,B,C`` spreads its connections over the nodes round-robin, each
role (publisher, subscriber, probe, consumer) on its own count, so three publishers on three
nodes land on A, B and C: :class:`NodeAssigner` makes that choice. Where a connection really
went is the client's business (a node that does not answer sends it on to the next one), so
the figures are kept by the run from each client's ``url``, the node it is connected to:

- a :class:`NodeTally` per node: the connections made to it by role, and what the probes on it
  received (received, duplicates, reordered, latency), added to per batch of messages by the
  connection that read them, so a probe that moved to another node counts there from then on;
- the publishers' events, published and acknowledged, counted per connection by the sender
  and summed per node when the report is written (a publisher never changes node: a lost one
  fails its later publishes);
- loss, which is known only at the end, per consumer: a probe's loss goes to the node of its
  last connection (the one that should have had it), and a ``$share`` group's loss is the
  group's, on no node.

:class:`NodeFigures` turns all that into the report's ``"nodes"`` (keyed by the node's URL,
its password masked) and adds the ``"nodes"`` of several reports up in ``load merge``.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from matchcast.load._accounting import (
    LatencySeries,
    decode_histogram,
    encode_histogram,
    histogram_summary,
    new_histogram,
)

if TYPE_CHECKING:
    from hdrh.histogram import HdrHistogram

    from matchcast.transport.connection import BrokerURL

__all__ = ["NodeAssigner", "NodeFigures", "NodeTally", "merge_node_figures", "node_key"]

#: The counts of a node's entry that add up across reports (as they are, or None if unknown).
_COUNTS = ("events_published", "publish_failures", "received", "duplicates", "reordered")


def node_key(url: BrokerURL) -> str:
    """A node's name in reports: its URL as logs show it, the password masked (``***``), so a
    report says which user each node was reached as and never the password."""
    return str(url)


class NodeAssigner:
    """Round-robin over ``urls`` per role."""

    def __init__(self, urls: Sequence[BrokerURL], *, offset: int = 0) -> None:
        if not urls:
            raise ValueError("no broker to assign connections to")
        self.urls = tuple(urls)
        self._offset = offset
        self._next: collections.Counter[str] = collections.Counter()

    @property
    def listed(self) -> str:
        """The list as ``--broker`` takes it, without passwords: a worker gets the password in
        its environment ($MATCHCAST_PASSWORD), never in arguments that ``ps`` shows."""
        return ",".join(str(replace(u, password=None)) for u in self.urls)

    @property
    def keys(self) -> tuple[str, ...]:
        """Each node's name in reports (see :func:`node_key`), in list order."""
        return tuple(node_key(u) for u in self.urls)

    def assign(self, role: str) -> tuple[BrokerURL, ...]:
        """The list for the next connection of ``role``: its node first, then the others in
        list order (the ones it fails over to)."""
        i = (self._offset + self._next[role]) % len(self.urls)
        self._next[role] += 1
        return self.urls[i:] + self.urls[:i]


@dataclass(slots=True)
class NodeTally:
    """What one run's connections to one node did, as it happened.

    Attributes:
        connections: connections made to the node, by role (``pub``, ``probe``, ``verify``).
        received: messages the probes connected to it received, duplicates included.
        duplicates: of those, seqs their consumer had already received.
        reordered: of those, seqs that arrived after a higher one of their stream.
        latency: the latencies of what the probes on it received (us, per second).
        consumers: the consumers (plain probes) whose current connection is to this node.
    """

    connections: collections.Counter[str] = field(default_factory=collections.Counter)
    received: int = 0
    duplicates: int = 0
    reordered: int = 0
    latency: LatencySeries = field(default_factory=LatencySeries)
    consumers: set[str] = field(default_factory=set)


@dataclass(slots=True)
class NodeFigures:
    """One node's figures while a report is built or merged: counts that add up.

    A figure is None where it is not known: ``events_acknowledged`` at QoS 0 (nothing is
    acknowledged), ``lost`` of a ``$share`` group, and every delivery figure of a merge that
    took in a report without per-node deliveries (format 1 or 2): a part of the sum would
    pass for the whole.
    """

    connections: collections.Counter[str] = field(default_factory=collections.Counter)
    events_published: int | None = 0
    events_acknowledged: int | None = 0
    publish_failures: int | None = 0
    received: int | None = 0
    duplicates: int | None = 0
    reordered: int | None = 0
    consumers: set[str] = field(default_factory=set)
    shared: bool = False
    latency: HdrHistogram = field(default_factory=new_histogram)

    def add_entry(self, entry: Mapping[str, Any]) -> None:
        """Add a node's entry of a report: format 3, or format 2's connection counts alone."""
        if "connections" not in entry:  # format 2: {"pub": 1, "probe": 1}
            self.connections.update({k: int(v) for k, v in entry.items()})
            self.forget_deliveries()
            return
        self.connections.update({k: int(v) for k, v in entry["connections"].items()})
        for key in _COUNTS:
            mine = getattr(self, key)
            setattr(self, key, None if mine is None else mine + int(entry[key]))
        acked = entry["events_acknowledged"]
        if self.events_acknowledged is not None:
            self.events_acknowledged = None if acked is None else self.events_acknowledged + acked
        self.consumers.update(entry["consumers"])
        self.shared = self.shared or entry["lost"] is None
        self.latency.add(decode_histogram(entry["latency_hdr"]))

    def forget_deliveries(self) -> None:
        """Make every figure but the connection counts unknown (None)."""
        for key in (*_COUNTS, "events_acknowledged"):
            setattr(self, key, None)

    def to_report(self, lost_of: Mapping[str, int]) -> dict[str, Any]:
        """The node's entry in a report; ``lost_of`` is each consumer's loss."""
        received, duplicates = self.received, self.duplicates
        unique = received - duplicates if received is not None and duplicates is not None else None
        lost = (
            sum(lost_of.get(name, 0) for name in self.consumers)
            if unique is not None and not self.shared
            else None
        )
        return {
            "connections": dict(sorted(self.connections.items())),
            "events_published": self.events_published,
            "events_acknowledged": self.events_acknowledged,
            "publish_failures": self.publish_failures,
            "received": received,
            "unique": unique,
            "duplicates": duplicates,
            "reordered": self.reordered,
            "lost": lost,
            "consumers": sorted(self.consumers),
            "latency_ms": histogram_summary(self.latency),
            "latency_hdr": encode_histogram(self.latency),
        }


def run_node_figures(
    tallies: Mapping[str, NodeTally],
    publishers: Iterable[tuple[str, int, int, int]],
    *,
    listed: Sequence[str] = (),
    qos: int,
    shared: bool,
) -> dict[str, NodeFigures]:
    """One run's :class:`NodeFigures`: ``tallies`` by node, ``publishers`` as ``(node, events
    published, acknowledged, failures)`` per connection; every ``listed`` node appears, even
    one nothing reached."""
    out = {key: NodeFigures(shared=shared) for key in listed}
    for key, tally in tallies.items():
        fig = out.setdefault(key, NodeFigures(shared=shared))
        fig.connections.update(tally.connections)
        fig.received = tally.received
        fig.duplicates = tally.duplicates
        fig.reordered = tally.reordered
        fig.consumers = set(tally.consumers)
        fig.latency = tally.latency.histogram()
    for key, events, acked, failures in publishers:
        fig = out.setdefault(key, NodeFigures(shared=shared))
        fig.events_published = (fig.events_published or 0) + events
        fig.events_acknowledged = (fig.events_acknowledged or 0) + acked
        fig.publish_failures = (fig.publish_failures or 0) + failures
    if qos == 0:
        for fig in out.values():
            fig.events_acknowledged = None
    return out


def merge_node_figures(
    reports: Sequence[Mapping[str, Any]], lost_of: Mapping[str, int]
) -> dict[str, dict[str, Any]]:
    """The ``"nodes"`` of several reports added up; ``lost_of`` is each merged consumer's loss.

    A report of format 1 has none (nothing is known of its nodes); one of format 2 has the
    connection counts alone. Either makes the merged delivery figures unknown (None).
    """
    total: dict[str, NodeFigures] = {}
    for report in reports:
        for url, entry in (report.get("nodes") or {}).items():
            total.setdefault(url, NodeFigures()).add_entry(entry)
    if any(int(report.get("format", 1)) < 3 for report in reports):
        for fig in total.values():
            fig.forget_deliveries()
    return {url: fig.to_report(lost_of) for url, fig in total.items()}
