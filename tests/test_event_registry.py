"""Each event type and each kind of match-file incident is declared once, and everything built
from the declarations sees every one: forgetting a type in the static union fails here."""

from __future__ import annotations

import typing

import pytest

import events
from events import (
    EVENT_MODELS,
    SCHEMA_VERSION,
    BaseEvent,
    Event,
    EventAdapter,
    MatchState,
    Shot,
    Substitution,
    apply,
)
from events import _models as models
from matchcast.contract.wire_examples import EVENT_TYPES, example_events
from simulator import INCIDENT_MODELS, GoalDisallowedIncident, parse_match, resolve_matches
from simulator import _matchfile as matchfile


def _subclasses(cls: type) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub, *_subclasses(sub)}
    return found


def _version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


def test_the_union_names_every_event_model_of_events() -> None:
    """A model added to events/_models.py but not to ``Event`` would be refused on the wire."""
    declared = {c for c in _subclasses(BaseEvent) if c.__module__ == models.__name__}
    assert set(EVENT_MODELS) == declared
    assert typing.get_args(typing.get_args(Event)[0]) == EVENT_MODELS


def test_type_names_are_unique_and_every_type_is_decoded_by_the_adapter() -> None:
    assert len(set(EVENT_TYPES)) == len(EVENT_TYPES) == len(EVENT_MODELS)
    for event in example_events():
        assert type(EventAdapter.validate_json(event.model_dump_json())) is type(event)


def test_schema_version_is_never_below_a_type_it_carries() -> None:
    """A new type declares the version that added it; the version must have been bumped."""
    for model in EVENT_MODELS:
        assert _version(model.added_in) <= _version(SCHEMA_VERSION), model.__name__


@pytest.mark.parametrize("event", example_events(), ids=lambda e: e.type)
def test_every_type_but_the_tick_says_something_in_both_tickers(event: BaseEvent) -> None:
    """Those the stats only count (corners, fouls, offsides) are as silent as the tick."""
    state = apply(MatchState.new(event.match_id), typing.cast(Event, event))
    said = event.commentary(state)
    if event.type == "clock" or type(event).counted_only:
        assert said is None
        return
    if isinstance(event, Shot) and not event.on_target and event.outcome != "woodwork":
        assert said is None  # wide and blocked shots only count; the others are shown
        return
    assert said is not None
    assert said.kind and said.text and said.line
    assert said.style == (type(event).style or event.type)
    assert said.terminal.startswith(f"{event.clock.label:<7}")


def test_a_type_without_a_case_in_the_reducer_moves_only_seq_and_clock() -> None:
    """The reducer has cases only for the types that change the state."""
    sub = next(e for e in example_events() if isinstance(e, Substitution))
    before = MatchState.new(sub.match_id)
    after = apply(before, sub)
    assert after == before.model_copy(update={"last_seq": sub.seq, "clock": sub.clock})


def test_events_exports_the_declaration_vocabulary() -> None:
    assert {"EVENT_MODELS", "Commentary", "Said", "Example"} <= set(events.__all__)


def test_the_incident_union_names_every_kind_of_incident() -> None:
    declared = _subclasses(matchfile._Incident)
    assert set(INCIDENT_MODELS) == declared
    for kind in INCIDENT_MODELS:
        assert kind.becomes, kind.__name__
        assert "events" in vars(kind), f"{kind.__name__} has no events() of its own"


def test_disallowed_is_still_read_as_goal_disallowed() -> None:
    """The incident's first name, ``disallowed``, keeps old match files working."""
    semi = resolve_matches("semifinal")[0]
    data = semi.model_dump(mode="json", exclude_none=True)
    goal = next(i for i in data["timeline"] if i["type"] == "goal")
    goal["id"] = "g1"
    data["result"]["score"][goal["team"]] -= 1
    for name in ("disallowed", "goal_disallowed"):
        incident = {"type": name, "minute": 87, "goal": "g1", "source": "assumption"}
        data["timeline"] = [*data["timeline"], incident]
        match = parse_match(data)
        (ruled_out,) = [i for i in match.timeline if isinstance(i, GoalDisallowedIncident)]
        assert ruled_out.type == "goal_disallowed"
        data["timeline"] = data["timeline"][:-1]
