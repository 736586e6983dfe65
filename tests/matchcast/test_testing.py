"""The test kit for plug-in authors: what the harness feeds and what it lets a test see."""

from __future__ import annotations

from pathlib import Path

import pytest
import structlog

from consumers import Recorder, Scoreboard, Subscriber
from events import BaseEvent, Goal, MatchState, Message, Topics
from matchcast import testing
from matchcast.testing import Harness, match_events, play
from simulator import bundled_path

EVENTS = match_events()


def counting() -> Subscriber:
    sub = Subscriber("count")

    @sub.on()
    def every(event: BaseEvent, state: MatchState) -> None: ...

    @sub.on(Goal)
    def goal(event: Goal, state: MatchState) -> None: ...

    return sub


@pytest.mark.parametrize("source", ["semifinal", str(bundled_path("semifinal")), "list"])
async def test_play_takes_a_bundled_name_a_match_file_or_events(source: str) -> None:
    async with Harness(counting()) as h:
        await h.play(EVENTS if source == "list" else source)
    assert len(h.seen()) == len(EVENTS)
    assert [e.scorer for e in h.seen(Goal)] == [
        "Anthony Gordon",
        "Enzo Fernández",
        "Lautaro Martínez",
    ]
    assert h.state().scoreline == "ARG 2-1 ENG"


async def test_play_takes_a_recording(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    async with Harness(Recorder(path)) as h:
        await h.play()
    async with Harness(counting()) as h:
        await h.play(path)
    assert h.seen() == EVENTS


async def test_calls_are_recorded_and_found_by_handler_name() -> None:
    async with Harness(counting(), Scoreboard(echo=None)) as h:
        await h.play()
    assert len(h.calls_to("goal")) == len(h.calls_to("count.goal")) == 3
    assert len(h.calls_to("Scoreboard._on_event")) == len(EVENTS)
    call = h.calls_to("goal")[0]
    assert (call.subscriber, call.outcome, call.error) == ("count", "ok", None)
    assert call.event is not None
    assert call.state.last_seq == call.event.seq


async def test_raw_messages_and_several_matches() -> None:
    topics = Topics("custom")
    other = [e.model_copy(update={"match_id": "other"}) for e in EVENTS[:5]]
    async with Harness(counting(), topics=topics, match_filter="+") as h:
        await h.send(Message("custom/matches/x/events", b"{}"), Message("elsewhere", b"?"))
        await h.play(EVENTS[:5])
        await h.play(other)
    assert h.stats.rejected == 1
    assert set(h.states) == {EVENTS[0].match_id, "other"}
    assert h.state("other").last_seq == 5
    with pytest.raises(LookupError, match="say which match"):
        h.state()


async def test_logs_are_captured_unless_told_not_to() -> None:
    async with Harness(counting()) as h:
        await h.send(EVENTS[0])
    assert h.logged("consumer.stopped")
    with structlog.testing.capture_logs() as outer:
        async with Harness(counting(), capture_logs=False) as h:
            await h.send(EVENTS[0])
    assert h.logs == []
    assert any(e["event"] == "consumer.stopped" for e in outer)


def test_the_kit_exports_what_the_docs_name() -> None:
    assert testing.__all__ == [
        "REQUIRE_ENV",
        "FaultProxy",
        "Harness",
        "Mosquitto",
        "match_events",
        "mosquitto_binary",
        "play",
        "wait_port",
    ]
    assert repr(Harness(counting())) == "Harness(count, calls=0)"


def test_play_runs_a_match_from_a_plain_synchronous_test() -> None:
    h = play(counting(), match="semifinal", start=60, handler_timeout=1.0)
    assert [e.scorer for e in h.seen(Goal)] == ["Enzo Fernández", "Lautaro Martínez"]
    assert h.runner.handler_timeout == 1.0


@pytest.mark.parametrize("start", [0, 121, "130+2", "half time", "90+x"])
def test_a_start_that_is_no_minute_of_play_is_a_value_error(start: int | str) -> None:
    """As docs/subscribers.md says: a ValueError saying how a minute is written (a
    StopIteration once escaped for a minute past 120, and int()'s own error for words)."""
    expected = "is past the end of play" if start in (121, "130+2") else "a minute is written like"
    with pytest.raises(ValueError, match=expected):
        play(counting(), match="semifinal", start=start)


async def test_play_continues_the_publishers_state_across_calls() -> None:
    """The snapshots of a second play() carry what the first one played."""
    async with Harness(counting()) as h:
        await h.play(EVENTS[:50])
        await h.play(EVENTS[50:], lose=range(51, 56))
    assert h.stats.resyncs == 1
    assert h.state().home is not None
    assert h.state() == h.runner.states[EVENTS[0].match_id]
    assert h.state().goals[0].scorer == "Anthony Gordon"


@pytest.mark.mosquitto
def test_a_mosquitto_that_will_not_start_says_why_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process ended: its own words come back as a RuntimeError, at once, not after the
    port's timeout; one that lives on but never listens is ended and reported too."""
    binary = testing.mosquitto_binary()
    assert binary is not None

    def no_port(host: str, port: int, timeout: float = 10.0, **kwargs: object) -> None:
        raise TimeoutError(f"nothing listens on {host}:{port}")

    for name in ("first", "second"):
        (tmp_path / name).mkdir()
    broker = testing.Mosquitto(binary, extra=["bogus_option 1"], workdir=tmp_path / "first")
    with pytest.raises(RuntimeError, match=r"mosquitto did not start.*bogus_option"):
        broker.start()
    assert broker.proc is not None
    assert broker.proc.poll() is not None
    broker.close()
    # a broker that never listens, while its process lives on, is ended and says so too
    monkeypatch.setattr("matchcast.testbroker.wait_port", no_port)
    broker = testing.Mosquitto(binary, workdir=tmp_path / "second")
    with pytest.raises(RuntimeError, match="mosquitto did not start"):
        broker.start()
    assert broker.proc is not None
    assert broker.proc.poll() is not None
    broker.close()
