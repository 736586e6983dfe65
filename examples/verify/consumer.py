"""A consumer `matchcast verify` can grade: score and status from the events, reported after
every change. Any consumer does the same three things (docs/verify.md):

- keep each match's state from its events, applied once each, in seq order, per run;
- take the state snapshot where events are missing: a late join, a gap, a new run;
- publish what it believes, retained, after every change.

    python examples/verify/consumer.py --port 1883 --id py-example &
    matchcast verify --consumer py-example --broker mqtt://127.0.0.1:1883
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

import aiomqtt

STATUS = {"kick_off": "live", "full_time": "finished", "replay_stopped": "stopped"}


class Match:
    """One match: its state as of ``(run, last_seq)``, and events that came early."""

    def __init__(self) -> None:
        self.run, self.last_seq = -1, 0
        self.score: dict[str, int] = {}
        self.status = "scheduled"
        self.early: dict[tuple[int, int], dict[str, Any]] = {}

    def snapshot(self, state: dict[str, Any]) -> None:
        """A snapshot ahead of us (events missing) is taken; an older one is ignored."""
        if (state["run"], state["last_seq"]) > (self.run, self.last_seq):
            self.run, self.last_seq = state["run"], state["last_seq"]
            self.score, self.status = state["score"], state["status"]
            self.apply_early()

    def event(self, event: dict[str, Any]) -> None:
        """Apply the next event; hold one that came early; drop a repeat or an old one."""
        if event["run"] > self.run and event["seq"] == 1:  # a run from kick-off
            self.run, self.last_seq, self.score, self.status = event["run"], 0, {}, "scheduled"
        if (event["run"], event["seq"]) > (self.run, self.last_seq):
            self.early[(event["run"], event["seq"])] = event
            self.apply_early()

    def apply_early(self) -> None:
        while (event := self.early.pop((self.run, self.last_seq + 1), None)) is not None:
            self.last_seq = event["seq"]
            self.score = event.get("score", self.score)
            if event["type"] == "kick_off" and not self.score:
                self.score = {event["home"]["code"]: 0, event["away"]["code"]: 0}
            if event["type"] == "period_end":
                self.status = "half_time" if event["clock"]["period"] == 1 else "break"
            self.status = STATUS.get(event["type"], self.status)
        self.early = {k: e for k, e in self.early.items() if k > (self.run, self.last_seq)}

    def report(self) -> dict[str, Any]:
        return {"run": self.run, "last_seq": self.last_seq, "score": self.score,
                "status": self.status}  # fmt: skip


async def main(host: str, port: int, root: str, consumer_id: str) -> None:
    matches: dict[str, Match] = {}
    async with aiomqtt.Client(host, port) as client:
        await client.subscribe(f"{root}/matches/+/events", qos=1)
        await client.subscribe(f"{root}/matches/+/state", qos=1)
        print("subscribed", file=sys.stderr, flush=True)
        async for message in client.messages:
            try:
                body = json.loads(message.payload)
                match = matches.setdefault(body["match_id"], Match())
                before = match.report()
                if message.topic.value.endswith("/state"):
                    match.snapshot(body)
                else:
                    match.event(body)
            except (ValueError, KeyError, TypeError):
                continue  # not a message of ours (or a topic being cleared): skip it
            if match.report() != before:
                topic = f"{root}/consumers/{consumer_id}/state/{body['match_id']}"
                payload = json.dumps({"match_id": body["match_id"], **match.report()})
                await client.publish(topic, payload, qos=1, retain=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=1883)
    parser.add_argument("--root", default="matchcast-verify")
    parser.add_argument("--id", default="py-example")
    args = parser.parse_args()
    asyncio.run(main(args.host, args.port, args.root, args.id))
