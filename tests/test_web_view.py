"""The page's words come from the server: each event's ticker row, the clock display, the status
label, the goals' labels and the span of the controls' timeline. These are the words the page's script used to compute itself
(checked against it, case by case, when they moved here), so the page reads as it did."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from events import Event, MatchState, Period, ReplayStopped, apply
from matchcast.contract.wire_examples import example_events
from matchcast.web import Hub
from matchcast.web._view import page_clock, page_timeline, page_view, ticker_row
from simulator import expand, resolve_matches

SEMI = resolve_matches("semifinal")[0]
STATIC = Path(__file__).parents[1] / "matchcast" / "web" / "static"

ROWS = {
    "kick_off": ("1'", "KICK-OFF", "Argentina v England"),
    "clock": None,
    "period_end": ("45+3'", "HALF TIME", "ARG 0-0 ENG"),
    "goal": ("55'", "GOAL", "Anthony Gordon (ENG). ARG 0-1 ENG"),
    "goal_disallowed": (
        "84'",
        "NO GOAL",
        "RED goal ruled out: offside in the build-up, after a VAR review. RED 1-1 BLU",
    ),
    "possession": ("86'", "POSSESSION", "ENG 12% · ARG 88% over 55'\u201386'"),
    "card": ("67'", "YELLOW CARD", "Jonas Berg (BLU)"),
    "substitution": ("72'", "SUB", "RED: Sami Haddad on, Luca Moretti off"),
    "shootout_kick": ("PEN", "PENALTY", "Jonas Berg (BLU) scores"),
    "full_time": ("90+5'", "FULL TIME", "ARG 2-1 ENG"),
    "replay_stopped": ("52'", "REPLAY STOPPED", ": not a final score"),
}


@pytest.mark.parametrize(
    "event", [e for e in example_events() if e.type in ROWS], ids=lambda e: e.type
)
def test_each_example_reads_on_the_page_as_before(event: Event) -> None:
    """The types the script once worded (a newer type's words are its own tests')."""
    state = apply(MatchState.new(event.match_id), event)
    row = ticker_row(event, state)
    expected = ROWS[event.type]
    if expected is None:
        assert row is None
        return
    assert row == dict(zip(("minute", "kind", "text"), expected, strict=True), style=event.type)


def _states() -> list[MatchState]:
    state = MatchState.new(SEMI.match_id)
    out = []
    for item in expand(SEMI):
        state = apply(state, item.event)
        out.append(state)
    return out


def test_clock_status_and_goals_as_the_page_shows_them() -> None:
    states = _states()
    by_status = {s.status: s for s in states}
    assert page_clock(by_status["live"]).startswith(("1H ", "2H "))
    assert page_clock(by_status["half_time"]) == "HT"
    final = states[-1]
    view = page_view(final)
    assert (view["clock"], view["status"]) == ("FT", "Full time")
    assert view["goals"] == [
        {"how": g.detail, "tag": "", "x": g.clock.minute + g.clock.added / 10} for g in final.goals
    ]  # the semi-final's goals all have a detail; x: their place on the timelines
    assert view["joined"][-1] == {
        "minute": "FT",
        "kind": "JOINED",
        "text": "ARG 2-1 ENG: final score",
        "style": "joined",
    }
    assert [r["text"] for r in view["joined"][:-1]] == [  # as the live rows, less the score
        "Anthony Gordon (ENG)",
        "Enzo Fernández (ARG), header",
        "Lautaro Martínez (ARG), header",
    ]


def test_a_stopped_replay_shows_where_it_stopped() -> None:
    state = _states()[70]
    stopped = ReplayStopped(
        match_id=state.match_id,
        seq=state.last_seq + 1,
        clock=state.clock,
        emitted_at="2026-07-15T20:00:00Z",
        reason="error",
    )
    after = apply(state, stopped)
    assert state.clock is not None
    view = page_view(after)
    assert view["clock"] == f"at {state.clock.period.short} {state.clock.label}"
    assert view["status"] == "Replay stopped"
    assert ticker_row(stopped, after) == {
        "minute": state.clock.label,
        "kind": "REPLAY STOPPED",
        "text": f"{after.scoreline}: not a final score (replayer error)",
        "style": "replay_stopped",
    }


async def test_frames_carry_the_view_and_the_row() -> None:
    hub = Hub()
    state = MatchState.new(SEMI.match_id)
    client = hub.connect(SEMI.match_id)
    for item in expand(SEMI)[:2]:
        state = apply(state, item.event)
        hub.publish(item.event, state)
    frames = []
    while not client.queue.empty():
        frame = client.queue.get_nowait()
        assert frame is not None
        frames.append(frame.data.decode())
    updates = [json.loads(f.split("data: ", 1)[1]) for f in frames if "event: update" in f]
    kick_off, tick = updates
    assert kick_off["ticker"]["kind"] == "KICK-OFF" and kick_off["view"]["status"] == "Live"
    assert kick_off["line"].split() == ["1'", "KICK-OFF", "Argentina", "v", "England"]
    assert tick["ticker"] is None and tick["line"] is None and tick["view"]["clock"] == "1H 1'"
    snapshot = hub._snapshot_frame(state).data.decode()
    assert json.loads(snapshot.split("data: ", 1)[1])["view"]["clock"] == "1H 1'"


def test_the_pages_script_knows_no_event_type_and_no_football_words() -> None:
    """The words moved to the server must not grow back in app.js: it reads no event's
    ``type`` and holds none of the ticker's, the clock's or the status pill's words."""
    js = (STATIC / "app.js").read_text()
    assert ".type" not in js
    for word in ("KICK-OFF", "HALF TIME", "NO GOAL", "FULL TIME", '"1H"', '"ET1"', "Not started"):
        assert word not in js, word


def _states_of(spec: str) -> list[MatchState]:
    [match] = resolve_matches(spec)
    state = MatchState.new(match.match_id)
    states = [state]
    for item in expand(match):
        state = apply(state, item.event)
        states.append(state)
    return states


def test_the_timeline_spans_regulation_time_then_extra_time_once_it_is_played() -> None:
    """What control.js once computed itself (``period >= 3 ? 120 : 90``), from the clock's
    vocabulary: 1-90, and 1-120 from the first minute of extra time (the shoot-out too)."""
    final = _states_of("worldcup:2022/final")  # ARG 3-3 FRA, 4-2 on penalties
    spans = {(s.clock.period if s.clock else None, page_timeline(s)["last"]) for s in final}
    assert spans == {
        (None, 90),
        (Period.FIRST_HALF, 90),
        (Period.SECOND_HALF, 90),
        (Period.EXTRA_TIME_FIRST, 120),
        (Period.EXTRA_TIME_SECOND, 120),
        (Period.PENALTIES, 120),
    }
    assert {page_timeline(s)["first"] for s in final} == {1}
    assert page_view(_states()[-1])["timeline"] == {"first": 1, "last": 90}


def test_the_controls_script_holds_no_period_length() -> None:
    """The timeline's span is the server's (``view.timeline``): no 45, 90, 105 or 120 (nor a
    period's first minute) may come back into control.js."""
    js = (STATIC / "control.js").read_text()
    bounds = {str(m) for p in Period for m in (p.first_minute, p.last_minute, p.length) if m > 5}
    assert bounds >= {"45", "90", "105", "120", "15"}
    assert sorted(set(re.findall(r"\b\d+\b", js)) & bounds) == []
    assert "view.timeline" in js
