"""Which node of a broker list each load connection goes to, and the figures per node.

``matchcast load --broker A,B,C`` spreads its connections over the nodes round-robin, each
role (publisher, subscriber, probe, consumer) on its own count, so three publishers on three
nodes land on A, B and C. :class:`NodeAssigner` makes that choice and counts it; its
:meth:`~NodeAssigner.figures` go into the report under ``"nodes"`` (keyed by the node's URL),
a plain dict of counts that :func:`~matchcast.load.merge_reports` adds up across shards.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matchcast.transport.connection import BrokerURL

__all__ = ["NodeAssigner", "merge_node_figures"]


class NodeAssigner:
    """Round-robin over ``urls`` per role; counts the connections each node was given."""

    def __init__(self, urls: Sequence[BrokerURL], *, offset: int = 0) -> None:
        if not urls:
            raise ValueError("no broker to assign connections to")
        self.urls = tuple(urls)
        self._offset = offset
        self._next: collections.Counter[str] = collections.Counter()
        self._given: dict[str, collections.Counter[str]] = {
            str(u): collections.Counter() for u in self.urls
        }

    @property
    def listed(self) -> str:
        """The list as ``--broker`` takes it, without passwords: a worker gets the password in
        its environment ($MATCHCAST_PASSWORD), never in arguments that ``ps`` shows."""
        return ",".join(str(replace(u, password=None)) for u in self.urls)

    def assign(self, role: str) -> tuple[BrokerURL, ...]:
        """The list for the next connection of ``role``: its node first, then the others in
        list order (the ones it fails over to)."""
        i = (self._offset + self._next[role]) % len(self.urls)
        self._next[role] += 1
        self._given[str(self.urls[i])][role] += 1
        return self.urls[i:] + self.urls[:i]

    def figures(self) -> dict[str, dict[str, int]]:
        """Connections per node and role: ``{"mqtt://h:1": {"publisher": 2, ...}, ...}``."""
        return {url: dict(sorted(roles.items())) for url, roles in self._given.items()}


def merge_node_figures(reports: Sequence[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """The ``"nodes"`` figures of several reports added up (reports without them count 0)."""
    total: dict[str, collections.Counter[str]] = {}
    for report in reports:
        for url, roles in (report.get("nodes") or {}).items():
            total.setdefault(url, collections.Counter()).update(roles)
    return {url: dict(sorted(roles.items())) for url, roles in total.items()}
