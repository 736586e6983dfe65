"""Schema 1.2: ``replay_stopped``, ``info`` on kick_off and the state, and what a 1.1 reader
makes of them (it skips the event, ignores the fields)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic import ConfigDict, create_model

import events._codec
from consumers import Subscriber
from events import (
    DecodeError,
    MatchState,
    Message,
    ReplayStopped,
    Topics,
    UnknownEventTypeError,
    apply,
    decode_event,
    decode_state,
    encode_event,
    encode_state,
)
from matchcast.contract.wire_schema import FIXTURE_DIR
from matchcast.testing import Harness, match_events

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / FIXTURE_DIR / "1.2"
RUN = 1_784_141_998_412
EVENTS = [e.model_copy(update={"run": RUN}) for e in match_events()]
MATCH = EVENTS[0].match_id


def _stopped_after(n: int) -> tuple[ReplayStopped, MatchState]:
    state = MatchState.new(MATCH, run=RUN)
    for event in EVENTS[:n]:
        state = apply(state, event)
    assert state.clock is not None
    stop = ReplayStopped(
        match_id=MATCH,
        run=RUN,
        seq=n + 1,
        clock=state.clock,
        emitted_at=EVENTS[n].emitted_at,
        reason="interrupted",
    )
    return stop, apply(state, stop)


def test_replay_stopped_sets_the_status_and_keeps_the_score() -> None:
    stop, stopped = _stopped_after(40)
    before = apply(MatchState.new(MATCH, run=RUN), EVENTS[0])
    assert stopped.status == "stopped"
    assert stopped.display_clock == "STOPPED"
    assert stopped.last_seq == stop.seq
    assert stopped.home == before.home
    assert apply(stopped, EVENTS[40].model_copy(update={"seq": stop.seq})) == stopped


def test_kick_off_carries_the_match_files_info_into_the_state() -> None:
    """The bundled semi-final's competition, stage, venue and kickoff reach the state."""
    kick_off = EVENTS[0]
    assert kick_off.type == "kick_off"
    state = apply(MatchState.new(MATCH), kick_off)
    assert state.info is not None
    assert (state.info.competition, state.info.stage) == ("FIFA World Cup 2026", "Semi-final")
    assert (state.info.venue, state.info.city) == ("Mercedes-Benz Stadium", "Atlanta")
    assert state.info.kickoff is not None
    assert state.info.kickoff.isoformat() == "2026-07-15T15:00:00-04:00"
    # Later events keep it; the second half's kick-off carries the same.
    for event in EVENTS[1:]:
        state = apply(state, event)
    assert state.info == kick_off.info  # type: ignore[union-attr]


# ---------------------------------------------------------------- a 1.1 reader

_STATE_11_FIELDS: dict[str, Any] = {
    name: (field.annotation, field) for name, field in MatchState.model_fields.items()
}
del _STATE_11_FIELDS["info"]
_STATE_11_FIELDS["status"] = (
    Literal["scheduled", "live", "half_time", "break", "finished"],
    MatchState.model_fields["status"],
)
#: MatchState as 1.1 declared it: no ``info``, no ``stopped`` status.
State11 = create_model(  # type: ignore[call-overload]
    "MatchState", __config__=ConfigDict(frozen=True, extra="forbid"), **_STATE_11_FIELDS
)


@pytest.fixture
def reader_11(monkeypatch: pytest.MonkeyPatch) -> None:
    """This build's codec as 1.1 had it: 1.2 is a newer minor, ``replay_stopped`` unknown."""
    monkeypatch.setattr(events._codec, "SCHEMA_VERSION", "1.1")
    monkeypatch.setattr(events._codec, "_MINOR", 1)
    monkeypatch.setattr(events._codec, "_STRICT_VERSIONS", frozenset({"1.0", "1.1"}))
    monkeypatch.setattr(
        events._codec, "_KNOWN_TYPES", events._codec._KNOWN_TYPES - {"replay_stopped"}
    )
    monkeypatch.setattr(events._codec, "MatchState", State11)


@pytest.mark.usefixtures("reader_11")
def test_a_11_reader_skips_replay_stopped() -> None:
    payload = (FIXTURES / "replay_stopped.json").read_bytes()
    with pytest.raises(UnknownEventTypeError) as caught:
        decode_event(payload, topic="t")
    assert (caught.value.event_type, caught.value.version) == ("replay_stopped", "1.2")


@pytest.mark.usefixtures("reader_11")
def test_a_11_reader_ignores_info_on_kick_off_and_the_state() -> None:
    kick_off = decode_event((FIXTURES / "kick_off.json").read_bytes())
    assert kick_off.type == "kick_off"
    state = decode_state((FIXTURES / "state.json").read_bytes())
    assert isinstance(state, State11)
    assert "info" not in state.model_dump()
    assert json.loads((FIXTURES / "state.json").read_text())["info"]["stage"] == "Semi-final"


@pytest.mark.usefixtures("reader_11")
def test_a_11_reader_rejects_a_stopped_state_as_documented() -> None:
    """docs/wire-format.md says so: 1.1 does not know the status; it keeps its state."""
    _, stopped = _stopped_after(40)
    with pytest.raises(DecodeError, match="status"):
        decode_state(encode_state(stopped))


async def test_a_11_runner_counts_replay_stopped_skipped_without_a_dead_letter(
    reader_11: None,
) -> None:
    stop, _ = _stopped_after(40)
    seen: list[int] = []
    sub = Subscriber("rec")
    sub.on()(lambda e, _s: seen.append(e.seq))
    topic = Topics().events(MATCH)
    async with Harness(sub) as h:
        await h.send(*EVENTS[:40])
        await h.send(Message(topic, encode_event(stop), qos=1), wait=False)
        await h.idle()
    assert seen == list(range(1, 41))
    assert h.stats.unknown_skipped == 1
    assert (h.stats.rejected, h.stats.dead_lettered) == (0, 0)


async def test_a_12_runner_ends_the_run_at_replay_stopped_and_takes_a_new_run() -> None:
    """After ``replay_stopped`` nothing more of its run is taken; a restart (newer run) is."""
    stop, _ = _stopped_after(40)
    seen: list[tuple[int, int]] = []
    sub = Subscriber("rec")
    sub.on()(lambda e, _s: seen.append((e.run, e.seq)))
    restart = [e.model_copy(update={"run": RUN + 1}) for e in EVENTS[:3]]
    async with Harness(sub) as h:
        await h.send(*EVENTS[:40], stop, EVENTS[41])  # seq 42: after the end
        assert h.state().status == "stopped"
        await h.send(*restart)
    assert seen[-5:] == [(RUN, 40), (RUN, 41), (RUN + 1, 1), (RUN + 1, 2), (RUN + 1, 3)]
    assert h.stats.after_end == 1
    assert h.state().status == "live"
