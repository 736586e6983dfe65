"""What ``watch`` and ``web`` keep per match is bounded like the runner's matches: a flood of
made-up match ids makes the views forget the least recently updated, with a log line, instead
of growing for ever (RSS across floods: ``benchmarks/memory_flood.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import uuid

import pytest
from rich.console import Console
from structlog.testing import capture_logs

from consumers import Scoreboard
from consumers.scoreboard import KEEP_LINES
from consumers.terminal import MAX_BOARDS, TerminalView
from consumers.ticker import Ticker
from events import Event, MatchState, apply
from matchcast.transport.connection import BrokerURL
from matchcast.web import Hub
from simulator import expand, resolve_matches

KICKOFF: Event = next(s.event for s in expand(resolve_matches("semifinal")[0]))


def _kickoff(match_id: str) -> tuple[Event, MatchState]:
    event = KICKOFF.model_copy(update={"match_id": match_id})
    return event, apply(MatchState.new(match_id), event)


def test_the_page_forgets_the_least_recently_updated_matches_past_its_bound() -> None:
    hub = Hub(max_matches=100, queue_size=10_000, clock=lambda: 0.0)
    followed = hub.connect("m0")  # a browser follows the oldest one: kept
    with capture_logs() as logs:
        for i in range(1000):
            hub.publish(*_kickoff(f"m{i}"))
    ids = [m["match_id"] for m in hub.matches()]
    assert len(ids) <= 100
    assert "m0" in ids and "m999" in ids and "m500" not in ids
    assert hub.state("m0") is not None and hub.state("m500") is None
    forgotten = [e for e in logs if e["event"] == "web.matches_forgotten"]
    assert forgotten and sum(e["forgotten"] for e in forgotten) == hub.forgotten >= 900
    assert len(forgotten) < 200  # one line per sweep, not per match
    hub.disconnect(followed)


def test_the_terminal_view_keeps_and_draws_a_bounded_number_of_matches() -> None:
    view = TerminalView(Console(file=io.StringIO(), width=100), max_matches=100)
    with capture_logs() as logs:
        for i in range(1000):
            event, state = _kickoff(f"m{i}")
            view._on_event(event, state)
    assert len(view.board.states) <= 100
    assert "m999" in view.board.states
    assert any(e["event"] == "match.forgotten" for e in logs)
    drawn = view._render()
    assert len(drawn.renderables) == MAX_BOARDS + 2  # the "more" line, the boards, the ticker


def test_the_scoreboard_and_ticker_keep_bounded_states_and_lines() -> None:
    board = Scoreboard(echo=None, max_matches=50)
    ticker = Ticker(echo=None)
    for i in range(3 * KEEP_LINES):
        event, state = _kickoff(f"m{i}")
        board._on_event(event, state)
        ticker._on_event(event, state)
    assert len(board.states) <= 50
    assert KEEP_LINES <= len(board.lines) <= 2 * KEEP_LINES
    assert KEEP_LINES <= len(ticker.lines) <= 2 * KEEP_LINES
    assert board.lines[-1].startswith(f"m{3 * KEEP_LINES - 1} ")


async def test_the_runner_s_topic_cache_is_bounded_by_its_match_limit() -> None:
    """What the runner kept of every match it evicted: its topics, parsed (up to 100,000)."""
    from consumers import Runner
    from events import Message, Topics, encode_event

    topics = Topics("mctest-flood")
    runner = Runner([], topics=topics, max_matches=10)
    await runner.start()
    try:
        for i in range(200):
            event, _ = _kickoff(f"m{i}")
            await runner.feed(Message(topics.events(f"m{i}"), encode_event(event), 1))
        await runner.join()
        assert runner.tracked <= 10
        assert len(runner._parsed) <= 40
    finally:
        await runner.close(abandon=True)


async def test_a_rejected_message_keeps_nothing_of_its_match() -> None:
    """A flood of rejected messages on made-up match ids (a seq far past 0, a run starting in a
    week) is refused before a lane is made: it fills no place under the match limit, so it
    evicts no real match."""
    import time

    from consumers import Runner
    from events import Message, Topics, encode_event, encode_state

    topics = Topics("mctest-rejected")
    runner = Runner([], topics=topics, max_matches=10)
    await runner.start()
    try:
        real, _ = _kickoff("real")
        await runner.feed(Message(topics.events("real"), encode_event(real), 1))
        week = int(time.time() * 1000) + 7 * 24 * 3600 * 1000
        for i in range(100):
            event, _ = _kickoff(f"bad{i}")
            far = event.model_copy(update={"seq": 999_999})
            await runner.feed(Message(topics.events(f"bad{i}"), encode_event(far), 1))
            state = apply(MatchState.new(f"bad{i}"), event).model_copy(update={"run": week})
            await runner.feed(Message(topics.state(f"bad{i}"), encode_state(state), 1))
        await runner.join()
        assert runner.stats.rejected == 200
        assert list(runner._lanes) == ["real"]
        assert runner.stats.evicted == 0
    finally:
        await runner.close(abandon=True)


async def test_the_runner_caches_no_topic_whose_id_is_no_match_id() -> None:
    """A topic level may be 64 KiB long: the topic cache (4 entries a tracked match) held every
    such topic and its id until full, 12 GB at the default limit, with no match tracked."""
    from consumers import Runner
    from events import MAX_MATCH_ID, Message, Topics, encode_event

    topics = Topics("mctest-longtopic")
    runner = Runner([], topics=topics, max_matches=10)
    await runner.start()
    try:
        for i in range(30):
            match_id = f"m{i}-".ljust(10_000, "z")
            event, _ = _kickoff("m")
            await runner.feed(Message(topics.events(match_id), encode_event(event), 1))
        event, _ = _kickoff("real")
        await runner.feed(Message(topics.events("real"), encode_event(event), 1))
        await runner.join()
        assert runner.stats.rejected == 30  # a match id longer than MAX_MATCH_ID is refused
        assert list(runner._parsed) == [topics.events("real")]
        assert all(len(topic) < MAX_MATCH_ID + 40 for topic in runner._parsed)
    finally:
        await runner.close(abandon=True)


def test_consume_s_scoreboard_keeps_as_many_matches_as_the_runner() -> None:
    """``consume scoreboard --max-matches 10000`` kept 50,000 states in the scoreboard (its
    own default), so RSS grew across floods until 50,000 and a tracked match cost 17 KB."""
    from matchcast.cli.consume import _load

    (board,) = _load(["scoreboard"], [], 123)
    assert isinstance(board, Scoreboard) and board.states.limit == 123
    (board,) = _load(["scoreboard"], ["scoreboard.max_matches=7"], 123)  # an option wins
    assert isinstance(board, Scoreboard) and board.states.limit == 7


@pytest.mark.mosquitto
async def test_an_aiomqtt_reader_keeps_a_bounded_queue_of_unread_messages(
    mosquitto_url: BrokerURL,
) -> None:
    """aiomqtt queued every message received and not yet read, without limit: a flood piled
    up 130 to 250 MB in ``watch`` and ``web`` whatever their match limit. Past the bound a
    message is dropped and counted (one ``broker.messages_dropped`` line a second)."""
    from matchcast.transport.mqtt import MqttClient

    topic = f"mctest-queue-{uuid.uuid4().hex[:8]}/x"
    with capture_logs() as logs:
        async with (
            MqttClient(mosquitto_url, max_queued_incoming=5) as reader,
            MqttClient(mosquitto_url) as writer,
        ):
            await reader.subscribe(topic, qos=0)
            for i in range(50):
                await writer.publish(topic, str(i).encode(), qos=1)
            await asyncio.sleep(0.5)  # all 50 reached the reader, which read none
            got: list[bytes] = []
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    async for message in reader.messages():
                        got.append(message.payload)
    assert 5 <= len(got) <= 6, len(got)  # the bound, and one the reader had already taken
    dropped = [e for e in logs if e["event"] == "broker.messages_dropped"]
    assert dropped and dropped[0]["dropped"] >= 1


def test_free_text_of_a_match_is_bounded_whatever_its_version() -> None:
    """A kick_off whose team names and info were 60 KB each made a tracked match cost 130-280 KB.
    A name in a field 1.4 adds is refused past MAX_NAME; the free text of 1.0-1.3 is read (a
    minor refuses nothing an earlier one took, docs/wire-format.md) and cut."""
    import json

    import pytest

    from events import (
        MAX_EVENT_ID,
        MAX_NAME,
        MAX_TEXT,
        DecodeError,
        decode_event,
        decode_state,
        encode_event,
        encode_state,
    )
    from tests._factories import goal

    huge = "x" * 40_000  # six of them, under MAX_PAYLOAD_BYTES
    kickoff = json.loads(encode_event(KICKOFF))
    kickoff["home"]["name"] = kickoff["away"]["name"] = huge
    kickoff["info"] = dict.fromkeys(("competition", "stage", "venue", "city"), huge)
    for version in ("1.3", "1.4"):
        event = decode_event(json.dumps({**kickoff, "schema_version": version}).encode())
        assert event.type == "kick_off" and event.info is not None
        assert len(event.home.name) == len(event.away.name) == MAX_NAME
        assert len(event.info.venue or "") == MAX_TEXT
    state = apply(MatchState.new(event.match_id), event)
    scored = json.loads(encode_event(goal(2, 10, "ARG", {"ARG": 1, "ENG": 0}, match_id="m1")))
    scored.update(match_id=event.match_id, scorer=huge, detail=huge, goal_id=huge)
    state = apply(state, decode_event(json.dumps(scored).encode()))
    (kept,) = state.goals
    assert (len(kept.scorer), len(kept.detail or ""), len(kept.goal_id)) == (
        MAX_NAME,
        MAX_TEXT,
        MAX_EVENT_ID,
    )
    assert len(encode_state(state)) < 2_000
    snapshot = json.loads(encode_state(state))
    snapshot["home"]["name"] = huge
    assert decode_state(json.dumps(snapshot).encode()).home.name == "x" * MAX_NAME  # type: ignore[union-attr]

    shot = {**scored, "type": "shot", "shot_id": "s1", "player": "y" * (MAX_NAME + 1)}
    shot.update(outcome="saved", xg=0.1)
    for field in ("scorer", "detail", "goal_id", "score", "method"):
        shot.pop(field, None)
    with pytest.raises(DecodeError, match=f"player: String should have at most {MAX_NAME}"):
        decode_event(json.dumps(shot).encode())
    with pytest.raises(DecodeError, match=f"shot_id: String should have at most {MAX_EVENT_ID}"):
        decode_event(json.dumps({**shot, "player": "y", "shot_id": huge}).encode())


def test_team_keyed_maps_of_a_match_hold_two_teams_whatever_its_version() -> None:
    """One 256 KiB payload can name thousands of team codes: a goal's score, a snapshot's score,
    possession and shoot-out were kept whole (MAX_TEAMS). The maps of 1.0-1.3 are read and cut
    to the home and away teams'; ``stats`` and ``scoring_shots`` (1.4) refuse more."""
    import json

    import pytest

    from events import MAX_TEAMS, DecodeError, decode_event, decode_state, encode_state
    from tests._factories import goal

    assert MAX_TEAMS == 2
    many = {f"T{i:04d}": 1 for i in range(5_000)}  # before the two teams: they are not first
    state = apply(MatchState.new("m1"), KICKOFF.model_copy(update={"match_id": "m1"}))
    home, away = state.home.code, state.away.code  # type: ignore[union-attr]
    scored = json.loads(goal(2, 10, home, {}, match_id="m1").model_dump_json())
    scored["score"] = {**many, home: 1, away: 0}
    for version in ("1.3", "1.4"):
        event = decode_event(json.dumps({**scored, "schema_version": version}).encode())
        after = apply(state, event)
        assert after.score == {home: 1, away: 0}
        assert len(encode_state(after)) < 2_000

    snapshot = json.loads(encode_state(after))
    snapshot.update(
        score={**many, away: 0, home: 1},
        possession={**many, home: 60.0, away: 40.0},
        shootout={**many, home: 3},
    )
    for version in ("1.3", "1.4"):
        kept = decode_state(json.dumps({**snapshot, "schema_version": version}).encode())
        assert kept.score == {home: 1, away: 0}
        assert kept.possession == {home: 60.0, away: 40.0}
        assert kept.shootout is not None and len(kept.shootout) == MAX_TEAMS
        assert kept.shootout[home] == 3
        assert len(encode_state(kept)) < 2_000
    unknown_teams = {**snapshot, "home": None, "away": None}
    kept = decode_state(json.dumps(unknown_teams).encode())
    assert list(kept.score) == ["T0000", "T0001"]  # the teams unknown: the first two

    stats = {code: {"shots": 1} for code in (home, away, "T0000")}
    with pytest.raises(DecodeError, match=f"stats: Dictionary should have at most {MAX_TEAMS}"):
        decode_state(json.dumps({**snapshot, "stats": stats}).encode())
    shots = {f"s{i}": 0.1 for i in range(65)}
    with pytest.raises(DecodeError, match="scoring_shots: Dictionary should have at most 64"):
        decode_state(json.dumps({**snapshot, "scoring_shots": shots}).encode())
