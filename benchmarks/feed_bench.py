"""What the full feed costs beside the lean one: events, the retained state's size, and the
reducer's CPU to fold a match.

    python benchmarks/feed_bench.py [--rounds 5] [--folds 300] [MATCH ...]

For each match (default: the semi-final and sim:1), in each feed: the events of its stream,
the bytes of its final state as the state topic retains it, and the CPU (``time.process_time``,
so other work on a shared machine does not count) of ``replay_state`` over the whole stream,
per fold and per event; full and lean alternate round by round, and the table gives the median
over the rounds.
"""

from __future__ import annotations

import argparse
import statistics
import time

from events import Event, encode_state, replay_state
from simulator import Feed, expand, in_feed, resolve_matches


def _fold_us(match_id: str, events: list[Event], folds: int) -> float:
    start = time.process_time()
    for _ in range(folds):
        replay_state(match_id, events)
    return (time.process_time() - start) / folds * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("matches", nargs="*", default=["semifinal", "sim:1"])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--folds", type=int, default=300)
    args = parser.parse_args()
    print("match              feed  events  state bytes  fold us (median)  us/event")
    for spec in args.matches:
        for match in resolve_matches(spec):
            streams = {
                feed: [s.event for s in expand(in_feed(match, feed))]
                for feed in (Feed.full, Feed.lean)
            }
            times: dict[Feed, list[float]] = {feed: [] for feed in streams}
            for _ in range(args.rounds):
                for feed, events in streams.items():
                    times[feed].append(_fold_us(match.match_id, events, args.folds))
            for feed, events in streams.items():
                state = replay_state(match.match_id, events)
                fold = statistics.median(times[feed])
                print(
                    f"{match.match_id[:18]:<18} {feed.value:<5} {len(events):>6}  "
                    f"{len(encode_state(state)):>11}  {fold:>16.0f}  {fold / len(events):>8.1f}"
                )


if __name__ == "__main__":
    main()
