"""Subscribers against real brokers: live replays, late joins, sessions, the consume command."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import structlog
from typer.testing import CliRunner

from consumers import Recorder, Runner, Subscriber
from events import (
    BaseEvent,
    Event,
    FullTime,
    Goal,
    KickOff,
    MatchState,
    Topics,
    apply,
    encode_event,
    encode_state,
)
from matchcast.app import run_replay, run_watch
from matchcast.cli import app
from matchcast.testing import match_events
from matchcast.transport.connection import BrokerURL
from matchcast.transport.mqtt import MqttClient
from simulator import ReplayOptions, load_recording, resolve_matches

ROOT = Path(__file__).parent.parent.parent
MATCH = resolve_matches("semifinal")[0]
EVENTS = match_events()
GOAL_LINES = [
    "55' Anthony Gordon - now ARG 0-1 ENG",
    "86' Enzo Fernández - now ARG 1-1 ENG",
    "90+2' Lautaro Martínez - now ARG 2-1 ENG",
]


def states_after(events: Sequence[Event]) -> list[MatchState]:
    state, out = MatchState.new(events[0].match_id), []
    for e in events:
        state = apply(state, e)
        out.append(state)
    return out


STATES = states_after(EVENTS)


def goal_alerts(lines: list[str]) -> Subscriber:
    sub = Subscriber("goal-alerts")

    @sub.on(Goal)
    async def alert(event: Goal, state: MatchState) -> None:
        lines.append(f"{event.clock.label} {event.scorer} - now {state.score}")

    return sub


async def publish(url: BrokerURL, topics: Topics, start: int, stop: int) -> None:
    """Publish EVENTS[start:stop] as the replayer does: each event, then its state retained."""
    async with MqttClient(url) as client:
        for event, state in zip(EVENTS[start:stop], STATES[start:stop], strict=True):
            await client.publish(topics.events(event.match_id), encode_event(event))
            await client.publish(topics.state(event.match_id), encode_state(state), retain=True)


@asynccontextmanager
async def consuming(
    url: BrokerURL, runner: Runner, **kwargs: object
) -> AsyncIterator[asyncio.Task[dict[str, MatchState]]]:
    """run_watch in the background, from subscribed until the block ends (or it does)."""
    watch = asyncio.create_task(run_watch(url, [], runner=runner, **kwargs))  # type: ignore[arg-type]
    subscribed = asyncio.create_task(runner.subscribed.wait())
    await asyncio.wait({watch, subscribed}, timeout=20, return_when=asyncio.FIRST_COMPLETED)
    subscribed.cancel()
    if watch.done():
        watch.result()  # raises what went wrong
    assert runner.subscribed.is_set(), "not subscribed after 20 s"
    try:
        yield watch
    finally:
        runner.stop()
        await asyncio.wait_for(watch, timeout=30)


async def test_goal_alerts_react_to_a_live_replay_despite_a_crashing_and_a_slow_handler(
    broker_url: BrokerURL, topics: Topics, client_kind: str
) -> None:
    lines: list[str] = []
    crashing, slow = Subscriber("crashing"), Subscriber("slow")

    @crashing.on(Goal)
    def boom(event: Goal, state: MatchState) -> None:
        raise RuntimeError("this subscriber has a bug")

    @slow.on(Goal, timeout=0.05)
    async def hangs(event: Goal, state: MatchState) -> None:
        await asyncio.sleep(3600)

    runner = Runner([crashing, slow, goal_alerts(lines)], topics=topics)
    until = {MATCH.match_id}
    async with consuming(broker_url, runner, until_finished=until, client=client_kind) as watch:
        await run_replay([MATCH], broker_url, ReplayOptions(speed=None, topics=topics))
        states = await asyncio.wait_for(asyncio.shield(watch), timeout=30)
    assert lines == GOAL_LINES
    assert (runner.stats.handler_errors, runner.stats.handler_timeouts) == (3, 3)
    assert runner.stats.duplicates == runner.stats.gaps == 0
    assert states[MATCH.match_id].scoreline == "ARG 2-1 ENG"


async def test_a_late_joiner_starts_from_the_retained_snapshot_then_goes_live(
    broker_url: BrokerURL, topics: Topics, client_kind: str
) -> None:
    k = next(e.seq for e in EVENTS if e.type == "goal") + 5  # after the first goal
    await publish(broker_url, topics, 0, k)
    seen: list[tuple[str, int]] = []
    lines: list[str] = []
    sub = goal_alerts(lines)
    sub.on()(lambda e, state: seen.append(("event", e.seq)))
    sub.on_state(lambda state: seen.append(("state", state.last_seq)))
    runner = Runner([sub], topics=topics)
    until = {MATCH.match_id}
    async with consuming(broker_url, runner, until_finished=until, client=client_kind) as watch:
        await publish(broker_url, topics, k, len(EVENTS))
        states = await asyncio.wait_for(asyncio.shield(watch), timeout=30)
    assert seen == [("state", k)] + [("event", s) for s in range(k + 1, len(EVENTS) + 1)]
    assert lines == GOAL_LINES[1:]
    assert states[MATCH.match_id] == STATES[-1]


@pytest.mark.mosquitto
async def test_a_slow_match_does_not_delay_another_on_a_live_broker(
    mosquitto_url: BrokerURL, topics: Topics
) -> None:
    other = MATCH.model_copy(update={"match_id": "sf-replayed-elsewhere"})
    sub = Subscriber("s")
    gate, other_done = asyncio.Event(), asyncio.Event()

    @sub.on(KickOff, match=MATCH.match_id)
    async def stuck(event: KickOff, state: MatchState) -> None:
        await gate.wait()

    sub.on(FullTime, match=other.match_id)(lambda e, state: other_done.set())
    runner = Runner([sub], topics=topics)
    both = {MATCH.match_id, other.match_id}
    async with consuming(mosquitto_url, runner, until_finished=both) as watch:
        await run_replay([MATCH, other], mosquitto_url, ReplayOptions(speed=None, topics=topics))
        await asyncio.wait_for(other_done.wait(), timeout=30)
        assert runner.states[MATCH.match_id].status == "finished", "the reader kept A's state"
        gate.set()
        await asyncio.wait_for(asyncio.shield(watch), timeout=30)
    assert runner.stats.handler_timeouts == 0


@pytest.mark.mosquitto
async def test_a_restarted_consumer_with_a_session_resumes_where_it_was(
    mosquitto_url: BrokerURL, topics: Topics, client_kind: str
) -> None:
    session = {
        "client_id": f"resume-{topics.root}",
        "clean_start": False,
        "session_expiry": 300,
        "client": client_kind,
    }

    def run(until_seq: int) -> tuple[Runner, list[tuple[str, int]], asyncio.Event]:
        seen: list[tuple[str, int]] = []
        reached = asyncio.Event()
        sub = Subscriber("resumer")

        @sub.on()
        def note(event: BaseEvent, state: MatchState) -> None:
            assert state.last_seq == event.seq
            seen.append(("event", event.seq))
            if event.seq == until_seq:
                reached.set()

        sub.on_state(lambda state: seen.append(("state", state.last_seq)))
        return Runner([sub], topics=topics), seen, reached

    first, seen1, reached1 = run(20)
    async with consuming(mosquitto_url, first, **session):
        await publish(mosquitto_url, topics, 0, 20)
        await asyncio.wait_for(reached1.wait(), timeout=30)
    await publish(mosquitto_url, topics, 20, 40)  # while nobody is connected
    second, seen2, reached2 = run(40)
    async with consuming(mosquitto_url, second, **session):
        await asyncio.wait_for(reached2.wait(), timeout=30)
    assert seen1 == [("event", s) for s in range(1, 21)]
    assert seen2 == [("event", s) for s in range(21, 41)]
    assert second.stats.gaps == 0


@pytest.mark.mosquitto
async def test_record_then_replay_the_recording_round_trips(
    mosquitto_url: BrokerURL, tmp_path: Path
) -> None:
    async def record(path: Path, source: object, topics: Topics) -> None:
        runner = Runner([Recorder(path)], topics=topics)
        async with consuming(mosquitto_url, runner, until_finished={MATCH.match_id}) as watch:
            options = ReplayOptions(speed=None, topics=topics)
            await run_replay([source], mosquitto_url, options)  # type: ignore[list-item]
            await asyncio.wait_for(asyncio.shield(watch), timeout=30)

    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    await record(first, MATCH, Topics("mctest-rec-a"))
    [recording] = load_recording(first)
    await record(second, recording, Topics("mctest-rec-b"))
    [again] = load_recording(second)
    strip = {"emitted_at", "scheduled_at", "run"}  # a replay of a recording is a new run
    assert [e.model_dump(exclude=strip) for e in again.events] == [
        e.model_dump(exclude=strip) for e in recording.events
    ]
    assert [e.model_dump(exclude=strip) for e in recording.events] == [
        e.model_dump(exclude=strip) for e in EVENTS
    ]
    assert [s.model_dump(exclude={"run"}) for s in again.states] == [
        s.model_dump(exclude={"run"}) for s in recording.states
    ]


# ---------------------------------------------------------------- the command


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """The CLI configures logging onto CliRunner's streams, which close after the test."""
    config = structlog.get_config()
    handlers = logging.getLogger().handlers[:]
    yield
    structlog.configure(**config)
    logging.getLogger().handlers[:] = handlers


@pytest.mark.usefixtures("restore_logging")
def test_consume_says_what_is_wrong_with_its_arguments() -> None:
    cli = CliRunner()
    cases = [
        (["consume", "no-such-plugin"], "no installed subscriber of that name"),
        (["consume", "scoreboard", "-o", "colour=red"], "no option colour"),
        (["consume", "scoreboard", "--session", "--qos", "0"], "--session needs --qos 1 or 2"),
        (["consume", "--list", "scoreboard"], "--list takes no plug-ins"),
        (["consume", "scoreboard", "scoreboard"], "two plug-ins share a name"),
        (["consume", "scoreboard", "--max-matches", "0"], "--max-matches"),
    ]
    for args, message in cases:
        result = cli.invoke(app, args)
        assert getattr(result.exception, "code", None) == 2, args
        assert message in " ".join(result.output.split()), args


@pytest.mark.usefixtures("restore_logging")
def test_consume_list_shows_the_built_ins() -> None:
    result = CliRunner().invoke(app, ["consume", "--list"], terminal_width=200)
    assert result.exit_code == 0
    for name in ("scoreboard", "ticker", "recorder", "stats"):
        assert name in result.output


class Consumer:
    """``python -m matchcast consume`` in a subprocess, with its output collected."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.args = [sys.executable, "-m", "matchcast", "consume", "--log-format", "json", *args]
        self.env = {**os.environ, **(env or {})}
        self.stderr: list[bytes] = []
        self.proc: asyncio.subprocess.Process | None = None
        self._drain: asyncio.Task[None] | None = None

    async def start(self) -> Consumer:
        self.proc = await asyncio.create_subprocess_exec(
            *self.args,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env,
            cwd=ROOT,
        )
        assert self.proc.stderr is not None
        async with asyncio.timeout(30):
            while b"consumer.started" not in b"".join(self.stderr[-1:]):
                line = await self.proc.stderr.readline()
                if not line:
                    raise AssertionError(b"".join(self.stderr).decode())
                self.stderr.append(line)
        self._drain = asyncio.create_task(self._read_rest())
        return self

    async def _read_rest(self) -> None:
        assert self.proc is not None
        assert self.proc.stderr is not None
        async for line in self.proc.stderr:
            self.stderr.append(line)

    async def __aenter__(self) -> Consumer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        if self._drain is not None:
            self._drain.cancel()

    async def finish(self) -> tuple[int, str, str]:
        assert self.proc is not None
        assert self.proc.stdout is not None
        async with asyncio.timeout(60):
            out = await self.proc.stdout.read()
            rc = await self.proc.wait()
            if self._drain is not None:
                await self._drain
        return rc, out.decode(), b"".join(self.stderr).decode()


SLOW_PLUGIN = """
import asyncio
from pathlib import Path
from consumers import Subscriber
from events import KickOff, MatchState

OUT = Path(__file__).with_suffix(".log")
sub = Subscriber("slow-writer")

@sub.on(KickOff)
async def slow(event: KickOff, state: MatchState) -> None:
    with OUT.open("a") as f:
        f.write(f"started {event.seq}\\n")
    await asyncio.sleep(1.0)
    with OUT.open("a") as f:
        f.write(f"finished {event.seq}\\n")

@sub.on_stop
def bye() -> None:
    with OUT.open("a") as f:
        f.write("stopped\\n")
"""


@pytest.mark.slow
@pytest.mark.mosquitto
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_a_stop_signal_lets_the_handler_in_flight_finish_then_exits_0(
    mosquitto_url: BrokerURL, topics: Topics, tmp_path: Path, sig: signal.Signals
) -> None:
    plugin = tmp_path / "slow_writer.py"
    plugin.write_text(textwrap.dedent(SLOW_PLUGIN))
    log = plugin.with_suffix(".log")
    args = [str(plugin), "--broker", str(mosquitto_url), "--root", topics.root]
    async with Consumer(*args) as consumer:
        await publish(mosquitto_url, topics, 0, 1)
        async with asyncio.timeout(30):
            while not log.exists():
                await asyncio.sleep(0.02)
        assert consumer.proc is not None
        consumer.proc.send_signal(sig)
        rc, _, stderr = await consumer.finish()
    assert rc == 0, stderr
    assert log.read_text().splitlines() == ["started 1", "finished 1", "stopped"]
    assert f'"signal": "{sig.name}"' in stderr
    assert "consumer.stopped" in stderr


@pytest.mark.slow
@pytest.mark.mosquitto
async def test_a_second_stop_signal_gives_up_on_the_handler_at_once(
    mosquitto_url: BrokerURL, topics: Topics, tmp_path: Path
) -> None:
    plugin = tmp_path / "slow_writer.py"
    plugin.write_text(textwrap.dedent(SLOW_PLUGIN).replace("sleep(1.0)", "sleep(3600)"))
    log = plugin.with_suffix(".log")
    args = [str(plugin), "--broker", str(mosquitto_url), "--root", topics.root]
    async with Consumer(*args, "--handler-timeout", "7200") as consumer:
        await publish(mosquitto_url, topics, 0, 1)
        async with asyncio.timeout(30):
            while not log.exists():
                await asyncio.sleep(0.02)
        assert consumer.proc is not None
        consumer.proc.send_signal(signal.SIGINT)
        async with asyncio.timeout(30):
            while not any(b"consumer.stopping" in line for line in consumer.stderr):
                await asyncio.sleep(0.02)
        consumer.proc.send_signal(signal.SIGINT)
        rc, _, stderr = await consumer.finish()
    assert rc == 130, stderr
    assert log.read_text().splitlines() == ["started 1", "stopped"], "stop hooks still ran"
    assert "consumer.abandoned" in stderr


SEQ_PLUGIN = """
from pathlib import Path
from consumers import Subscriber
from events import BaseEvent, MatchState

OUT = Path(__file__).with_suffix(".log")
sub = Subscriber("seq-writer")

@sub.on()
def note(event: BaseEvent, state: MatchState) -> None:
    with OUT.open("a") as f:
        f.write(f"{event.seq}\\n")

@sub.on_state
def joined(state: MatchState) -> None:
    with OUT.open("a") as f:
        f.write(f"state {state.last_seq}\\n")
"""


@pytest.mark.slow
@pytest.mark.mosquitto
async def test_consume_with_a_session_resumes_after_a_restart(
    mosquitto_url: BrokerURL, topics: Topics, tmp_path: Path, client_kind: str
) -> None:
    plugin = tmp_path / "seq_writer.py"
    plugin.write_text(textwrap.dedent(SEQ_PLUGIN))
    log = plugin.with_suffix(".log")
    args = [str(plugin), "--broker", str(mosquitto_url), "--root", topics.root, "--session"]
    args += ["--client", client_kind]

    async def run_until(lines: int, publish_from: int, publish_to: int) -> None:
        async with Consumer(*args) as consumer:
            await publish(mosquitto_url, topics, publish_from, publish_to)
            async with asyncio.timeout(30):
                while not log.exists() or len(log.read_text().splitlines()) < lines:
                    await asyncio.sleep(0.02)
            assert consumer.proc is not None
            consumer.proc.send_signal(signal.SIGTERM)
            rc, _, stderr = await consumer.finish()
            assert rc == 0, stderr

    await run_until(5, 0, 5)
    await publish(mosquitto_url, topics, 5, 10)  # while it is down
    await run_until(10, 10, 10)
    assert log.read_text().splitlines() == [str(s) for s in range(1, 11)]


@pytest.fixture(scope="module")
def example_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/goal-alerts pip-installed into a directory of its own, not into the venv."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(target),
            str(ROOT / "examples" / "goal-alerts"),
        ],
        check=True,
        capture_output=True,
    )
    return target


@pytest.mark.slow
def test_an_installed_example_package_is_listed(example_site: Path) -> None:
    listed = subprocess.run(
        [sys.executable, "-m", "matchcast", "consume", "--list"],
        env={**os.environ, "PYTHONPATH": str(example_site), "COLUMNS": "200"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "goal-alerts" in listed.stdout
    assert "matchcast-goal-alerts 0.1.0" in listed.stdout


@pytest.mark.slow
@pytest.mark.mosquitto
async def test_an_installed_example_package_runs_through_its_entry_point(
    mosquitto_url: BrokerURL, topics: Topics, tmp_path: Path, example_site: Path
) -> None:
    """PYTHONPATH makes the package installed: entry points are found on sys.path."""
    recording = tmp_path / "live.jsonl"
    args = [
        "goal-alerts",
        "recorder",
        "-o",
        f"recorder.path={recording}",
        "--broker",
        str(mosquitto_url),
        "--root",
        topics.root,
        "--match",
        MATCH.match_id,
        "--exit-at-full-time",
    ]
    async with Consumer(*args, env={"PYTHONPATH": str(example_site)}) as consumer:
        await run_replay([MATCH], mosquitto_url, ReplayOptions(speed=None, topics=topics))
        rc, stdout, stderr = await consumer.finish()
    assert rc == 0, stderr
    assert stdout.splitlines() == GOAL_LINES
    [recorded] = load_recording(recording)
    assert len(recorded.events) == len(EVENTS)
