"""Events and states round-trip through bytes; bad bytes raise a typed, readable error."""

import json

import pytest
from pydantic import ValidationError

from events import (
    MAX_PAYLOAD_BYTES,
    SCHEMA_VERSION,
    DecodeError,
    EventAdapter,
    MatchState,
    UnsupportedVersionError,
    decode_event,
    decode_state,
    encode_event,
    encode_state,
    replay_state,
)
from simulator import expand, resolve_matches
from tests._factories import goal, kickoff


@pytest.fixture(scope="module")
def stream():  # type: ignore[no-untyped-def]
    return [s.event for s in expand(resolve_matches("semifinal")[0])]


def test_every_event_of_the_semifinal_round_trips(stream) -> None:  # type: ignore[no-untyped-def]
    for event in stream:
        assert decode_event(encode_event(event)) == event


def test_the_state_round_trips(stream) -> None:  # type: ignore[no-untyped-def]
    state = replay_state(stream[0].match_id, stream)
    assert decode_state(encode_state(state)) == state


def test_events_are_frozen_and_refuse_unknown_fields() -> None:
    event = kickoff()
    with pytest.raises(ValidationError):
        event.seq = 5  # type: ignore[misc]
    data = json.loads(encode_event(event))
    data["surprise"] = 1
    with pytest.raises(DecodeError, match="surprise"):
        decode_event(json.dumps(data).encode())


def test_goal_carries_scorer_method_and_score_after() -> None:
    g = goal(5, 86, "ARG", {"ARG": 1, "ENG": 1}, scorer="Enzo Fernández", method="header")
    wire = json.loads(encode_event(g))
    assert wire["type"] == "goal"
    assert wire["clock"] == {"period": 2, "minute": 86, "added": 0, "label": "86'"}
    assert wire["score"] == {"ARG": 1, "ENG": 1}
    assert wire["scorer"] == "Enzo Fernández"
    assert wire["schema_version"] == SCHEMA_VERSION


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"\xff\xfe not utf8", "not JSON"),
        (b"{not json", "not JSON"),
        (b"[1, 2]", "expected a JSON object"),
        (b'{"type": "goal"}', "match_id: Field required"),
        (b'{"type": "teleport", "match_id": "m", "seq": 1}', "teleport"),
        (b'{"schema_version": 7, "type": "clock"}', "must be a string"),
        (b'{"schema_version": "one", "type": "clock"}', "not MAJOR.MINOR"),
    ],
)
def test_undecodable_bytes_raise_decode_error_with_topic_and_reason(
    payload: bytes, reason: str
) -> None:
    with pytest.raises(DecodeError) as info:
        decode_event(payload, topic="matchcast/matches/m1/events")
    assert info.value.topic == "matchcast/matches/m1/events"
    assert reason in info.value.reason
    assert "matchcast/matches/m1/events" in str(info.value)


@pytest.mark.parametrize("version", ["2.0", "0.9"])
def test_other_majors_are_refused_by_version(version: str) -> None:
    data = json.loads(encode_event(kickoff()))
    data["schema_version"] = version
    with pytest.raises(UnsupportedVersionError, match="upgrade matchcast"):
        decode_event(json.dumps(data).encode(), topic="t")


def test_oversize_payloads_are_refused_before_parsing() -> None:
    with pytest.raises(DecodeError, match="exceeds"):
        decode_event(b" " * (MAX_PAYLOAD_BYTES + 1))


def test_bad_state_payload_names_the_field() -> None:
    with pytest.raises(DecodeError, match="last_seq"):
        decode_state(b'{"match_id": "m1", "last_seq": -1}', topic="s")


def test_the_union_schema_discriminates_on_type() -> None:
    schema = EventAdapter.json_schema()
    assert schema["discriminator"]["propertyName"] == "type"
    assert "goal" in schema["discriminator"]["mapping"]
    assert MatchState.model_json_schema()["properties"]["score"]["type"] == "object"


def _deep(depth: int, kind: str) -> bytes:
    if kind == "list":
        return b"[" * depth + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


#: Nested JSON that made ``json.loads`` recurse (RecursionError) in the slow path: ~2 KB each.
DEEP = [
    _deep(1000, "list"),
    _deep(400, "dict"),
    _deep(100_000, "list"),
    b'{"schema_version":"1.0","type":"goal","match_id":"m1","x":' + _deep(1000, "list") + b"}",
    b'{"schema_version":"1.9","type":"cooling_break","x":' + _deep(1000, "dict") + b"}",
    b"[" * 5000,  # never closed
]


@pytest.mark.parametrize("payload", DEEP, ids=lambda p: f"{p[:12]!r}x{len(p)}")
def test_deeply_nested_json_is_a_decode_error_not_a_recursion_error(payload: bytes) -> None:
    """pydantic-core's parser refuses the depth; nothing recurses on it."""
    for decode in (decode_event, decode_state):
        with pytest.raises(DecodeError) as info:
            decode(payload, topic="t")
        assert info.value.reason
        assert len(str(info.value)) < 1000  # the payload is not echoed back whole
