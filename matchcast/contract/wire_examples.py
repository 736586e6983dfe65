"""Example payloads, one per message kind, for the docs, the AsyncAPI document and fixtures.

Real events where the bundled semi-final has one: the first event of each type in the stream
``simulator.expand`` makes of it, with the timestamps a live replay would add (``scheduled_at``
the nominal time, ``emitted_at`` a few milliseconds later), so every run gives the same bytes.
A type the semi-final does not have (a card, a substitution, a shoot-out kick, ...) declares
its own example on its model (``example``, see events/_models.py): it is placed in a made-up
match (:data:`CONSTRUCTED_MATCH_ID`) and built through the model, so it is validated.
"""

from __future__ import annotations

import datetime as dt
import typing

from events import (
    EVENT_MODELS,
    ControlCommand,
    ControlReply,
    Event,
    EventAdapter,
    MatchPlayback,
    MatchState,
    Period,
    Topics,
    replay_state,
)
from matchcast.contract.status import ReplayerStatus
from simulator import expand, resolve_matches

__all__ = [
    "CONSTRUCTED_MATCH_ID",
    "EVENT_TYPES",
    "PUBLISH_DELAY",
    "example_command",
    "example_events",
    "example_playback",
    "example_reply",
    "example_state",
    "example_status",
]

#: Every event type, in the order of the :data:`events.Event` union.
EVENT_TYPES: tuple[str, ...] = tuple(m.event_type() for m in EVENT_MODELS)
#: How late after its nominal time an example event is stamped as emitted.
PUBLISH_DELAY = dt.timedelta(milliseconds=3)
#: The made-up match of the event types the semi-final does not have.
CONSTRUCTED_MATCH_ID = "example-cup-final"
_CONSTRUCTED_KICKOFF = dt.datetime(2026, 7, 19, 19, 0, tzinfo=dt.UTC)
#: The run of the semi-final's replay: it started when the example status says it came online.
SEMIFINAL_RUN = int(dt.datetime(2026, 7, 15, 18, 59, 58, 412000, tzinfo=dt.UTC).timestamp() * 1000)
_CONSTRUCTED_RUN = int((_CONSTRUCTED_KICKOFF - dt.timedelta(seconds=2)).timestamp() * 1000)


def _stamped(event: Event, nominal: dt.datetime) -> Event:
    """``event`` as a live replay sends it: due at ``nominal``, emitted just after."""
    update = {
        "run": SEMIFINAL_RUN,
        "scheduled_at": nominal,
        "emitted_at": nominal + PUBLISH_DELAY,
    }
    return EventAdapter.validate_python(event.model_copy(update=update).model_dump())


def _semifinal() -> list[Event]:
    stream = expand(resolve_matches(None)[0])
    return [_stamped(s.event, s.event.emitted_at) for s in stream]


def _constructed() -> list[Event]:
    """The examples the models declare, in the made-up match; a 15-minute half-time break sits
    before the second half's minutes."""
    events: list[Event] = []
    for model in EVENT_MODELS:
        example = model.example
        if example is None:
            continue
        breaks = 15 if example.clock.period >= Period.SECOND_HALF else 0
        due = _CONSTRUCTED_KICKOFF + dt.timedelta(minutes=example.at + breaks)
        envelope = {
            "type": model.event_type(),
            "match_id": CONSTRUCTED_MATCH_ID,
            "run": _CONSTRUCTED_RUN + example.earlier_run_ms,
            "seq": example.seq,
            "clock": example.clock,
            "scheduled_at": due,
            "emitted_at": due + PUBLISH_DELAY,
        }
        events.append(EventAdapter.validate_python({**envelope, **example.fields}))
    return events


def example_events() -> list[Event]:
    """One event of every type, in :data:`EVENT_TYPES` order."""
    first: dict[str, Event] = {}
    for event in _semifinal() + _constructed():
        first.setdefault(event.type, event)
    missing = set(EVENT_TYPES) - set(first)
    if missing:  # pragma: no cover - a new event type needs an example on its model
        raise RuntimeError(
            f"no example of event type(s) {sorted(missing)}: the semi-final has none, so give "
            "the model one (``example = Example(...)``, events/_models.py)"
        )
    return [first[t] for t in EVENT_TYPES]


def example_state() -> MatchState:
    """The retained state of the semi-final at full time."""
    events = _semifinal()
    return replay_state(events[0].match_id, events).model_copy(update={"run": SEMIFINAL_RUN})


_REPLAYER_ID = "replayer-3f9c2a1b"
_PAUSED_AT = dt.datetime(2026, 7, 15, 19, 56, 3, 120000, tzinfo=dt.UTC)
_REQUEST_ID = "5c0f2e9a41d7b388"
_CONNECTED_AT = dt.datetime(2026, 7, 15, 18, 59, 58, 412000, tzinfo=dt.UTC)


def example_playback() -> MatchPlayback:
    """The semi-final, paused at 55' (its first goal)."""
    goal = next(e for e in _semifinal() if e.type == "goal")
    return MatchPlayback(
        match_id=goal.match_id,
        state="paused",
        speed=60.0,
        clock=goal.clock,
        run=SEMIFINAL_RUN,
        last_seq=goal.seq,
        since=_PAUSED_AT,
    )


def example_status(status: typing.Literal["online", "offline"] = "online") -> ReplayerStatus:
    """The status of a replayer replaying the semi-final (online: paused at 55')."""
    playback = {}
    if status == "online":
        playback = {
            "state": "paused",
            "speed": 60.0,
            "since": _PAUSED_AT,
            "playback": [example_playback()],
        }
    return ReplayerStatus(
        status=status,
        replayer_id=_REPLAYER_ID,
        matches=[resolve_matches(None)[0].match_id],
        at=_PAUSED_AT if status == "online" else _CONNECTED_AT,
        **playback,
    )


def example_command() -> ControlCommand:
    """A seek of every match of the replayer to 80', as ``matchcast control seek 80`` sends it."""
    return ControlCommand(
        request_id=_REQUEST_ID,
        command="seek",
        minute="80",
        reply_to=Topics().reply(_REPLAYER_ID, _REQUEST_ID),
    )


def example_reply() -> ControlReply:
    """The replayer's answer to a pause."""
    return ControlReply(
        request_id=_REQUEST_ID,
        ok=True,
        replayer_id=_REPLAYER_ID,
        state="paused",
        speed=60.0,
        matches=[example_playback()],
    )
