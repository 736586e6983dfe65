"""A persistent session that the node failed over to cannot resume is given up there, and the
consumer goes on with a clean session on that same node, which is up.

RabbitMQ 3.10 keeps a session's queue on the node it was made on; with that node dead, a
SUBSCRIBE under its client id hangs on every other node. The consumer gives the session up
(``consumer.session_abandoned``). A CI run of ``tests/test_clusters.py`` then saw it fail over
once more, to a third node, where RabbitMQ (which keeps retained messages per node) held no
snapshot of the match: with the replay over, it waited for a full time that never came. The
node that hung the subscribe was the replayer's, and up.

Here: node 1 and node 2 are two doors to one mosquitto (the replayer's), node 2 hangs a
SUBSCRIBE under the session's client id, node 3 is a mosquitto of its own that never sees the
match.
"""

from __future__ import annotations

import asyncio

import pytest
from structlog.testing import capture_logs

from consumers import Runner, Subscriber
from events import Topics
from matchcast.app import run_replay, run_watch
from matchcast.testbroker import FaultProxy, Mosquitto, mosquitto_binary
from matchcast.transport.connection import BrokerURL
from simulator import ReplayOptions, resolve_matches
from tests._proxies import Connection, PacketProxy

pytestmark = pytest.mark.mosquitto

SEMI = resolve_matches("semifinal")[0]


class _SessionHanger(PacketProxy):
    """Forwards MQTT 3.1.1 to a broker, but never passes on a SUBSCRIBE of the connection whose
    CONNECT carries the client id ``hung`` (exactly: not one that starts with it)."""

    def __init__(self, upstream_port: int, hung: str) -> None:
        super().__init__(upstream_port)
        self.hung = hung
        self.swallowed = 0

    def client_packet(self, conn: Connection, first: int, start: int, packet: bytes) -> bool:
        if first == 0x82 and conn.client_id == self.hung:
            self.swallowed += 1
            return False
        return True


async def test_a_session_given_up_on_a_live_node_goes_on_clean_on_that_node() -> None:
    binary = mosquitto_binary()
    if binary is None:
        pytest.fail("mosquitto is required but not installed")
    replayers_broker, elsewhere = Mosquitto(binary).start(), Mosquitto(binary).start()
    topics = Topics("mctest-abandoned")
    session_id = "mctest-abandoned-session"
    seen: list[int] = []
    sub = Subscriber("seen")
    sub.on()(lambda event, _state: seen.append(event.seq))
    runner = Runner([sub], topics=topics)
    upstream = BrokerURL.parse(replayers_broker.url)
    try:
        async with (
            FaultProxy(upstream.host, upstream.port) as node1,
            _SessionHanger(upstream.port, session_id) as node2,
        ):
            urls = [
                BrokerURL("127.0.0.1", node1.port),
                BrokerURL("127.0.0.1", node2.port),
                BrokerURL.parse(elsewhere.url),
            ]
            with capture_logs() as logs:
                async with asyncio.timeout(45), asyncio.TaskGroup() as tg:
                    watch = tg.create_task(
                        run_watch(
                            urls,
                            [],
                            runner=runner,
                            until_finished={SEMI.match_id},
                            client_id=session_id,
                            clean_start=False,
                            protocol="3.1.1",
                        )
                    )
                    await runner.subscribed.wait()
                    options = ReplayOptions(speed=800.0, break_seconds=0.2, topics=topics)
                    replay = tg.create_task(run_replay([SEMI], upstream, options))
                    while len(seen) < 20:
                        await asyncio.sleep(0.05)
                    node1.blackhole = True  # node 1 dies: its connection dropped, no new one
                    node1.drop()
                    await replay
                    states = await watch
    finally:
        replayers_broker.stop()
        elsewhere.stop()
    assert node2.swallowed >= 1, "the session's subscribe went to node 2 and hung"
    # The runner reads beside its subscribing: where node 2 delivers the session's messages
    # while it holds the SUBSCRIBE (mosquitto behind it has the session), the match may end
    # before the SUBACK wait does; where the wait ends first, the session is given up there.
    abandoned = [e for e in logs if e["event"] == "consumer.session_abandoned"]
    assert [e["broker"] for e in abandoned] in ([], [str(urls[1])])
    connected = [e["broker"] for e in logs if e["event"] in ("broker.failed_over",)]
    assert str(urls[2]) not in connected, "it left the live node for one without the match"
    state = states[SEMI.match_id]
    assert (state.scoreline, state.status) == ("ARG 2-1 ENG", "finished")
    assert seen == sorted(set(seen)), "no seq handled twice"
