"""matchcast on real broker clusters: a 3-node NATS cluster and a 3-node RabbitMQ cluster.

Each cluster is booted once per session, in the background (tests/conftest.py, tests/_clusters.py)
and shared. The tests that need every node (``clear``, ``load``) come first; then the tests that
kill a node, each leaving it down. NATS nodes are restarted before the next kill (a second
node down would cost JetStream its quorum); a RabbitMQ node only when fewer than two are up
(a restart after a SIGKILL costs about 100 s): the replayer's-node test kills one node, the
consumer's-node test another. On each engine: a replay given every node, consumers on other
nodes, and one node killed with SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from pathlib import Path

import aiomqtt
import pytest
from structlog.testing import capture_logs

from consumers import Runner, Subscriber
from events import BrokerError, MatchState, Topics, decode_event, decode_state
from matchcast.app import run_replay, run_watch
from matchcast.transport.connection import READER_QOS, BrokerURL
from matchcast.transport.mqtt import MqttClient
from simulator import (
    Match,
    Replayer,
    ReplayOptions,
    ReplayReport,
    expand,
    lean_match,
    resolve_matches,
)
from tests._clusters import Cluster, RabbitCluster

#: The lean feed: NATS_DROPS_TOLERATED and the cluster figures (docs/cluster.md) were measured
#: on its 106 events a stream.
SEMI = lean_match(resolve_matches("semifinal")[0])
LAST_SEQ = len(expand(SEMI))
ALL_SEQS = list(range(1, LAST_SEQ + 1))
#: Fast enough to keep the suite short, slow enough that a node dies mid-replay.
SPEED = 400.0
V311 = aiomqtt.ProtocolVersion.V311

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


@pytest.fixture(params=["nats", "rabbitmq"])
def cluster(request: pytest.FixtureRequest) -> Cluster:
    """Each engine's cluster in turn, as the test before left it (see each test)."""
    name = "nats_cluster" if request.param == "nats" else "rabbit_cluster"
    cluster: Cluster = request.getfixturevalue(name)
    return cluster


def _rotated(urls: tuple[BrokerURL, ...], first: int) -> tuple[BrokerURL, ...]:
    return urls[first:] + urls[:first]


def _show(logs: list[dict[str, object]]) -> None:
    """Print the captured log events but the per-event ones (capture_logs keeps them from
    the test's stderr, where a failure's report would show them)."""
    for entry in logs:
        if entry.get("event") not in ("event.scheduled", "event.published"):
            print(entry, file=sys.stderr)


def _recorder(name: str, seen: list[int]) -> Subscriber:
    sub = Subscriber(name)
    sub.on()(lambda event, _state: seen.append(event.seq))
    return sub


async def _independent(
    url: BrokerURL, topics: Topics, seqs: set[int], ready: asyncio.Event
) -> None:
    """A plain MQTT 3.1.1 subscriber of our own on one node, with a session (a clean one may
    lose what was in flight from the killed node: see the clean consumer): every seq it gets."""
    async with aiomqtt.Client(
        url.host,
        url.port,
        identifier=f"mc-independent-{topics.root}",
        protocol=aiomqtt.ProtocolVersion.V311,
        clean_session=False,
    ) as c:
        await c.subscribe(topics.events("+"), qos=1)
        ready.set()
        async for message in c.messages:
            assert isinstance(message.payload, bytes)
            event = decode_event(message.payload)
            seqs.add(event.seq)
            if len(seqs) == LAST_SEQ:
                return


async def _retained_state(url: BrokerURL, topics: Topics) -> MatchState:
    """The retained state one node holds for the semi-final (an exact-topic subscription at
    QoS 0, as matchcast's own readers make: READER_QOS).

    Asked afresh a few times: right after losing a node, NATS serves retained messages only
    once its JetStream has a leader again, and a subscription made before that gets nothing;
    a CONNECT made then may get no CONNACK for 10 s (seen in CI), and is made again. A QoS 1
    subscription is a JetStream consumer there, which NATS refused after a node loss (a CI
    run: 4 tries, nothing), unlike QoS 0.
    """
    for _ in range(4):
        client = aiomqtt.Client(url.host, url.port, protocol=aiomqtt.ProtocolVersion.V311)
        try:
            await client.__aenter__()
        except aiomqtt.MqttError:
            continue  # no CONNACK while JetStream elects: ask again, under a new client id
        try:
            granted = await client.subscribe(topics.state(SEMI.match_id), qos=READER_QOS)
            if any((g if isinstance(g, int) else g.value) >= 0x80 for g in granted):
                await asyncio.sleep(2)
                continue  # refused: ask again
            try:
                async with asyncio.timeout(15):
                    message = await anext(aiter(client.messages))
            except TimeoutError:
                continue
            assert isinstance(message.payload, bytes)
            return decode_state(message.payload)
        finally:
            with contextlib.suppress(aiomqtt.MqttError):
                await client.__aexit__(None, None, None)
    raise AssertionError(f"{url} holds no retained state (asked 4 times)")


#: NATS 2.9.10 now and then counts a QoS 1 delivery done without writing it to the MQTT client
#: (docs/cluster.md, shown with no matchcast code by benchmarks/nats_qos1_raw.py): a few seqs
#: in a run, scattered. More missed than this is something else, and fails.
NATS_DROPS_TOLERATED = 5


def _engine_loss_reported(cluster: Cluster, seen: list[int], runner: Runner) -> None:
    """Every seq handled, or (on NATS, whose engine drops a delivery now and then) the few
    missed reported as a gap, and the stream followed to its end: never a silent loss.

    A drop of the first events is no gap to a consumer: it cannot tell them from events
    published before it joined, so it starts from the state that comes with the first event it
    gets (``state.synchronised`` with ``reason=resumed``), as any late joiner does (seen once
    in CI: seq 1 dropped)."""
    if cluster.engine != "nats" or seen == ALL_SEQS:
        assert seen == ALL_SEQS, _diff(seen)
        return
    missing = set(ALL_SEQS) - set(seen)
    assert len(missing) <= NATS_DROPS_TOLERATED, _diff(seen)
    joined_after = set(range(1, seen[0]))
    if missing - joined_after:
        assert runner.stats.gaps >= 1, "a missed seq is reported: " + _diff(seen)
    assert seen[-1] == LAST_SEQ, _diff(seen)


def _diff(seen: list[int]) -> str:
    missing = sorted(set(ALL_SEQS) - set(seen))
    doubled = sorted({s for s in seen if seen.count(s) > 1})
    return f"missing {missing}, handled twice {doubled}"


async def _until(predicate: object) -> None:
    assert callable(predicate)
    async with asyncio.timeout(60):
        while not predicate():
            await asyncio.sleep(0.02)


async def _retained_on(url: BrokerURL, named: list[str], barrier: str) -> dict[str, bytes]:
    """The retained messages that fresh exact-topic subscriptions to ``named`` get on one
    node. ``barrier``, retained there, is subscribed to last: once it is in, the broker has
    answered every subscription before it (and a second more is given to stragglers).

    Raises:
        AssertionError: the barrier never came (the node lost a retained topic it should keep).
    """
    got: dict[str, bytes] = {}
    async with aiomqtt.Client(url.host, url.port, protocol=V311) as client:
        for topic in named:  # QoS 0: on NATS a refused QoS 1 one would hide what is left
            await client.subscribe(topic, qos=READER_QOS)
        await client.subscribe(barrier, qos=READER_QOS)
        messages = aiter(client.messages)
        try:
            async with asyncio.timeout(30):
                while barrier not in got:
                    message = await anext(messages)
                    if message.retain and isinstance(message.payload, bytes) and message.payload:
                        got[str(message.topic)] = message.payload
        except TimeoutError:
            raise AssertionError(f"{url} lost {barrier}, which clear must keep") from None
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1):
                while True:
                    message = await anext(messages)
                    if message.retain and isinstance(message.payload, bytes) and message.payload:
                        got[str(message.topic)] = message.payload
    del got[barrier]
    return got


def _listed(stdout: str, mark: str) -> dict[str, set[str]]:
    """From ``clear``'s listing, each topic marked ``mark`` and the nodes it was found on."""
    listed: dict[str, set[str]] = {}
    for line in stdout.splitlines():
        if line.startswith(f"{mark}  ") and "  on " in line:
            topic = line[len(mark) :].split()[0]
            listed.setdefault(topic, set()).update(line.rsplit("  on ", 1)[1].split(", "))
    return listed


async def _replay_under_one_id(url: BrokerURL, match: Match, topics: Topics, rid: str) -> None:
    """Replay ``match`` on ``url`` alone as replayer ``rid``, asking again when the node sends
    no CONNACK. NATS 2.9 leaves a CONNECT unanswered for 10 s and more when its client id left
    another node a moment before (the replayer's client id comes from ``rid``; the node's log
    says ``unable to delete session ... record``): 2 CI runs of 3 failed this test's second
    replay on it. It is this setup's, not what the test checks (docs/cluster.md's limits)."""
    for attempt in range(1, 4):
        try:
            await run_replay(
                [match], url, ReplayOptions(speed=None, topics=topics), replayer_id=rid
            )
        except BrokerError as err:
            if "no CONNACK" not in err.reason or attempt == 3:
                raise
        else:
            return


async def _leave_offline_status(url: BrokerURL, topics: Topics, rid: str, match_id: str) -> None:
    """The retained offline status a replayer's last will leaves when it is killed."""
    status = {"status": "offline", "replayer_id": rid, "matches": [match_id],
              "at": "2026-07-15T19:00:00Z"}  # fmt: skip
    async with aiomqtt.Client(url.host, url.port, protocol=V311) as client:
        await client.publish(topics.status(rid), json.dumps(status).encode(), qos=1, retain=True)


async def test_clear_empties_every_nodes_retained_topics(cluster: Cluster, topics: Topics) -> None:
    """Replays under one --replayer, each on another node and killed at the end (its
    will's status left), leave states and a status on each; `matchcast clear --replayer ID --broker LIST --yes` lists what it found on which
    node, clears it on every node, and keeps a running replayer's status (on every node)."""
    cluster.heal()
    urls = cluster.urls
    last = len(urls) - 1
    matches: list[Match] = [
        resolve_matches(name)[0] for name in ("semifinal", "worldcup:2022/final", "sim:7")
    ][: len(urls)]
    rid, running = f"{topics.root}-r", f"{topics.root}-running"
    for url, match in zip(urls, matches, strict=True):
        await _replay_under_one_id(url, match, topics, rid)
        # A replayer that ends cleanly removes its status; one killed leaves its will's
        # offline status, what clear finds states by where wildcards get none (RabbitMQ).
        await _leave_offline_status(url, topics, rid, match.match_id)
    online = json.dumps(
        {
            "status": "online",
            "replayer_id": running,
            "matches": [f"{topics.root}-m"],
            "at": "2026-07-15T19:00:00Z",
        }
    ).encode()
    late = topics.state(matches[last].match_id)
    async with aiomqtt.Client(urls[last].host, urls[last].port, protocol=V311) as client:
        await client.subscribe(late, qos=1)  # exact topic: RabbitMQ sends it, NATS too
        async with asyncio.timeout(30):
            late_state = (await anext(aiter(client.messages))).payload
    assert isinstance(late_state, bytes)
    for url in urls:
        async with aiomqtt.Client(url.host, url.port, protocol=V311) as client:
            await client.publish(topics.status(running), online, qos=1, retain=True)
            if url == urls[0]:
                # The last match's state on the first node too, where no status names it (as
                # a replayer that failed over leaves it): found by the status on another node.
                await client.publish(late, late_state, qos=1, retain=True)
    named = [topics.state(m.match_id) for m in matches] + [topics.status(rid)]
    if cluster.engine == "rabbitmq":  # each node holds what was published to it
        for i, url in enumerate(urls):
            held = await _retained_on(url, named, topics.status(running))
            expected = {topics.state(matches[i].match_id), topics.status(rid)}
            assert set(held) == expected | ({late} if i == 0 else set()), str(url)

    args = ["clear", "--broker", cluster.broker_list, "--root", topics.root]
    args += ["--replayer", rid, "--replayer", running, "--yes"]
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "matchcast", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    for url in urls:
        assert await _retained_on(url, named, topics.status(running)) == {}, str(url)
    every = {str(u) for u in urls}
    if cluster.engine == "rabbitmq":
        holders = {topics.state(m.match_id): {str(urls[i])} for i, m in enumerate(matches)}
        holders[late] |= {str(urls[0])}
        holders[topics.status(rid)] = every
    else:  # replicated: every node holds every one
        holders = dict.fromkeys(named, every)
    assert _listed(done.stdout, "would clear") == holders, done.stdout
    assert _listed(done.stdout, "keep") == {topics.status(running): every}, done.stdout


async def _joined_after_full_time(
    url: BrokerURL, topics: Topics, replayers: list[str], wait: float, match: str = "+"
) -> dict[str, MatchState]:
    """What a consumer joining ``url`` after full time knows within ``wait`` seconds."""
    runner = Runner([Subscriber("late")], topics=topics, replayers=replayers, match_filter=match)
    watch = asyncio.create_task(run_watch(url, [], runner=runner))
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(wait):
            while SEMI.match_id not in runner.states:
                await asyncio.sleep(0.05)
    runner.stop()
    async with asyncio.timeout(30):
        await watch
    return runner.states


async def test_a_late_joiner_finds_the_finished_match_by_its_id(
    cluster: Cluster, topics: Topics
) -> None:
    """After full time no event follows to name the match, and the replayer, ended cleanly,
    has removed its status. On RabbitMQ 3.10 a wildcard gets no retained state, so a consumer
    that joins later learns nothing by the wildcard or the replayer's id; given the match
    (``--match``), it reads the exact state topic, which holds 2-1. NATS gives the wildcard
    the retained state."""
    url, rid = cluster.urls[0], f"rep-{topics.root}"
    options = ReplayOptions(speed=None, topics=topics)
    (report,) = await run_replay([SEMI], url, options, replayer_id=rid)
    assert report.final_state is not None
    match = "+"
    if cluster.engine == "rabbitmq":  # the wildcard and the (removed) status give nothing
        assert await _joined_after_full_time(url, topics, [rid], wait=5) == {}
        match = SEMI.match_id
    states = await _joined_after_full_time(url, topics, [], wait=30, match=match)
    state = states[SEMI.match_id]
    assert (state.scoreline, state.status) == ("ARG 2-1 ENG", "finished")


async def test_control_finds_a_named_replayer_by_its_status(
    cluster: Cluster, topics: Topics
) -> None:
    """`control --replayer ID` on the replayer's node: its status is read by the exact topic
    (RabbitMQ 3.10 gives the wildcard none), and the command is answered."""
    from matchcast.app.control import ControlError, send_command

    url, rid = cluster.urls[0], f"rep-{topics.root}"
    options = ReplayOptions(speed=60, break_seconds=0.5, topics=topics)
    replay = asyncio.create_task(run_replay([SEMI], url, options, replayer_id=rid))
    try:
        async with asyncio.timeout(60):
            while True:  # until the replayer is online and subscribed to its control topic
                try:
                    reply = await send_command(
                        url, "status", replayer_id=rid, topics=topics, reply_timeout=2
                    )
                    break
                except ControlError:  # not online yet
                    await asyncio.sleep(0.5)
        assert (reply.ok, reply.replayer_id) == (True, rid)
        stopped = await send_command(url, "stop", replayer_id=rid, topics=topics)
        assert (stopped.ok, stopped.state) == (True, "stopped")
        async with asyncio.timeout(30):
            await replay
    finally:
        replay.cancel()


@pytest.mark.parametrize("qos", [0, 1])
def test_load_on_the_fast_client_spreads_over_every_node(
    cluster: Cluster, topics: Topics, qos: int, tmp_path: Path
) -> None:
    """`matchcast load --client fast` on a 3.1.1-only engine (auto falls back), every node
    listed: the connections go round-robin over the nodes and the probes get the events."""
    cluster.heal()
    report = tmp_path / "r.json"
    brokers = ",".join(str(u) for u in cluster.urls)
    args = ["load", "--broker", brokers, "--client", "fast", "--matches", "4"]
    args += ["--subscribers", "3", "--publishers", "3", "--speed", "max", "--qos", str(qos)]
    args += ["--feed", "lean"]  # the cluster tests' stream (SEMI)
    args += ["--root", topics.root, "--no-progress", "--report", str(report), "--keep"]
    r = subprocess.run(
        [sys.executable, "-m", "matchcast", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(report.read_text())
    delivery = result["delivery"]
    assert delivery["expected"] == 4 * LAST_SEQ * 3
    assert delivery["received"] > 0
    assert delivery["unique"] + delivery["lost"] == delivery["expected"]  # every event accounted
    if qos == 1 and isinstance(cluster, RabbitCluster):
        assert delivery["lost"] == 0
    # NATS 2.9 at QoS 1 was seen to lose an event now and then with no node down (seq 4 of
    # one stream for two of three probes, 1 run in 4): the report names such seqs
    # (lost_seqs_sample), and docs/cluster.md says so; it is not asserted away here.
    nodes = result["nodes"]
    assert set(nodes) == {str(u) for u in cluster.urls}
    assert all(sum(n["connections"].values()) >= 1 for n in nodes.values())  # every node got some
    # What each node carried adds up to the run's figures, and every node's probe was served.
    assert (
        sum(n["events_published"] for n in nodes.values()) == result["sender"]["events_published"]
    )
    assert sum(n["received"] for n in nodes.values()) == delivery["received"]
    assert sum(n["lost"] for n in nodes.values()) == delivery["lost"]
    assert all(n["received"] > 0 for n in nodes.values())
    health = result["connections"]
    assert health["publishers"]["connect_failures"] == health["probes"]["connect_failures"] == 0


async def test_the_replayers_node_killed_mid_replay_loses_and_doubles_nothing(
    cluster: Cluster, topics: Topics
) -> None:
    """Replay given every node; its node is killed and stays down: the replay fails over and
    finishes, consumers on the other nodes (one with a session) handle every seq once, a
    subscriber of our own on a surviving node sees all events, and the retained state ends
    2-1 wherever the engine keeps it."""
    live = cluster.ready_for_a_kill()
    dies, clean_on, session_on = live[0], live[1], live[-1]
    urls = cluster.urls
    seen_clean: list[int] = []
    seen_session: list[int] = []
    runner_clean = Runner([_recorder("clean", seen_clean)], topics=topics)
    runner_session = Runner([_recorder("session", seen_session)], topics=topics)
    independent: set[int] = set()
    ready = asyncio.Event()
    report: ReplayReport
    async with asyncio.timeout(180), asyncio.TaskGroup() as tg:
        watches = [
            tg.create_task(
                run_watch(
                    _rotated(urls, clean_on),
                    [],
                    runner=runner_clean,
                    until_finished={SEMI.match_id},
                )
            ),
            tg.create_task(
                run_watch(
                    _rotated(urls, session_on),
                    [],
                    runner=runner_session,
                    until_finished={SEMI.match_id},
                    client_id=f"mc-session-{topics.root}",
                    clean_start=False,
                    session_expiry=600,
                )
            ),
        ]
        sub = tg.create_task(_independent(urls[session_on], topics, independent, ready))
        await runner_clean.subscribed.wait()
        await runner_session.subscribed.wait()
        await ready.wait()
        options = ReplayOptions(speed=SPEED, break_seconds=0.5, topics=topics)
        replayers: list[Replayer] = []
        replay = tg.create_task(
            run_replay(
                [SEMI],
                _rotated(urls, dies),
                options,
                replayer_id=topics.root,
                on_ready=replayers.append,
            )
        )
        await _until(lambda: len(independent) > 40)
        cluster.kill(dies)
        (report,) = await replay
        # Everything published is delivered within seconds; then say what is missing.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(15):
                await asyncio.shield(sub)
        sub.cancel()
        for watch in watches:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(15):
                    await asyncio.shield(watch)
        runner_clean.stop()
        runner_session.stop()
    assert report.reconnects >= 1
    assert report.final_state is not None
    assert (report.final_state.scoreline, report.final_state.status) == (
        "ARG 2-1 ENG",
        "finished",
    )
    for seen, runner in ((seen_session, runner_session), (seen_clean, runner_clean)):
        assert seen == sorted(set(seen)), "no seq handled twice: " + _diff(seen)
        _engine_loss_reported(cluster, seen, runner)
    if cluster.engine == "nats":
        # The engine's dropped deliveries reach our own subscriber too: a few at most.
        assert len(set(ALL_SEQS) - independent) <= NATS_DROPS_TOLERATED, _diff(sorted(independent))
    else:
        assert sorted(independent) == ALL_SEQS, _diff(sorted(independent))
    # NATS keeps retained messages in JetStream, on every node; RabbitMQ 3.10 on the node
    # they were published to: the one the replayer failed over to (its last connection).
    (replayer,) = replayers
    assert isinstance(replayer.publisher, MqttClient)
    moved_to = replayer.publisher.url
    holders = cluster.live() if cluster.engine == "nats" else [urls.index(moved_to)]
    assert dies not in holders
    for i in holders:
        state = await _retained_state(urls[i], topics)
        # NATS serves each node's retained messages from its own copy of the JetStream store,
        # which can lag a moment behind the last update after a node loss: ask again then.
        for _ in range(30):
            if state.status == "finished" or cluster.engine != "nats":
                break
            await asyncio.sleep(1)
            state = await _retained_state(urls[i], topics)
        assert (state.scoreline, state.status) == ("ARG 2-1 ENG", "finished"), urls[i]


async def test_a_consumers_node_killed_mid_replay(cluster: Cluster, topics: Topics) -> None:
    """Consumers with a session lose their node, one on each client (``consume`` runs the
    fast one). NATS keeps the session in JetStream: nothing is missed. RabbitMQ 3.10 keeps it
    on that node only, and closes the connection at a subscribe under its client id on any
    other: each consumer rejoins on another node from the snapshot, reports the gap, and never
    handles a seq twice."""
    live = cluster.ready_for_a_kill()
    dies, replay_on = live[0], live[1]
    urls = cluster.urls
    kinds = ("aiomqtt", "fast")
    seen: dict[str, list[int]] = {kind: [] for kind in kinds}
    runners = {kind: Runner([_recorder(kind, seen[kind])], topics=topics) for kind in kinds}
    async with asyncio.timeout(180), asyncio.TaskGroup() as tg:
        watches = {
            kind: tg.create_task(
                run_watch(
                    _rotated(urls, dies),
                    [],
                    runner=runners[kind],
                    until_finished={SEMI.match_id},
                    client_id=f"mc-session-{kind}-{topics.root}",
                    clean_start=False,
                    session_expiry=600,
                    client=kind,
                )
            )
            for kind in kinds
        }
        for runner in runners.values():
            await runner.subscribed.wait()
        options = ReplayOptions(speed=SPEED, break_seconds=0.5, topics=topics)
        replay = tg.create_task(
            run_replay([SEMI], _rotated(urls, replay_on), options, replayer_id=topics.root)
        )
        await _until(lambda: min(len(s) for s in seen.values()) > 40)
        with capture_logs() as logs:
            cluster.kill(dies)
            (report,) = await replay
            if cluster.engine == "rabbitmq":  # where the rejoining consumers must find it
                held = await _retained_state(urls[replay_on], topics)
                if held.scoreline != "ARG 2-1 ENG":
                    # Seen once in about 20 runs (0-0, the score at the kill). RabbitMQ 3.10
                    # drops, silently and PUBACKed, every retained publish of a connection made
                    # before its retainer process last restarted (it casts to the dead pid; shown
                    # here by killing the retainer with rabbitmqctl eval): what restarted it?
                    _show(logs)
                    print(cluster.logs(), file=sys.stderr)
                assert held.scoreline == "ARG 2-1 ENG", f"replayer reconnects={report.reconnects}"
            states: dict[str, dict[str, MatchState]] = {}
            try:
                async with asyncio.timeout(40):
                    for kind, watch in watches.items():
                        states[kind] = await watch
            except TimeoutError:
                _show(logs)  # what the consumers did after the kill, in the failure's stderr
                raise
    assert report.final_state is not None
    abandoned = [e for e in logs if e["event"] == "consumer.session_abandoned"]
    for kind in kinds:
        final, handled, runner = states[kind][SEMI.match_id], seen[kind], runners[kind]
        assert (final.scoreline, final.status) == ("ARG 2-1 ENG", "finished"), kind
        assert handled == sorted(set(handled)), f"{kind}: no seq twice, none out of order"
        if cluster.engine == "nats":  # the session survives in JetStream
            _engine_loss_reported(cluster, handled, runner)
        elif handled != ALL_SEQS:
            # What it missed is reported, as a gap in the events or as a resynchronisation
            # from the snapshot when no event followed.
            assert runner.stats.gaps + runner.stats.resyncs >= 1, f"{kind}: {_diff(handled)}"
    if cluster.engine == "rabbitmq":
        # The sessions died with their node: both consumers went on with clean ones elsewhere.
        assert len(abandoned) >= len(kinds), abandoned
