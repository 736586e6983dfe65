"""Reading what a replay left behind on a broker."""

from __future__ import annotations

import asyncio

from events import MatchState, Topics, decode_state
from matchcast.transport.connection import BrokerURL
from matchcast.transport.mqtt import MqttClient


async def retained_state(url: BrokerURL, topics: Topics, match_id: str) -> MatchState:
    """The retained state of ``match_id``, as a late subscriber receives it."""
    async with MqttClient(url) as client:
        await client.subscribe(topics.state(match_id))
        async with asyncio.timeout(10):
            async for message in client.messages():
                return decode_state(message.payload, topic=message.topic)
    raise AssertionError(f"no retained state for {match_id}")
