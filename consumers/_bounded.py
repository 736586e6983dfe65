"""A subscriber's per-match memory, bounded like the runner's (``max_matches``).

The runner tracks at most ``max_matches`` matches and evicts the longest idle; a subscriber
that keeps something per match (the scoreboard's states, the terminal view's, the page's) keeps
it in a :class:`BoundedMatches`, so a flood of made-up match ids costs it a bounded amount too.
"""

from __future__ import annotations

import itertools
from typing import TypeVar

import structlog

__all__ = ["BoundedMatches", "trim_lines"]

_log = structlog.get_logger("matchcast.consumer")
V = TypeVar("V")
#: At the bound, 1/this of it is forgotten at once (the least recently set), so one line and
#: one scan are paid for many new matches.
_EVICT_SHARE = 20


class BoundedMatches(dict[str, V]):
    """A dict by match id of at most ``limit`` entries: setting one makes it the most recent;
    past the limit the least recently set are forgotten, a twentieth of the limit at a time,
    with one ``match.forgotten`` log line naming ``owner`` and how many."""

    def __init__(self, limit: int, owner: str) -> None:
        super().__init__()
        if limit < 1:
            raise ValueError(f"the match limit must be at least 1, not {limit}")
        self.limit = limit
        self.owner = owner
        #: Entries forgotten so far.
        self.forgotten = 0

    def __setitem__(self, key: str, value: V) -> None:
        if key in self:
            super().__delitem__(key)  # to the end: the most recently set
        super().__setitem__(key, value)
        if len(self) > self.limit:
            count = len(self) - self.limit + max(1, self.limit // _EVICT_SHARE)
            for old in list(itertools.islice(self, count)):
                super().__delitem__(old)
            self.forgotten += count
            _log.warning(
                "match.forgotten",
                owner=self.owner,
                forgotten=count,
                total=self.forgotten,
                kept=len(self),
                limit=self.limit,
            )


def trim_lines(lines: list[str], keep: int) -> None:
    """Keep the last ``keep`` lines of ``lines`` once it holds twice that (amortised O(1))."""
    if len(lines) > 2 * keep:
        del lines[:-keep]
