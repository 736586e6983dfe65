"""RSS of a consumer across repeated floods of made-up match ids: flat, and bounded per match.

    python benchmarks/memory_flood.py                       # consume, watch and web views
    python benchmarks/memory_flood.py --matches 100000 --limit 50000 --floods 4 --view web
    python benchmarks/memory_flood.py --view consume --tracemalloc   # what grows, by line

Each view runs in a process of its own: the consumer runner (``max_matches=--limit``) with
the subscribers of that command, fed in memory (no broker: the MQTT client keeps nothing per
match), as ``consume scoreboard``, ``watch`` (the terminal view, drawing to nowhere) and
``web`` (the bridge and the page's hub) are. A flood is --matches distinct match ids, each a
kick-off event and a retained state, all new (the ids of one flood are not the next one's).
After each flood (and a garbage collection) it prints the process's RSS, the matches tracked
and what that costs per tracked match above the base (the RSS before the first flood).

Targets: RSS flat across floods (the last within 10% of the first), and at most 10 KB per
tracked match above the base. ``--tracemalloc`` prints the allocations that grew between the
first and the last flood, by source line: what is kept per evicted match.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import subprocess
import sys
import time
import tracemalloc
from typing import Any

import structlog
from rich.console import Console

from consumers import Runner, Scoreboard
from consumers.terminal import TerminalView
from events import MatchState, Message, Topics, apply, encode_event, encode_state
from matchcast.web import Hub, bridge
from simulator import expand, resolve_matches

VIEWS = ("consume", "watch", "web")


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def _subscribers(view: str, limit: int) -> tuple[list[Any], Any]:
    """The subscribers of ``view``, and what of theirs holds matches (for its count)."""
    if view == "consume":
        board = Scoreboard(echo=None, max_matches=limit)
        return [board], board.states
    if view == "watch":
        nowhere = open(os.devnull, "w")  # noqa: SIM115 (for the process's life)
        term = TerminalView(Console(file=nowhere, width=100), max_matches=limit)
        return [term.subscriber], term.board.states
    hub = Hub(max_matches=limit)
    return [bridge(hub)], hub._channels


async def _run(view: str, matches: int, limit: int, floods: int, trace: bool) -> None:
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())  # no log output
    kickoff = next(s.event for s in expand(resolve_matches("semifinal")[0]))
    topics = Topics("flood")
    subs, kept = _subscribers(view, limit)
    runner = Runner(subs, topics=topics, max_matches=limit)
    await runner.start()
    gc.collect()
    base = _rss_mb()
    if trace:
        tracemalloc.start(5)
    first: tracemalloc.Snapshot | None = None
    print(f"{view}: base {base:.1f} MB, limit {limit:,}, {matches:,} new matches a flood")
    print("flood   RSS MB   above base   tracked   kept by view   KB per tracked   seconds")
    for flood in range(floods):
        t = time.monotonic()
        for i in range(matches):
            match_id = f"f{flood}-{i}"
            event = kickoff.model_copy(update={"match_id": match_id})
            state = apply(MatchState.new(match_id), event)
            await runner.feed(Message(topics.state(match_id), encode_state(state), 1, True))
            await runner.feed(Message(topics.events(match_id), encode_event(event), 1))
            if i % 1000 == 999:
                await runner.join()
        await runner.join()
        gc.collect()
        rss = _rss_mb()
        tracked = max(runner.tracked, 1)
        per = (rss - base) * 1000 / tracked
        print(
            f"{flood + 1:>5}   {rss:>6.1f}   {rss - base:>10.1f}   {runner.tracked:>7,}"
            f"   {len(kept):>12,}   {per:>14.2f}   {time.monotonic() - t:>7.1f}"
        )
        if trace and flood == 0:
            first = tracemalloc.take_snapshot()
    if trace and first is not None:
        last = tracemalloc.take_snapshot()
        print("grew between the first flood and the last (top 10 lines):")
        for stat in last.compare_to(first, "lineno")[:10]:
            print(f"  {stat}")
    await runner.close(abandon=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--matches", type=int, default=20_000, help="new match ids a flood")
    parser.add_argument("--limit", type=int, default=10_000, help="max_matches of the views")
    parser.add_argument("--floods", type=int, default=4)
    parser.add_argument("--view", choices=VIEWS, action="append", help="repeatable; all")
    parser.add_argument("--tracemalloc", action="store_true", help="what grew, by line")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child: one view, this process
    args = parser.parse_args()
    if args.one:
        asyncio.run(_run(args.one, args.matches, args.limit, args.floods, args.tracemalloc))
        return
    for view in args.view or VIEWS:
        cmd = [sys.executable, __file__, "--one", view, "--matches", str(args.matches)]
        cmd += ["--limit", str(args.limit), "--floods", str(args.floods)]
        if args.tracemalloc:
            cmd.append("--tracemalloc")
        subprocess.run(cmd, check=True)
        print()


if __name__ == "__main__":
    main()
