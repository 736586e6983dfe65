"""Hostile input on the wire: any bytes on any topic cost that message only.

The corpus below is what an attacker with publish rights, or a broken publisher, can put on a
topic a consumer reads (retained included): each must end as a rejected message, logged,
counted and dead-lettered, and the consumer must go on with the next real match. The
subscribers behind ``watch`` (the terminal view) and ``web`` (the bridge to the hub) ride on
the same runner, so they are fed the same corpus.
"""

from __future__ import annotations

import asyncio
import io
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from consumers import Runner, Subscriber
from consumers.terminal import TerminalView
from events import Message, MessageProps, Topics, encode_event, encode_state, replay_state
from matchcast.testing import Harness, match_events
from matchcast.web import Hub
from matchcast.web._bridge import bridge

TOPICS = Topics()
EVENTS = match_events()
MATCH = EVENTS[0].match_id
GOOD = encode_event(EVENTS[0])


def _deep(depth: int, open_: bytes, close: bytes, inner: bytes = b"") -> bytes:
    return open_ * depth + inner + close * depth


#: Payloads that once crashed a consumer or might: deep nesting (RecursionError in json.loads),
#: bad encodings, wrong shapes, numbers that are not, huge values, forged envelopes.
CORPUS: list[bytes] = [
    _deep(1000, b"[", b"]"),
    _deep(1000, b'{"a":', b"}", b"1"),
    _deep(20_000, b"[", b"]"),
    b"[" * 3000,
    GOOD[:-1] + b',"x":' + _deep(1000, b"[", b"]") + b"}",
    GOOD.replace(b'"clock":{', b'"clock":' + _deep(500, b"[", b"]") + b',"c":{'),
    b"",
    b"\x00" * 64,
    b"\xff\xfe\xfd",
    b"null",
    b"[]",
    b'"string"',
    b"1e999999",
    b'{"schema_version": "1.1", "type": "goal", "seq": 1e400}',
    b'{"schema_version": "1.1", "type": "goal", "seq": NaN}',
    b'{"schema_version": "99.0"}',
    b'{"schema_version": ["1", "1"]}',
    b'{"schema_version": "1.9", "type": "cooling_break", "match_id": "x", "seq": -1}',
    b'{"schema_version": "1.9", "type": {"a": 1}}',
    GOOD.replace(MATCH.encode(), b"other-match"),  # match id not the topic's
    GOOD.replace(b'"seq":1', b'"seq":999999999'),  # implausible jump
    GOOD.replace(b'"run":0', b'"run":5').replace(b'"seq":1', b'"seq":999999999'),  # of a new run
    GOOD.replace(b'"seq":1', b'"seq":' + b"9" * 5000),
    GOOD.replace(b'"run":0', b'"run":-1'),
    b'{"a":"' + b"\\ud800" * 1000 + b'"}',
    b" " * (300 * 1024),  # over the size limit
]


class _Publisher:
    """Takes dead letters."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes]] = []

    async def publish(
        self,
        topic: str,
        payload: bytes,
        *,
        qos: int = 1,
        retain: bool = False,
        props: MessageProps | None = None,
    ) -> None:
        self.sent.append((topic, payload))


def _subscribers() -> list[Subscriber]:
    view = TerminalView(Console(file=io.StringIO(), force_terminal=False))
    return [view.subscriber, bridge(Hub(clock=lambda: 0.0))]


@pytest.mark.parametrize("kind", ["events", "state"])
async def test_every_hostile_payload_is_rejected_and_the_consumer_goes_on(kind: str) -> None:
    """The corpus on an events or (retained) state topic, behind watch's and web's subscribers."""
    topic = TOPICS.events(MATCH) if kind == "events" else TOPICS.state(MATCH)
    dead = _Publisher()
    async with Harness(*_subscribers()) as h:
        h.runner.dead_letters = dead
        for payload in CORPUS:
            await h.send(Message(topic, payload, qos=1, retain=kind == "state"), wait=False)
        await h.play()
        await asyncio.sleep(0)  # the dead letters' tasks
    assert h.stats.rejected == len(CORPUS)
    assert len(h.logged("message.rejected")) == len(CORPUS)
    assert len(dead.sent) == h.stats.dead_lettered == len(CORPUS)
    assert {t for t, _ in dead.sent} == {TOPICS.deadletter(h.runner.name)}  # one topic, named
    assert h.state() == replay_state(MATCH, EVENTS)
    assert not h.errors


async def test_a_bug_one_message_trips_costs_that_message_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past decoding, whatever fails (here the sequencer) is logged, counted, dead-lettered."""
    from consumers import _sequencer

    real = _sequencer.Sequencer.on_event

    def flaky(self: _sequencer.Sequencer, event: object) -> object:
        if getattr(event, "seq", 0) == 5:
            raise RuntimeError("boom")
        return real(self, event)  # type: ignore[arg-type]

    monkeypatch.setattr(_sequencer.Sequencer, "on_event", flaky)
    dead = _Publisher()
    async with Harness(Subscriber("s")) as h:
        h.runner.dead_letters = dead
        await h.play()
        await asyncio.sleep(0)
    [failed] = h.logged("message.failed")
    assert "RuntimeError: boom" in failed["reason"]
    assert h.stats.rejected == 1
    assert len(dead.sent) == 1
    assert h.state().last_seq == len(EVENTS)


_topics = st.sampled_from(
    [
        TOPICS.events(MATCH),
        TOPICS.state(MATCH),
        TOPICS.events("other"),
        TOPICS.state("other"),
        TOPICS.status("r1"),
        f"{TOPICS.root}/matches/{MATCH}/unknown",
        "elsewhere/entirely",
        TOPICS.events("Bad Id/+"),
    ]
)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4)
    ),
    max_leaves=30,
)
_envelope_keys = st.sampled_from(
    ["schema_version", "type", "match_id", "seq", "run", "clock", "score", "last_seq", "status"]
)
_payloads = st.one_of(
    st.binary(max_size=300),
    _json.map(lambda v: json.dumps(v).encode()),
    st.tuples(st.sampled_from([*EVENTS[:5], EVENTS[-1]]), _envelope_keys, _json).map(
        lambda t: json.dumps({**json.loads(encode_event(t[0])), t[1]: t[2]}).encode()
    ),
    st.tuples(st.integers(1, 3000), st.sampled_from([b"[", b'{"a":'])).map(lambda t: t[1] * t[0]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_topics, _payloads, st.booleans()), max_size=12))
def test_any_bytes_on_any_topic_never_crash_the_runner(
    junk: list[tuple[str, bytes, bool]],
) -> None:
    """Arbitrary bytes and JSON, on any topic, retained or not, then a real match: the match
    is still handled in full and the runner's reader never raises."""

    async def go() -> None:
        seen: list[int] = []
        sub = Subscriber("s")
        sub.on()(lambda e, state: seen.append(e.seq) if e.match_id == MATCH else None)
        runner = Runner([sub], topics=TOPICS)
        async with runner:
            for topic, payload, retain in junk:
                await runner.feed(Message(topic, payload, qos=1, retain=retain))
            for event in EVENTS:
                await runner.feed(Message(TOPICS.events(MATCH), encode_event(event), qos=1))
            await runner.join()
        assert runner.stats.received == len(junk) + len(EVENTS)
        state = runner.states[MATCH]
        assert state.last_seq == len(EVENTS)
        # Junk that decoded as a real event of the match may have taken a seq; nothing else.
        assert len(seen) == len(set(seen))

    asyncio.run(go())


async def test_a_retained_hostile_state_is_rejected_at_every_restart() -> None:
    """A deep payload retained on the state topic: each new consumer rejects it and runs."""
    for _ in range(3):
        async with Harness(Subscriber("s")) as h:
            await h.send(Message(TOPICS.state(MATCH), CORPUS[0], qos=1, retain=True))
            await h.send(Message(TOPICS.state(MATCH), encode_state(replay_state(MATCH, EVENTS))))
        assert h.stats.rejected == 1
        assert h.state().last_seq == len(EVENTS)
