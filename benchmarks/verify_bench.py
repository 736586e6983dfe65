"""How long `matchcast verify`'s battery takes, at its default speed and at the tests' (max).

Issue 31's targets: the whole battery in 60 s or less at its default speed, and in 10 s or less
at the speed the tests use (``--speed max``). Each round grades a consumer of
examples/verify/ (its own process) on a mosquitto of its own, once at each speed, the two
alternating so the machine's noise hits both alike; it prints each round, the median per
scenario, and the time the streams alone take at the default speed (the match time the
replayer has to play at that speed: what the battery cannot go under).

    python benchmarks/verify_bench.py --rounds 3
    python benchmarks/verify_bench.py --rounds 3 --consumer shell   # or js (npm ci first)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import time
from pathlib import Path

from events import Topics
from matchcast.logs import configure_logging
from matchcast.testbroker import Mosquitto, mosquitto_binary
from matchcast.transport.connection import BrokerURL
from matchcast.transport.fastmqtt import FastClient
from matchcast.verify import (
    DEFAULT_SPEED,
    SCENARIOS,
    Verdict,
    VerifyOptions,
    run_verify,
    scenario_match,
)
from simulator import expand

EXAMPLES = Path(__file__).parents[1] / "examples" / "verify"
COMMANDS = {
    "python": [sys.executable, str(EXAMPLES / "consumer.py")],
    "js": ["node", str(EXAMPLES / "js" / "consumer.mjs")],
    "shell": ["sh", str(EXAMPLES / "consumer.sh")],
}


def stream_seconds(speed: float) -> float:
    """Wall seconds the battery's streams take at ``speed``: match time plus the breaks."""
    match = scenario_match(SCENARIOS[0])
    stream = expand(match)
    last = stream[-1]
    full = last.play_s + last.breaks * match.break_minutes * 60
    at = {s.event.clock.minute: s.play_s + s.breaks * match.break_minutes * 60 for s in stream}
    total = 0.0
    for s in SCENARIOS:
        if s.start is not None:
            total += full - at[int(s.start)]
        elif s.seek is not None:
            total += at[int(s.seek[0])] + full - at[int(s.seek[1])]
        elif s.chaos is not None and s.chaos.startswith("restart="):
            total += at[int(s.chaos.split("=")[1])] + full
        else:
            total += full
    return total / speed


async def ready(conn: FastClient, topics: Topics, consumer_id: str) -> None:
    report = topics.consumer_state(consumer_id, "probe")
    await conn.subscribe(report, qos=1)
    state = {"match_id": "probe", "run": 1, "last_seq": 1, "score": {"AAA": 1}, "status": "live"}
    await conn.publish(topics.state("probe"), json.dumps(state).encode(), qos=1, retain=True)
    async with asyncio.timeout(30):
        async for message in conn.messages():
            if message.topic == report and message.payload:
                break
    for topic in (topics.state("probe"), report):
        await conn.publish(topic, b"", qos=1, retain=True)


async def grade(url: BrokerURL, consumer: str, speed: float | None) -> Verdict:
    topics = Topics("matchcast-verify-bench")
    consumer_id = f"bench-{consumer}"
    args = ["--host", url.host, "--port", str(url.port), "--root", topics.root, "--id", consumer_id]
    proc = await asyncio.create_subprocess_exec(
        *COMMANDS[consumer], *args, stderr=asyncio.subprocess.DEVNULL, start_new_session=True
    )
    try:
        async with FastClient(url) as conn:
            await ready(conn, topics, consumer_id)
            return await run_verify(conn, VerifyOptions(consumer_id, topics, speed=speed))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        await proc.wait()


async def main(rounds: int, consumer: str) -> None:
    binary = mosquitto_binary()
    assert binary is not None, "needs mosquitto"
    broker = Mosquitto(binary).start()
    try:
        url = BrokerURL.parse(broker.url)
        totals: dict[str, list[float]] = {"default": [], "max": []}
        per: dict[tuple[str, str], list[float]] = {}
        for n in range(1, rounds + 1):
            for label, speed in (("default", DEFAULT_SPEED), ("max", None)):
                t0 = time.monotonic()
                verdict = await grade(url, consumer, speed)
                took = time.monotonic() - t0
                totals[label].append(verdict.duration_s)
                for r in verdict.results:
                    per.setdefault((label, r.scenario.name), []).append(r.duration_s)
                passed = sum(r.passed for r in verdict.results)
                print(
                    f"round {n} speed {label:>7}: battery {verdict.duration_s:5.1f} s "
                    f"({took:5.1f} s with the consumer's start), {passed}/{len(verdict.results)} "
                    "passed",
                    flush=True,
                )
        print(f"\nstreams alone at the default speed ({DEFAULT_SPEED:g}): "
              f"{stream_seconds(DEFAULT_SPEED):.1f} s")  # fmt: skip
        for label, values in totals.items():
            print(
                f"battery at {label:>7}: min {min(values):.1f} s, "
                f"median {statistics.median(values):.1f} s, max {max(values):.1f} s"
            )
        print("\nmedian per scenario (default, max):")
        for s in SCENARIOS:
            d = statistics.median(per[("default", s.name)])
            m = statistics.median(per[("max", s.name)])
            print(f"  {s.name:<15} {d:5.2f} s  {m:5.2f} s")
    finally:
        broker.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--consumer", choices=sorted(COMMANDS), default="python")
    args = parser.parse_args()
    configure_logging("console", "WARNING")
    asyncio.run(main(args.rounds, args.consumer))
