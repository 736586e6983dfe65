"""The built-in subscribers: scoreboard, ticker, recorder, stats, run through the harness."""

from __future__ import annotations

import json
from pathlib import Path

from consumers import Recorder, Scoreboard, Stats, Ticker
from events import ClockTick, Goal, MatchClock, MatchState, apply, decode_event, replay_state
from matchcast.testing import Harness, match_events
from simulator import load_recording

EVENTS = match_events()
MATCH = EVENTS[0].match_id


async def test_the_scoreboard_keeps_the_state_and_says_when_the_score_changes() -> None:
    printed: list[str] = []
    board = Scoreboard(echo=printed.append)
    async with Harness(board) as h:
        await h.play()
    assert board.states[MATCH] == h.state() == replay_state(MATCH, EVENTS)
    assert printed == board.lines
    assert [line.split()[-3:] for line in printed[:-2]] == [
        ["ARG", "0-0", "ENG"],  # kick-off
        ["ARG", "0-0", "ENG"],  # half time
        ["ARG", "0-0", "ENG"],  # second half
        ["ARG", "0-1", "ENG"],
        ["ARG", "1-1", "ENG"],
        ["ARG", "2-1", "ENG"],
        ["ARG", "2-1", "ENG"],  # full time
    ]
    assert printed[-2:] == ["scoreboard:", f"  {MATCH}  FT        ARG 2-1 ENG"]


async def test_the_ticker_prints_one_line_per_event_but_clock_ticks() -> None:
    ticker = Ticker(echo=None, match_ids=True)
    async with Harness(ticker) as h:
        await h.play()
    state = MatchState.new(MATCH)
    said = []
    for e in EVENTS:  # every event but the silent ones: ticks, and what the stats only count
        state = apply(state, e)
        said += [e] if e.commentary(state) is not None else []
    assert len(ticker.lines) == len(said)
    assert not any(isinstance(e, ClockTick) for e in said)
    goals = [line for line in ticker.lines if " GOAL " in line]
    assert goals == [
        f"{MATCH}  55'    GOAL  Anthony Gordon (ENG)  0-1",
        f"{MATCH}  86'    GOAL  Enzo Fernández (ARG)  1-1",
        f"{MATCH}  90+2'  GOAL  Lautaro Martínez (ARG)  2-1",
    ]
    assert ticker.lines[-1].endswith("FULL TIME  ARG 2-1 ENG")


async def test_stats_report_the_goals_timeline_and_possession_once_at_full_time() -> None:
    reports: list[str] = []
    stats = Stats(echo=reports.append)
    async with Harness(stats) as h:
        await h.play()
    [report] = reports
    assert report.splitlines()[0] == f"{MATCH}  FT  ARG 2-1 ENG"
    assert [(g.clock, g.team, g.scorer, g.score) for g in stats.matches[MATCH].goals] == [
        ("55'", "ENG", "Anthony Gordon", "0-1"),
        ("86'", "ARG", "Enzo Fernández", "1-1"),
        ("90+2'", "ARG", "Lautaro Martínez", "2-1"),
    ]
    assert "possession   55'-86'  ARG 88% · ENG 12%" in report


async def test_stats_of_a_late_joiner_know_the_goals_before_it_joined() -> None:
    reports: list[str] = []
    async with Harness(Stats(echo=reports.append)) as h:
        await h.play(start="90")
    assert "Anthony Gordon" in reports[0]
    assert "possession   55'-86'" not in reports[0], "that report came before it joined"
    assert "possession   latest  ARG 88% · ENG 12%" in reports[0]


async def test_stats_report_an_unfinished_match_when_the_consumer_stops() -> None:
    reports: list[str] = []
    async with Harness(Stats(echo=reports.append)) as h:
        await h.play([e for e in EVENTS if e.clock.sort_key < MatchClock.at(64).sort_key])
        assert reports == []
    assert reports[0].splitlines()[0] == f"{MATCH}  2H 63'  ARG 0-1 ENG"


async def test_the_recorder_writes_each_event_as_on_the_wire(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "match.jsonl"
    rec = Recorder(path)
    async with Harness(rec) as h:
        await h.play()
    lines = path.read_bytes().splitlines()
    assert [decode_event(line) for line in lines] == EVENTS
    assert rec.written == len(EVENTS)
    [recording] = load_recording(path)
    assert recording.events == tuple(EVENTS)
    assert recording.states[-1] == h.state()


async def test_a_recording_joined_mid_match_starts_with_the_snapshot(tmp_path: Path) -> None:
    path = tmp_path / "late.jsonl"
    async with Harness(Recorder(path)) as h:
        await h.play(start=60)
    first = json.loads(path.read_bytes().splitlines()[0])
    assert set(first) == {"snapshot"}
    [recording] = load_recording(path)
    assert recording.initial.last_seq == first["snapshot"]["last_seq"]
    assert recording.initial.score == {"ARG": 0, "ENG": 1}
    assert recording.states[-1] == h.state()


async def test_the_recorder_appends_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    goals = [e for e in EVENTS if isinstance(e, Goal)]
    for _ in range(2):
        async with Harness(Recorder(path, append=True)) as h:
            await h.send(*goals)
    assert len(path.read_bytes().splitlines()) == 6
