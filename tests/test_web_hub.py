"""The web hub: snapshots, Last-Event-ID resume, bounded per-browser queues, the match list."""

from __future__ import annotations

import json

from structlog.testing import capture_logs

import matchcast.web
from consumers import MAX_MATCHES
from events import Event, MatchState, apply
from matchcast.web import Client, Frame, Hub
from matchcast.web._hub import RESUME_GRACE_S
from simulator import expand, lean_match, resolve_matches

#: The lean feed: the hub's frames, whatever the events; its seqs are pinned below.
SEMI = lean_match(resolve_matches("semifinal")[0])
EVENTS: list[Event] = [s.event for s in expand(SEMI)]


def _states(events: list[Event]) -> list[MatchState]:
    state = MatchState.new(events[0].match_id)
    out = []
    for e in events:
        state = apply(state, e)
        out.append(state)
    return out


STATES = _states(EVENTS)


def _feed(hub: Hub, upto: int, start: int = 0) -> None:
    for event, state in zip(EVENTS[start:upto], STATES[start:upto], strict=True):
        hub.publish(event, state)


def _a_browser_left(hub: Hub) -> None:
    """A browser that followed the semi-final and whose stream just broke: the hub keeps the
    match's frames for it to resume (for ``RESUME_GRACE_S``)."""
    hub.disconnect(hub.connect(SEMI.match_id))


def _queued(client: Client) -> list[Frame]:
    out = []
    while not client.queue.empty():
        frame = client.queue.get_nowait()
        assert frame is not None
        out.append(frame)
    return out


def _kinds(frames: list[Frame]) -> list[tuple[str, int | None]]:
    return [(f.data.split(b"\n", 1)[0].decode().removeprefix("event: "), f.seq) for f in frames]


def test_exported_names() -> None:
    assert matchcast.web.__all__ == [
        "Client",
        "ControlSender",
        "Frame",
        "HttpGuard",
        "Hub",
        "HubStats",
        "WebServer",
        "bound_to_loopback",
        "bridge",
        "check_allowed_host",
    ]


async def test_new_browser_gets_match_list_then_snapshot_then_live_updates() -> None:
    hub = Hub()
    _feed(hub, 62)  # up to Gordon's goal
    client = hub.connect(SEMI.match_id)
    assert _kinds(client.backlog) == [("matches", None), ("state", 62)]
    snapshot = json.loads(client.backlog[1].data.split(b"data: ", 1)[1])["state"]
    assert snapshot["score"] == {"ARG": 0, "ENG": 1}
    _feed(hub, 64, start=62)
    frames = _queued(client)
    assert _kinds(frames) == [("update", 63), ("update", 64)]
    assert frames[0].data.startswith(b"event: update\nid: 63\ndata: {")


async def test_update_carries_event_state_and_ticker_line() -> None:
    hub = Hub()
    _feed(hub, 61)
    client = hub.connect(SEMI.match_id)
    _feed(hub, 62, start=61)
    (frame,) = [f for f in _queued(client) if f.seq == 62]
    body = json.loads(frame.data.split(b"data: ", 1)[1])
    assert body["event"]["scorer"] == "Anthony Gordon"
    assert body["state"]["score"] == {"ARG": 0, "ENG": 1}
    assert "GOAL" in body["line"]


async def test_last_event_id_resumes_with_the_events_after_it() -> None:
    hub = Hub()
    _feed(hub, 1)
    _a_browser_left(hub)
    _feed(hub, 80, start=1)
    client = hub.connect(SEMI.match_id, last_event_id=70)
    assert _kinds(client.backlog)[1:] == [("update", s) for s in range(71, 81)]
    assert hub.stats.resumed == 1


async def test_last_event_id_up_to_date_gets_nothing_but_the_list() -> None:
    hub = Hub()
    _feed(hub, 80)
    client = hub.connect(SEMI.match_id, last_event_id=80)
    assert _kinds(client.backlog) == [("matches", None)]


async def test_last_event_id_older_than_the_history_gets_the_snapshot() -> None:
    hub = Hub(history=10)
    _feed(hub, 80)
    client = hub.connect(SEMI.match_id, last_event_id=5)
    assert _kinds(client.backlog)[1:] == [("state", 80)]


async def test_last_event_id_from_the_future_gets_the_snapshot() -> None:
    """A browser that saw a previous run (a higher seq) starts again from the snapshot."""
    hub = Hub()
    _feed(hub, 10)
    client = hub.connect(SEMI.match_id, last_event_id=99)
    assert _kinds(client.backlog)[1:] == [("state", 10)]


async def test_full_queue_drops_that_browser_only() -> None:
    hub = Hub(queue_size=5)
    _feed(hub, 1)
    slow = hub.connect(SEMI.match_id)
    fast = hub.connect(SEMI.match_id)
    aborted: list[bool] = []
    slow.abort = lambda: aborted.append(True)
    received: list[int] = []
    with capture_logs() as logs:
        for i in range(1, 30):
            _feed(hub, i + 1, start=i)
            received += [f.seq for f in _queued(fast) if f.seq is not None]
    assert [e for e in logs if e["event"] == "browser.dropped"] == [
        {
            "event": "browser.dropped",
            "log_level": "warning",
            "match_id": SEMI.match_id,
            "reason": "queue_full",
            "queue_size": 5,
        }
    ]
    assert received == list(range(2, 31))
    assert slow.dropped
    assert aborted == [True]
    assert slow.queue.get_nowait() is None  # wakes its writer, which then closes
    assert hub.stats.clients_dropped == 1
    assert hub.stats.clients_connected == 1


async def test_adopted_state_clears_history_and_is_pushed() -> None:
    """After a gap the runner adopts the retained snapshot; resumes before it get the snapshot."""
    hub = Hub()
    _feed(hub, 20)
    client = hub.connect(SEMI.match_id)
    hub.adopt(STATES[39])
    assert _kinds(_queued(client)) == [("state", 40)]
    late = hub.connect(SEMI.match_id, last_event_id=15)
    assert _kinds(late.backlog)[1:] == [("state", 40)]


async def test_match_changes_are_pushed_on_score_changes_not_on_clock_ticks() -> None:
    hub = Hub()
    _feed(hub, 1)
    lobby = hub.connect(None)
    assert _kinds(lobby.backlog) == [("matches", None)]
    _feed(hub, 61, start=1)  # ticks, half time (a status change), restart
    assert [k for k, _ in _kinds(_queued(lobby))] == ["match", "match"]
    _feed(hub, 62, start=61)  # the goal
    (frame,) = _queued(lobby)
    changed = json.loads(frame.data.split(b"data: ", 1)[1])["match"]
    assert (changed["match_id"], changed["score"]) == (SEMI.match_id, {"ARG": 0, "ENG": 1})


def _new_match_bytes(hub: Hub, client: Client, n: int) -> int:
    """Bytes queued for ``client`` when match number ``n`` (a fresh id) starts."""
    event = EVENTS[0].model_copy(update={"match_id": f"m{n:06d}"})
    hub.publish(event, apply(MatchState.new(event.match_id), event))
    return sum(len(f.data) for f in _queued(client))


async def test_bytes_per_new_match_do_not_grow_with_the_number_of_matches() -> None:
    """3,000 new ids used to push the whole list each time (686 MB to one browser); now each
    new match costs a browser one entry, the same at the 10th match as at the 3,000th."""
    hub = Hub(queue_size=10_000)
    lobby = hub.connect(None)
    follower = hub.connect("m000000")
    sizes = [_new_match_bytes(hub, lobby, n) for n in range(3000)]
    assert sizes[10] == sizes[2999] > 0
    assert sum(sizes) < 3000 * 1000
    _queued(follower)
    assert _new_match_bytes(hub, follower, 3000) == sizes[10]
    late = hub.connect(None)  # a browser that joins now gets the whole list, once
    (listed,) = late.backlog
    assert len(json.loads(listed.data.split(b"data: ", 1)[1])["matches"]) == 3001


async def test_disconnect_is_idempotent() -> None:
    hub = Hub()
    client = hub.connect("m1")
    hub.disconnect(client)
    hub.disconnect(client)
    assert hub.stats.clients_connected == 0


async def test_unknown_match_is_forgotten_when_its_last_browser_leaves() -> None:
    hub = Hub()
    client = hub.connect("made-up")
    hub.disconnect(client)
    assert hub.state("made-up") is None
    assert "made-up" not in hub._channels


async def test_a_replayer_status_naming_unknown_matches_makes_no_channel() -> None:
    """A status listing match ids the hub has no state for costs no channel each: the hub
    remembers a bounded number of those statuses, and applies one when its match appears."""
    hub = Hub()
    hub.replayer_status(SEMI.match_id, "offline")
    for i in range(MAX_MATCHES + 10):
        hub.replayer_status(f"made-up-{i}", "offline")
    assert hub._channels == {}
    assert len(hub._early_replayers) == MAX_MATCHES
    assert SEMI.match_id not in hub._early_replayers  # the oldest named is forgotten first
    hub.replayer_status(SEMI.match_id, "offline")
    hub.adopt(STATES[7])  # its retained state, after its replayer's retained status
    client = hub.connect(SEMI.match_id)
    assert _kinds(client.backlog) == [("matches", None), ("state", 8), ("replayer", None)]
    assert b'"status": "offline"' in client.backlog[-1].data
    hub.disconnect(client)
    browser = hub.connect("made-up-20")  # a browser of a match without state, then gone
    assert _kinds(browser.backlog)[-1] == ("replayer", None)
    hub.disconnect(browser)
    assert "made-up-20" not in hub._channels
    assert hub._early_replayers["made-up-20"] == "offline"  # still known for its state


async def test_a_new_run_is_not_resumed_among_the_old_runs_frames() -> None:
    """A browser of a restarted replay reconnecting with an early id gets the new run's
    frames after it, never the rest of the old run (its goals, its full time)."""
    events = [s.event for s in expand(SEMI)]
    hub = Hub()
    _feed(hub, 1)
    _a_browser_left(hub)
    for run in (1, 2):
        state = MatchState.new(SEMI.match_id, run=run)
        for original in events if run == 1 else events[:20]:
            event = original.model_copy(update={"run": run})
            state = apply(state, event)
            hub.publish(event, state)
    client = hub.connect(SEMI.match_id, last_event_id=5)
    frames = [f for f in client.backlog if f.seq is not None]
    assert [f.seq for f in frames] == list(range(6, 21))
    assert all(b'"run":2' in f.data for f in frames)


async def test_a_match_no_browser_follows_keeps_no_frames_and_a_resume_gets_the_snapshot() -> None:
    """A flood of matches nobody watches costs each its state, not its frames; a browser that
    asks to resume one gets the snapshot (never a resume across frames the hub did not keep).
    Past the grace after the last browser left, the frames go too."""
    now = [0.0]
    hub = Hub(clock=lambda: now[0])
    _feed(hub, 80)
    channel = hub._channels[SEMI.match_id]
    assert not channel.history
    client = hub.connect(SEMI.match_id, last_event_id=70)
    assert _kinds(client.backlog)[1:] == [("state", 80)]
    hub.disconnect(client)
    _feed(hub, 90, start=80)
    assert channel.history is not None and len(channel.history) == 10  # for the one that left
    now[0] += RESUME_GRACE_S + 1
    _feed(hub, 91, start=90)
    assert not channel.history
