"""A deliberately naive score keeper: it counts goal messages. Wrong under chaos.

Run it beside ``matchcast replay --chaos duplicate=0.3`` and it counts a goal twice; under
``--chaos correction=1`` it counts goals that were disallowed. docs/chaos.md shows both, and
``fixed.py`` beside it is the version that stays right.

    python examples/chaos/naive.py --port 1883 > scores.json
"""

from __future__ import annotations

import json
from collections import Counter

from _feed import run


class NaiveScore:
    """Counts every goal event per match and team."""

    def __init__(self) -> None:
        self.goals: dict[str, Counter[str]] = {}

    def feed(self, topic: str, payload: bytes) -> None:
        """Take one message of ``{root}/matches/{id}/events``."""
        if not topic.endswith("/events"):
            return
        event = json.loads(payload)
        if event["type"] == "kick_off":
            teams = self.goals.setdefault(event["match_id"], Counter())
            for side in ("home", "away"):
                teams[event[side]["code"]] += 0
        if event["type"] == "goal":
            self.goals.setdefault(event["match_id"], Counter())[event["team"]] += 1

    def scores(self) -> dict[str, dict[str, int]]:
        """Goals per team per match."""
        return {m: dict(c) for m, c in self.goals.items()}


if __name__ == "__main__":
    run(NaiveScore())
