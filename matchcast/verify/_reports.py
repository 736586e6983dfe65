"""What the consumer under test says: every report it publishes, kept in arrival order.

A consumer publishes what it believes about a match, retained, after every change, on
``{root}/consumers/{consumer_id}/state/{match_id}``: a JSON object with at least ``score``
and ``status`` (a whole match state is welcome: every field of it is compared). Each report
crosses one boundary here: bounded in size, parsed by pydantic-core (which refuses deep
nesting instead of recursing), and checked for those two fields; one that fails is kept with
the reason, and the others are still read.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pydantic_core
import structlog

from events import MAX_PAYLOAD_BYTES, Message, MessageSource, Topics

__all__ = ["MAX_REPORTS", "Report", "Reports", "read_report"]

#: Reports kept per match (a honest consumer sends one per change: a few hundred). Past it, each
#: new report replaces the last one kept, so the latest is always there to be judged.
MAX_REPORTS = 10_000

_log = structlog.get_logger("matchcast.verify")


@dataclass(frozen=True, slots=True)
class Report:
    """One report as it arrived.

    Attributes:
        at: when it arrived (monotonic seconds).
        fed: how many messages the scenarios had published when it arrived (what the consumer
            could have seen).
        fields: the report's JSON object; None when it could not be read.
        problem: why it could not be read.
    """

    at: float
    fed: int
    fields: dict[str, Any] | None
    problem: str | None = None


def read_report(payload: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """``(fields, None)`` for a report that can be read, ``(None, why not)`` otherwise."""
    if len(payload) > MAX_PAYLOAD_BYTES:
        return None, f"{len(payload)} bytes: more than the {MAX_PAYLOAD_BYTES} a report may have"
    try:
        data = pydantic_core.from_json(payload)
    except ValueError as err:
        return None, f"not JSON: {err}"
    if not isinstance(data, dict):
        return None, f"a JSON {type(data).__name__}, not an object with score and status"
    missing = [k for k in ("score", "status") if k not in data]
    if missing:
        return None, f"no {' and no '.join(missing)}: a report needs score and status"
    if not isinstance(data["score"], dict):
        return None, "score is not an object of goals per team code"
    if not isinstance(data["status"], str):
        return None, "status is not a string"
    return data, None


class Reports:
    """Every report of consumer ``consumer_id`` on the matches ``match_ids``, as they arrive.

    :meth:`follow` reads them from a source; :attr:`changed` is set on each one.
    """

    def __init__(
        self,
        topics: Topics,
        consumer_id: str,
        fed: Callable[[], int],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.topics = topics
        self.consumer_id = consumer_id
        self.fed = fed
        self.clock = clock
        self.by_match: dict[str, list[Report]] = {}
        self.changed = asyncio.Event()
        self.watched: set[str] = set()
        self.capped: set[str] = set()  # matches past MAX_REPORTS

    def of(self, match_id: str) -> list[Report]:
        """The reports on ``match_id``, oldest first."""
        return self.by_match.get(match_id, [])

    @property
    def any(self) -> bool:
        """True once the consumer reported on any match watched."""
        return any(self.by_match.values())

    def take(self, message: Message) -> None:
        """Keep ``message`` if it is a report of the consumer on a match watched.

        A match is watched from the start of its scenario: a report before it (a retained
        one of a run before this one) is not an answer to it; nor is an empty payload (a
        report cleared). The retain flag says nothing here: a client may ask the broker to
        keep it on live messages (MQTT 5's retain-as-published).
        """
        matched = self.topics.match(message.topic)
        if matched is None or matched[0] != "consumer_state":
            return
        ids = matched[1]
        if ids["consumer"] != self.consumer_id or ids["match_id"] not in self.watched:
            return
        if not message.payload:
            return
        fields, problem = read_report(message.payload)
        if problem is not None:
            _log.warning("report.rejected", topic=message.topic, reason=problem)
        report = Report(self.clock(), self.fed(), fields, problem)
        kept = self.by_match.setdefault(ids["match_id"], [])
        if len(kept) < MAX_REPORTS:
            kept.append(report)
        else:
            if ids["match_id"] not in self.capped:
                self.capped.add(ids["match_id"])
                _log.warning("reports.capped", match_id=ids["match_id"], kept=MAX_REPORTS)
            kept[-1] = report
        self.changed.set()

    async def follow(self, source: MessageSource) -> None:
        """Keep the reports ``source`` delivers (subscribed to them) until cancelled."""
        async for message in source.messages():
            self.take(message)
