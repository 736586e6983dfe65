"""Time per message: a hostile message costs that message only, in time as in correctness.

For every long-running reader (``consume``, ``watch``, ``web``, ``load-consumer``, ``load``'s
probes and the replayer's control listener), one hostile message and then a valid one: the
valid one is handled within a second of the hostile one's arrival. An event ``type`` of
100,000 letters once froze ``consume``, ``watch`` and ``web`` for half a minute: its rejection
reason quoted it whole and the redaction of the log line was quadratic. The readers run
in-process on their real code paths, with the log pipeline the commands configure (the cut,
the redaction and the escaping all run), and nothing they write (log lines, dead letters,
terminal lines) quotes more than 200 characters of the hostile input.

A second is a bound no machine load reaches for what takes milliseconds here, and that the
quadratic path broke by minutes.
"""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from rich.console import Console

from consumers import Runner, Subscriber
from consumers.scoreboard import Scoreboard
from consumers.terminal import TerminalView
from consumers.ticker import Ticker
from events import (
    ControlReply,
    Event,
    Message,
    MessageProps,
    Topics,
    encode_event,
    encode_state,
    replay_state,
)
from matchcast.app.replay import ControlService
from matchcast.load import LoadOptions, LoadShape
from matchcast.load._accounting import ConsumerAccount
from matchcast.load._consume import run_consumer
from matchcast.load._run import LoadRun
from matchcast.logs import configure_logging
from matchcast.testing import match_events
from matchcast.transport.connection import BrokerURL
from matchcast.web import Hub
from matchcast.web._bridge import bridge
from simulator import Replayer, ReplayOptions

TOPICS = Topics()
EVENTS = match_events()
MATCH = EVENTS[0].match_id
LONG = 100_000
#: The longest run of one hostile character any output may hold: 200 quoted, and a little
#: of matchcast's own text around them that might repeat the character.
MAX_RUN = 230
SECOND = 1.0


def _event(index: int, **changes: Any) -> bytes:
    data = json.loads(encode_event(EVENTS[index]))
    data.update(changes)
    return json.dumps(data).encode()


def _other_kickoff(**team: Any) -> bytes:
    """A valid kick-off of another match, whose teams' names are ``team``'s."""
    data = json.loads(encode_event(EVENTS[0]))
    data["match_id"] = "other"
    for side in ("home", "away"):
        data[side].update(team.get(side, {}))
    return json.dumps(data).encode()


def _state(**changes: Any) -> bytes:
    data = json.loads(encode_state(replay_state(MATCH, EVENTS[:1])))
    data.update(changes)
    return json.dumps(data).encode()


def _clock(label: str) -> bytes:
    data = json.loads(encode_event(EVENTS[1]))
    data["clock"]["label"] = label
    return json.dumps(data).encode()


_MANY_KEYS = json.loads(encode_event(EVENTS[1])) | {f"k{i}": i for i in range(10_000)}

#: name -> (topic, payload, the character it repeats): each one hostile, all under the
#: 256 KiB limit, each a new variant of the attack that froze the consumers.
HOSTILE: dict[str, tuple[str, bytes, str]] = {
    "type of letters": (TOPICS.events(MATCH), _event(1, type="a" * LONG), "a"),
    "type of colons": (TOPICS.events(MATCH), _event(1, type=":" * LONG), ":"),
    "type of @/": (TOPICS.events(MATCH), _event(1, type="@/" * (LONG // 2)), "@"),
    "type like a URL": (TOPICS.events(MATCH), _event(1, type="mqtt://" + "u" * LONG), "u"),
    "type of URL near-misses": (
        TOPICS.events(MATCH),
        _event(1, type="a://b:c" * (LONG // 7)),
        "b",
    ),
    "type of digits": (TOPICS.events(MATCH), _event(1, type="7" * LONG), "7"),
    "match_id of letters": (TOPICS.events(MATCH), _event(1, match_id="m" * LONG), "m"),
    "extra key of letters": (
        TOPICS.events(MATCH),
        _event(1, **{"k" * LONG: 1}),
        "k",
    ),
    "ten thousand extra keys": (TOPICS.events(MATCH), json.dumps(_MANY_KEYS).encode(), "k"),
    "schema_version of digits": (
        TOPICS.events(MATCH),
        _event(1, schema_version="1." + "1" * LONG),
        "1",
    ),
    "newer minor, unknown type of letters (another match's)": (
        TOPICS.events("other"),
        _event(1, schema_version="1.9", type="z" * LONG, match_id="other"),
        "z",
    ),
    "clock label of letters": (TOPICS.events(MATCH), _clock("q" * LONG), "q"),
    "scorer of letters (a valid goal of another match)": (
        TOPICS.events("other"),
        _other_kickoff(home={"name": "n" * LONG}, away={"name": "w" * LONG}),
        "n",
    ),
    "topic level of letters": (TOPICS.events("t" * 60_000), _event(1), "t"),
    "state status of letters": (TOPICS.state(MATCH), _state(status="s" * LONG), "s"),
    "state of a team named in letters": (
        TOPICS.state("other"),
        _state(match_id="other", home={"code": "ARG", "name": "h" * LONG}),
        "h",
    ),
}


class _Sink:
    """Takes the dead letters and the load consumer's reports."""

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


class _Broker(_Sink):
    """A client of an in-memory broker: what the test puts in comes out of messages()."""

    url = BrokerURL("127.0.0.1", 1883)

    def __init__(self) -> None:
        super().__init__()
        self.inbox: asyncio.Queue[Message] = asyncio.Queue()

    async def subscribe(self, topic_filter: str, *, qos: int = 1) -> None:
        return None

    async def messages(self) -> AsyncIterator[Message]:
        while True:
            yield await self.inbox.get()


@pytest.fixture
def log() -> io.StringIO:
    """The log lines, as the commands configure them (the cut, redaction, escaping)."""
    stream = io.StringIO()
    configure_logging("json", "DEBUG", stream=stream)
    return stream


def _longest_run(text: str, char: str) -> int:
    """The longest run of ``char`` in ``text``."""
    best = run = 0
    for c in text:
        run = run + 1 if c == char else 0
        best = max(best, run)
    return best


def _seen(handled: list[Event]) -> Subscriber:
    sub = Subscriber("seen")
    sub.on()(lambda event, _state: handled.append(event))
    return sub


def _readers(out: io.StringIO) -> dict[str, Callable[[list[Event]], list[Subscriber]]]:
    """What each command runs on its runner, besides a subscriber noting what it handled."""
    console = Console(file=out, force_terminal=False, width=200)
    return {
        "consume": lambda h: [
            Scoreboard(echo=out.write),
            Ticker(echo=out.write, match_ids=True),
            _seen(h),
        ],
        "watch": lambda h: [TerminalView(console).subscriber, _seen(h)],
        "web": lambda h: [bridge(Hub(clock=lambda: 0.0)), _seen(h)],
    }


async def _until(condition: Callable[[], bool]) -> None:
    async with asyncio.timeout(10):
        while not condition():
            await asyncio.sleep(0)


@pytest.mark.parametrize("reader", ["consume", "watch", "web"])
@pytest.mark.parametrize("name", list(HOSTILE))
async def test_the_next_message_is_handled_within_a_second_of_a_hostile_one(
    reader: str, name: str, log: io.StringIO
) -> None:
    topic, payload, char = HOSTILE[name]
    terminal = io.StringIO()
    handled: list[Event] = []
    dead = _Sink()
    runner = Runner(_readers(terminal)[reader](handled), topics=TOPICS, name=reader)
    runner.dead_letters = dead
    async with runner:
        await runner.feed(Message(TOPICS.events(MATCH), encode_event(EVENTS[0]), qos=1))
        await _until(lambda: len(handled) == 1)
        start = time.monotonic()
        await runner.feed(Message(topic, payload, qos=1, retain=topic.endswith("/state")))
        await runner.feed(Message(TOPICS.events(MATCH), encode_event(EVENTS[1]), qos=1))
        await _until(lambda: any(e.seq == 2 and e.match_id == MATCH for e in handled))
        took = time.monotonic() - start
        await asyncio.sleep(0)  # the dead letter's task
    assert took < SECOND, f"{took:.1f} s"
    written = log.getvalue() + terminal.getvalue()
    written += "".join(p.decode() for _, p in dead.sent)
    assert _longest_run(written, char) <= MAX_RUN
    if runner.stats.rejected:
        assert "chars]" in written or "bytes]" in written  # the cut says what it left out


class _Probe(_Broker):
    """A probe connection of ``load``: the messages the test puts in."""


async def test_a_load_probe_accounts_the_next_message_within_a_second_of_a_hostile_one() -> None:
    """``load``'s probes read seq and scheduled_at without decoding: a seq past any bitmap,
    a zero or negative seq, 100,000 digits, a scheduled_at of 100,000 bytes."""
    events_topic = TOPICS.events(MATCH)
    stamp = '"scheduled_at":"2026-07-15T19:00:00.000000Z"'
    hostile = [
        b'{"seq":99999999999,' + stamp.encode() + b"}",
        b'{"seq":0,' + stamp.encode() + b"}",
        b'{"seq":-5,' + stamp.encode() + b"}",
        b'{"seq":' + b"9" * LONG + b"," + stamp.encode() + b"}",
        b'{"seq": ' + b"9" * LONG + b"}",
        b'{"seq":3,"scheduled_at":"' + b"2" * LONG + b'"}',
        b'{"seq":3,"scheduled_at":"2026-07-15T19:00:00.' + b"1" * LONG + b'Z"}',
        b'{"seq":' + b":" * LONG + b"}",
    ]
    run = LoadRun(LoadOptions(shape=LoadShape(), topics=TOPICS), [], lambda *_: None)  # type: ignore[arg-type,return-value]
    account = ConsumerAccount("probe")
    probe = _Probe()
    reader = asyncio.create_task(run._consume(probe, account))  # type: ignore[arg-type]
    try:
        for i, payload in enumerate(hostile, start=1):
            start = time.monotonic()
            probe.inbox.put_nowait(Message(events_topic, payload, qos=0))
            good = f'{{"seq":{i},{stamp}}}'.encode()
            probe.inbox.put_nowait(Message(events_topic, good, qos=0))
            await _until(
                lambda i=i: MATCH in account.streams and account.streams[MATCH].unique == i
            )
            assert time.monotonic() - start < SECOND
        assert account.malformed == len(hostile)
        assert len(account.streams[MATCH].seen) < 1024  # no bitmap sized by a forged seq
    finally:
        reader.cancel()


async def test_load_consumer_handles_the_next_message_within_a_second_of_a_hostile_one(
    log: io.StringIO,
) -> None:
    """``load-consumer``: its runner, metrics and state reporter, on the whole corpus."""
    broker = _Broker()
    handled: list[Event] = []
    ready = asyncio.Event()
    task = asyncio.create_task(
        run_consumer(broker, TOPICS, "lc", subscribers=[_seen(handled)], ready=ready)  # type: ignore[arg-type]
    )
    try:
        await asyncio.wait_for(ready.wait(), 10)
        broker.inbox.put_nowait(Message(TOPICS.events(MATCH), encode_event(EVENTS[0]), qos=1))
        await _until(lambda: len(handled) == 1)
        for n, (topic, payload, char) in enumerate(HOSTILE.values(), start=1):
            start = time.monotonic()
            broker.inbox.put_nowait(Message(topic, payload, qos=1))
            good = encode_event(EVENTS[n])
            broker.inbox.put_nowait(Message(TOPICS.events(MATCH), good, qos=1))
            await _until(lambda n=n: any(e.seq == n + 1 and e.match_id == MATCH for e in handled))
            assert time.monotonic() - start < SECOND, topic[:80]
            assert _longest_run(log.getvalue(), char) <= MAX_RUN
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


# ---------------------------------------------------------------- the control listener


class _ControlClient(_Broker):
    """The replayer's connection, as its control service uses it."""


def _command(**fields: Any) -> bytes:
    base = {"request_id": "r1", "reply_to": TOPICS.reply("rp", "r1")}
    return json.dumps(base | fields).encode()


#: Commands that are not ones, at most the 4 KiB a command may be.
HOSTILE_COMMANDS = [
    _command(command="a" * 4000),
    _command(command="speed", speed=5e-324),
    _command(command="speed", speed=1e-300),
    _command(command="speed", speed="\uff14\uff15"),
    _command(command="seek", minute="\uff14\uff15"),
    _command(command="seek", minute="\u0664\u0665"),
    _command(command="status", request_id="r" * 4000),
    _command(command="status", match=":" * 4000),
    _command(command="status", reply_to="@" * 4000),
    b'{"command": "status", "request_id": "' + b"a" * 4000 + b'"}',
    b"[" * 4000,
]


async def test_the_control_listener_answers_the_next_command_within_a_second(
    log: io.StringIO,
) -> None:
    client = _ControlClient()
    replayer = Replayer(_Sink(), ReplayOptions(speed=60.0))
    service = ControlService(client, replayer, "rp", TOPICS)  # type: ignore[arg-type]
    serving = asyncio.create_task(service.serve())
    try:
        for i, payload in enumerate(HOSTILE_COMMANDS):
            start = time.monotonic()
            client.inbox.put_nowait(Message(TOPICS.control("rp"), payload, qos=1))
            good = _command(command="status", request_id=f"good{i}")
            client.inbox.put_nowait(Message(TOPICS.control("rp"), good, qos=1))
            await _until(lambda i=i: any(f'"good{i}"'.encode() in p for _, p in client.sent))
            assert time.monotonic() - start < SECOND
        answers = [ControlReply.model_validate_json(p) for _, p in client.sent]
        assert [a.ok for a in answers if a.request_id.startswith("good")] == [True] * len(
            HOSTILE_COMMANDS
        )
        refused = [a for a in answers if not a.request_id.startswith("good")]
        assert refused and not any(a.ok for a in refused)
        assert _longest_run(log.getvalue(), "a") <= MAX_RUN
        assert not serving.done()
    finally:
        serving.cancel()
