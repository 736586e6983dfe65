"""The terminal view says what is true: the stretch of play a possession share covers, a
shoot-out's result, and names printed as they are."""

from __future__ import annotations

import io

from rich.console import Console

from consumers import MAX_MATCHES
from consumers.terminal import TerminalView
from events import MatchClock, MatchState, Possession, ReplayStopped, apply, replay_state
from matchcast.testing import Harness, match_events


def _screen(view: TerminalView) -> str:
    console = Console(width=100, record=True, force_terminal=False, emoji=False)
    console.print(view._render())
    return console.export_text()


async def test_possession_names_the_stretch_of_play_it_covers() -> None:
    """The semi-final's 88/12 covers 55'-86', not the match."""
    view = TerminalView(Console(file=io.StringIO(), force_terminal=False))
    async with Harness(view.subscriber) as h:
        await h.play()
    assert "possession 55'-86': ARG 88% · ENG 12%" in _screen(view)


async def test_a_view_that_joins_late_names_the_stretch_from_the_snapshot() -> None:
    """Joining at 88', after the 86' possession event: the state says 55'-86' (1.2)."""
    until_88 = MatchClock.at(88).sort_key
    events = [e for e in match_events("semifinal") if e.clock.sort_key <= until_88]
    late = _view()
    async with Harness(late.subscriber) as h:
        await h.play(events, start="88")  # the snapshot, then only the 88' clock
    assert not any(isinstance(e, Possession) for e in events if e.clock.minute >= 88)
    assert "possession 55'-86': ARG 88% · ENG 12%" in _screen(late)


async def test_a_snapshot_without_the_stretch_says_only_that_it_is_one() -> None:
    """A state written before 1.2 (no ``possession_since``/``until``) claims no stretch."""
    events = match_events("semifinal")
    state = replay_state(events[0].match_id, events)
    old = state.model_copy(update={"possession_since": None, "possession_until": None})
    late = _view()
    late._on_state(old)
    assert "possession over a stretch of play: ARG 88% · ENG 12%" in _screen(late)


async def test_a_shootout_shows_its_result_and_unnamed_takers_as_kicks() -> None:
    view = TerminalView(Console(file=io.StringIO(), force_terminal=False))
    async with Harness(view.subscriber) as h:
        await h.play("worldcup:2022/final")
    screen = _screen(view)
    assert "3 - 3" in screen
    assert "Argentina win 4-2 on penalties" in screen
    assert "PEN    kick 1 (ARG) scores" in screen
    assert "kicker" not in screen


def _view() -> TerminalView:
    return TerminalView(Console(file=io.StringIO(), force_terminal=False))


async def test_the_board_says_competition_stage_venue_and_kickoff() -> None:
    """From the state (what a late joiner gets), not only from the kick-off."""
    view = _view()
    async with Harness(view.subscriber) as h:
        await h.play(start="60")
    assert (
        "FIFA World Cup 2026 · Semi-final · Mercedes-Benz Stadium, Atlanta · 2026-07-15 15:00"
        in _screen(view)
    )


async def test_a_stopped_replay_shows_as_stopped_not_live() -> None:
    view = _view()
    events = match_events()[:8]
    last = events[-1]
    stop = ReplayStopped(
        match_id=last.match_id,
        seq=last.seq + 1,
        clock=last.clock,
        emitted_at=last.emitted_at,
        reason="interrupted",
    )
    async with Harness(view.subscriber) as h:
        await h.send(*events, stop)
    screen = _screen(view)
    assert "STOPPED" in screen
    assert f"replay stopped at 1H {last.clock.label}: not a final score" in screen
    assert "REPLAY STOPPED (interrupted)  ARG 0-0 ENG: not a final score" in screen
    assert f"1H {last.clock.label}" not in screen.replace(f"at 1H {last.clock.label}", "")


async def test_a_match_whose_replayer_went_offline_says_so_until_events_come_again() -> None:
    view = _view()
    events = match_events()
    async with Harness(view.subscriber) as h:
        await h.send(*events[:8])
        view.replayer_status(events[0].match_id, "offline")
        assert "replayer offline: no more events coming" in _screen(view)
        assert "REPLAYER OFFLINE" in _screen(view)
        await h.send(events[8])
        assert "replayer offline" not in _screen(view)
        # The ticker says it too: where the output is no terminal, the OFFLINE line stood
        # alone for good after a replayer's failover (a newcomer's NATS run).
        assert "REPLAYER ONLINE" in _screen(view)
        await h.send(*events[9:])
        view.replayer_status(events[0].match_id, "offline")
    assert "replayer offline" not in _screen(view)  # finished: nothing is missing


async def test_replayer_statuses_of_matches_not_shown_are_bounded() -> None:
    """Statuses naming ever new match ids keep a bounded set; one that came before its match's
    state still marks the match offline when the state comes."""
    view = _view()
    events = match_events()
    view.replayer_status(events[0].match_id, "offline")
    for i in range(MAX_MATCHES + 10):
        view.replayer_status(f"made-up-{i}", "offline")
    view.replayer_status(events[0].match_id, "offline")
    assert len(view._offline) == MAX_MATCHES
    view._on_state(replay_state(events[0].match_id, events[:8]))
    assert "replayer offline: no more events coming" in _screen(view)


def test_a_new_run_of_a_match_is_marked_in_the_ticker() -> None:
    """The previous run's JOINED at full time, then the new replay's kick-off: a line says a
    new run began; a seek's snapshot says NEW RUN, not JOINED."""
    events = match_events("semifinal")
    old = replay_state(events[0].match_id, events)
    out = io.StringIO()
    view = TerminalView(Console(file=out, force_terminal=False, width=100))
    view._on_state(old)
    again = [e.model_copy(update={"run": old.run + 1}) for e in events[:2]]
    state = MatchState.new(old.match_id, run=old.run + 1)
    for event in again:
        state = apply(state, event)
        view._on_event(event, state)
    lines = out.getvalue().splitlines()
    assert "JOINED  ARG 2-1 ENG  (FT)" in lines[0]
    assert lines[1].strip() == f"NEW RUN  {old.match_id}: replayed again from here"
    assert "KICK-OFF" in lines[2]
    view._on_state(state.model_copy(update={"run": old.run + 2}))
    assert "NEW RUN  ARG 0-0 ENG" in out.getvalue().splitlines()[-1]


async def test_watch_shows_the_stats_on_one_line_and_prints_it_at_the_breaks() -> None:
    """On a terminal, under the score; in a pipe, at half time and full time."""
    out = io.StringIO()
    view = TerminalView(Console(file=out, force_terminal=False, width=200))
    async with Harness(view.subscriber) as h:
        await h.play()
    line = "shots 22-8 · on target 8-3 · xG 2.16-0.72 · corners 11-3 · fouls 12-16 · offsides 3-2"
    assert line in _screen(view)
    printed = [p for p in out.getvalue().splitlines() if "STATS" in p]
    assert len(printed) == 2 and printed[-1] == f"{'':<7}STATS  {line}"
    assert printed[0].startswith(f"{'':<7}STATS  shots 5-3 · on target 1-1")  # half time


async def test_a_lean_feed_shows_no_stats_line() -> None:
    from simulator import expand, lean_match, resolve_matches

    events = [s.event for s in expand(lean_match(resolve_matches("semifinal")[0]))]
    out = io.StringIO()
    view = TerminalView(Console(file=out, force_terminal=False))
    async with Harness(view.subscriber) as h:
        await h.play(events)
    assert "STATS" not in out.getvalue() and "shots" not in _screen(view)
