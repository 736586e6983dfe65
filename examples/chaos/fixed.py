"""The score keeper done right: it takes the score the feed says, newest first.

Under chaos a feed repeats, loses, reorders and corrects events, and a replayer may restart a
match as a new run. Counting goal events cannot survive that; the fix is to never count:

- every ``goal``, ``goal_disallowed``, ``period_end`` and ``full_time`` carries the score
  after it, so keep the score of the *newest* such event;
- newest is by ``(run, seq)``: a larger ``run`` is a restarted replay and replaces an older
  one; within a run a larger ``seq`` is later. A repeat or a late (reordered, delayed) event
  is older than what is kept, and changes nothing;
- a lost event does not matter: the state snapshot published after every event (on
  ``{root}/matches/{id}/state``, with ``run`` and ``last_seq``) says the score too, and goes
  through the same newest-wins rule, so an older snapshot sent again is ignored.

    python examples/chaos/fixed.py --port 1883 > scores.json
"""

from __future__ import annotations

import json

from _feed import run

_SCORED = {"goal", "goal_disallowed", "period_end", "full_time"}


class FixedScore:
    """The score of the newest event that carries one, per match."""

    def __init__(self) -> None:
        self.latest: dict[str, tuple[tuple[int, int], dict[str, int]]] = {}

    def feed(self, topic: str, payload: bytes) -> None:
        """Take one message of ``{root}/matches/{id}/events`` or ``.../state``."""
        message = json.loads(payload)
        if topic.endswith("/state"):
            key = (message.get("run", 0), message["last_seq"])
        elif message["type"] in _SCORED:
            key = (message.get("run", 0), message["seq"])
        else:
            return
        kept = self.latest.get(message["match_id"])
        if kept is None or key > kept[0]:
            self.latest[message["match_id"]] = (key, message["score"])

    def scores(self) -> dict[str, dict[str, int]]:
        """The score per match."""
        return {m: dict(score) for m, (_, score) in self.latest.items()}


if __name__ == "__main__":
    run(FixedScore())
