"""Runs on the wire: a consumer never rewinds and never handles a seq twice.

Each test feeds the runner an exact sequence a broker can deliver: a session queue redelivering
a stale live snapshot (mosquitto after SIGKILL), queued states before queued events (NATS), an
older run's leftovers, a newer run's restart, and events after a run's full time.
"""

from __future__ import annotations

import json

from consumers import Subscriber
from events import (
    BaseEvent,
    Event,
    MatchState,
    Message,
    Topics,
    apply,
    encode_event,
    replay_state,
)
from matchcast.testing import Harness, match_events

RUN1, RUN2 = 1_784_141_998_412, 1_784_142_500_000
EVENTS = [e.model_copy(update={"run": RUN1}) for e in match_events()]
MATCH = EVENTS[0].match_id
LAST = len(EVENTS)


def with_run(events: list[Event], run: int) -> list[Event]:
    return [e.model_copy(update={"run": run}) for e in events]


def states_after(events: list[Event]) -> list[MatchState]:
    state, out = MatchState.new(events[0].match_id, run=events[0].run), []
    for e in events:
        state = apply(state, e)
        out.append(state)
    return out


STATES = states_after(EVENTS)


def recorder() -> tuple[Subscriber, list[tuple[str, int]]]:
    sub, seen = Subscriber("rec"), []

    @sub.on()
    def event(e: BaseEvent, state: MatchState) -> None:
        seen.append(("event", e.seq))

    @sub.on_state
    def snapshot(state: MatchState) -> None:
        seen.append(("state", state.last_seq))

    return sub, seen


def event_seqs(seen: list[tuple[str, int]]) -> list[int]:
    return [s for k, s in seen if k == "event"]


async def send_pairs(h: Harness, events: list[Event], states: list[MatchState]) -> None:
    for event, state in zip(events, states, strict=True):
        await h.send(event, wait=False)
        await h.send(state, wait=False, retain=False)


async def test_a_stale_live_snapshot_from_a_session_queue_does_not_rewind() -> None:
    """The issue's case: after a broker restart its session queue redelivers an old state
    (not retained); the runner took it for a new replay and handled seqs again."""
    sub, seen = recorder()
    async with Harness(sub) as h:
        await send_pairs(h, EVENTS[:60], STATES[:60])
        await h.send(STATES[45], retain=False)  # the stale snapshot, redelivered
        await send_pairs(h, EVENTS[45:60], STATES[45:60])  # and the events queued with it
        await send_pairs(h, EVENTS[60:], STATES[60:])
        await h.idle()
    assert event_seqs(seen) == list(range(1, LAST + 1))
    assert h.stats.restarts == 0
    assert not h.logged("match.restarted")
    assert h.state() == replay_state(MATCH, EVENTS).model_copy(update={"run": RUN1})


async def test_queued_states_before_queued_events_change_nothing() -> None:
    """NATS resuming a session: every queued state first, then every queued event."""
    sub, seen = recorder()
    async with Harness(sub) as h:
        await send_pairs(h, EVENTS[:50], STATES[:50])
        await h.send(*STATES[40:70], wait=False, retain=False)
        await h.send(*EVENTS[40:70], wait=False)
        await send_pairs(h, EVENTS[70:], STATES[70:])
        await h.idle()
    assert event_seqs(seen) == list(range(1, LAST + 1))
    assert (h.stats.restarts, h.stats.gaps) == (0, 0)
    assert h.stats.duplicates == 10


async def test_a_retained_snapshot_of_the_current_run_never_rewinds() -> None:
    sub, seen = recorder()
    async with Harness(sub) as h:
        await send_pairs(h, EVENTS[:30], STATES[:30])
        await h.send(STATES[10], STATES[29], retain=True)
    assert h.state().last_seq == 30
    assert ("state", 11) not in seen
    assert h.stats.restarts == 0


async def test_an_older_runs_messages_are_dropped_and_counted() -> None:
    sub, seen = recorder()
    new = with_run(EVENTS, RUN2)
    async with Harness(sub) as h:
        await send_pairs(h, new[:30], states_after(new)[:30])
        await h.send(EVENTS[30], STATES[30], wait=False, retain=False)  # the old run's next
        await h.send(STATES[70], retain=True)  # and its retained state, redelivered
        await h.send(EVENTS[0])  # and its kick-off
    assert event_seqs(seen) == list(range(1, 31))
    assert h.state().run == RUN2
    assert h.state().last_seq == 30
    assert h.stats.stale == 4
    assert (h.stats.restarts, h.stats.rejected) == (0, 0)
    assert {e["event"] for e in h.logs if "stale" in e["event"]} == {
        "event.stale_dropped",
        "state.stale_dropped",
    }


async def test_a_second_replayer_on_the_match_is_said_once_not_once_per_message() -> None:
    """Two replays of one match interleaved: the newer run wins; the older one's 40 events
    and states are dropped with one warning, not 80 lines."""
    sub, seen = recorder()
    new = with_run(EVENTS, RUN2)
    async with Harness(sub) as h:
        await send_pairs(h, new[:5], states_after(new)[:5])
        for i in range(40, 80):
            await h.send(EVENTS[i], STATES[i], wait=False, retain=False)
        await send_pairs(h, new[5:10], states_after(new)[5:10])
    assert event_seqs(seen) == list(range(1, 11))
    [said] = h.logged("match.run_superseded")
    assert (said["run"], said["following"], said["log_level"]) == (EVENTS[0].run, RUN2, "warning")
    assert h.stats.stale == 80


async def test_a_newer_run_is_a_restart_from_its_snapshot() -> None:
    """``replay --from 80'`` started again: its state comes first (live), then its events."""
    sub, seen = recorder()
    new = with_run(EVENTS, RUN2)
    new_states = states_after(new)
    async with Harness(sub) as h:
        await send_pairs(h, EVENTS[:50], STATES[:50])
        await h.send(new_states[79], retain=False)
        await send_pairs(h, new[80:83], new_states[80:83])
    assert seen[50:] == [("state", 80), ("event", 81), ("event", 82), ("event", 83)]
    assert h.stats.restarts == 1
    [restart] = h.logged("match.restarted")
    assert (restart["run"], restart["new_run"]) == (RUN1, RUN2)


async def test_a_newer_run_from_kickoff_starts_the_match_again() -> None:
    sub, seen = recorder()
    new = with_run(EVENTS, RUN2)
    async with Harness(sub) as h:
        await send_pairs(h, EVENTS, STATES)
        await send_pairs(h, new[:3], states_after(new)[:3])
    assert event_seqs(seen) == [*range(1, LAST + 1), 1, 2, 3]
    assert h.stats.restarts == 1
    assert h.state().run == RUN2


async def test_nothing_of_a_run_is_taken_after_its_full_time() -> None:
    """A forged or misrouted seq past the full time of the run is refused, not handled."""
    sub, seen = recorder()
    late = EVENTS[5].model_copy(update={"seq": LAST + 1})
    async with Harness(sub) as h:
        await send_pairs(h, EVENTS, STATES)
        await h.send(late, EVENTS[-1])
    assert event_seqs(seen) == list(range(1, LAST + 1))
    assert h.stats.after_end == 1
    assert h.stats.duplicates == 1
    assert h.logged("event.after_end_refused")[0]["seq"] == LAST + 1
    assert h.state().status == "finished"


def _newer_minor(event: Event, **changes: object) -> Message:
    data = json.loads(encode_event(event))
    data.update(schema_version="1.9", var_check="complete", **changes)
    return Message(Topics().events(event.match_id), json.dumps(data).encode(), qos=1)


async def test_a_newer_minors_unknown_event_type_is_skipped_in_place() -> None:
    """1.9 sends ``cooling_break`` as seq 11 and an extra field on seq 12: counted and skipped,
    no dead letter, no gap, and the events around it handled."""
    sub, seen = recorder()
    shifted = [e.model_copy(update={"seq": e.seq + 1}) for e in EVENTS[10:20]]
    pause = _newer_minor(EVENTS[10], type="cooling_break")
    async with Harness(sub) as h:
        await send_pairs(h, EVENTS[:10], STATES[:10])
        await h.send(pause, _newer_minor(shifted[0]), *shifted[1:])
    assert event_seqs(seen) == [*range(1, 11), *range(12, 22)]
    assert h.stats.unknown_skipped == 1
    assert (h.stats.gaps, h.stats.rejected, h.stats.dead_lettered) == (0, 0, 0)
    [skipped] = h.logged("event.unknown_skipped")
    assert (skipped["event_type"], skipped["schema_version"], skipped["seq"]) == (
        "cooling_break",
        "1.9",
        11,
    )
    assert not h.logged("message.rejected")


async def test_a_run_from_the_future_is_refused_not_a_restart() -> None:
    """A forged run a year ahead would make the real replayer's runs stale: it is rejected."""
    sub, seen = recorder()
    future = 4_102_444_800_000  # 2100-01-01
    forged = EVENTS[30].model_copy(update={"run": future, "seq": 1})
    forged_state = STATES[30].model_copy(update={"run": future})
    async with Harness(sub) as h:
        await send_pairs(h, EVENTS[:30], STATES[:30])
        await h.send(forged, forged_state)
        await send_pairs(h, EVENTS[30:], STATES[30:])
    assert event_seqs(seen) == list(range(1, LAST + 1))
    assert h.stats.rejected == 2
    assert h.stats.restarts == 0
    assert all("more than a day" in e["reason"] for e in h.logged("message.rejected"))
