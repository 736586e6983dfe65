"""The topic tree, in one place.

Under a root (default ``matchcast``)::

    {root}/matches/{match_id}/events     every event, in seq order      QoS 1, not retained
    {root}/matches/{match_id}/state      MatchState after each event    QoS 1, retained
    {root}/replayers/{replayer_id}/status  online/offline (last will)   QoS 1, retained
    {root}/replayers/{replayer_id}/control   commands to the replayer     QoS 1, not retained
    {root}/replayers/{replayer_id}/replies/{request_id}  its answers     QoS 1, not retained
    {root}/deadletter/{consumer}         messages a consumer rejected   QoS 1, not retained
    {root}/consumers/{consumer}/state/{match_id}  a consumer's own final state, retained
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["DEFAULT_ROOT", "LOAD_ROOT", "TopicKind", "Topics"]

DEFAULT_ROOT = "matchcast"
#: The root ``matchcast load`` publishes under by default: its own, so that a load test
#: never mixes its synthetic matches into a real stream.
LOAD_ROOT = f"{DEFAULT_ROOT}-load"
TopicKind = Literal["events", "state", "status", "control", "reply"]


@dataclass(frozen=True, slots=True)
class Topics:
    """Builds and parses topic names under ``root``."""

    root: str = DEFAULT_ROOT

    def __post_init__(self) -> None:
        root = self.root.strip("/")
        if not root or any(c in root for c in "+#") or root.startswith("$"):
            raise ValueError(
                f"topic root {self.root!r} must be non-empty, without wildcards, not start with '$'"
            )
        object.__setattr__(self, "root", root)

    def events(self, match_id: str = "+") -> str:
        """The events topic of a match (``+`` for all matches)."""
        return f"{self.root}/matches/{match_id}/events"

    def state(self, match_id: str = "+") -> str:
        """The retained state topic of a match (``+`` for all matches)."""
        return f"{self.root}/matches/{match_id}/state"

    def status(self, replayer_id: str = "+") -> str:
        """The retained online/offline status topic of a replayer."""
        return f"{self.root}/replayers/{replayer_id}/status"

    def control(self, replayer_id: str = "+") -> str:
        """Where a replayer takes commands (pause, seek, ...); only operators may publish."""
        return f"{self.root}/replayers/{replayer_id}/control"

    def reply(self, replayer_id: str = "+", request_id: str = "+") -> str:
        """Where a replayer answers the command with ``request_id``."""
        return f"{self.root}/replayers/{replayer_id}/replies/{request_id}"

    def deadletter(self, consumer: str = "+") -> str:
        """Where a consumer puts a copy of each message it rejected, with the reason."""
        return f"{self.root}/deadletter/{consumer}"

    def consumer_state(self, consumer: str = "+", match_id: str = "+") -> str:
        """Where a consumer reports the state it arrived at for a match (load --verify-state)."""
        return f"{self.root}/consumers/{consumer}/state/{match_id}"

    def parse(self, topic: str) -> tuple[TopicKind, str] | None:
        """``(kind, id)`` for a topic of this tree, or None for anything else."""
        prefix = self.root + "/"
        if not topic.startswith(prefix):
            return None
        parts = topic[len(prefix) :].split("/")
        if len(parts) == 3 and parts[0] == "matches" and parts[2] in ("events", "state"):
            kind: TopicKind = "events" if parts[2] == "events" else "state"
            return kind, parts[1]
        if len(parts) == 3 and parts[0] == "replayers" and parts[2] in ("status", "control"):
            return ("status" if parts[2] == "status" else "control"), parts[1]
        if len(parts) == 4 and parts[0] == "replayers" and parts[2] == "replies":
            return "reply", parts[1]
        return None
