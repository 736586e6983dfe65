"""The examples' MQTT side: feed every event to a score keeper, print the scores as JSON.

Stops when every match seen has reached full time and nothing arrived for ``--idle``
seconds (late duplicates and delayed events still come in after full time).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Protocol

import aiomqtt


class Keeper(Protocol):
    def feed(self, topic: str, payload: bytes) -> None: ...

    def scores(self) -> dict[str, dict[str, int]]: ...


async def consume(keeper: Keeper, host: str, port: int, root: str, idle: float) -> None:
    """Feed ``keeper`` from the broker until full time and ``idle`` quiet seconds."""
    finished = False
    async with aiomqtt.Client(host, port) as client:
        await client.subscribe(f"{root}/matches/+/events", qos=1)
        await client.subscribe(f"{root}/matches/+/state", qos=1)
        print("subscribed", file=sys.stderr, flush=True)  # the replay may start
        messages = aiter(client.messages)
        while True:
            try:
                async with asyncio.timeout(idle if finished else None):
                    message = await anext(messages)
            except TimeoutError:
                return
            assert isinstance(message.payload, bytes)
            keeper.feed(message.topic.value, message.payload)
            finished = finished or b'"full_time"' in message.payload


def run(keeper: Keeper) -> None:
    """The command line of the examples."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=1883)
    parser.add_argument("--root", default="matchcast")
    parser.add_argument("--idle", type=float, default=2.0)
    args = parser.parse_args()
    asyncio.run(consume(keeper, args.host, args.port, args.root, args.idle))
    json.dump(keeper.scores(), sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
