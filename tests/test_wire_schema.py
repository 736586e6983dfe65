"""Schema stability: the wire schema changes only with SCHEMA_VERSION, minors are additive, and
every released version's payloads decode."""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import events._codec
from events import (
    SCHEMA_VERSION,
    DecodeError,
    UnknownEventTypeError,
    UnsupportedVersionError,
    decode_event,
    decode_state,
)
from matchcast.contract.wire_compat import additive_problems
from matchcast.contract.wire_docs import REGENERATE, bump_message, not_additive_message
from matchcast.contract.wire_examples import EVENT_TYPES
from matchcast.contract.wire_schema import (
    CURRENT_SNAPSHOT,
    FIXTURE_DIR,
    FROZEN_SUMS,
    frozen_files,
    next_versions,
    parse_version,
    payloads,
    read_sums,
    released_versions,
    snapshot_path,
    strip_annotations,
    wire_schema,
)

REPO = Path(__file__).resolve().parents[1]
MAJOR, MINOR = parse_version(SCHEMA_VERSION)
RELEASED = released_versions(REPO)
#: Whether SCHEMA_VERSION is under development: above the last release, with no frozen files.
IN_WORK = SCHEMA_VERSION not in RELEASED
#: This build's payloads: frozen if SCHEMA_VERSION is released, derived from the examples if not.
CURRENT = payloads(REPO)
#: The models' schema, as a snapshot holds it.
SCHEMA = wire_schema()


def _decode(stem: str, payload: bytes) -> Any:
    return decode_state(payload) if stem == "state" else decode_event(payload)


def _same_major_payloads() -> list[tuple[str, str, bytes]]:
    """(version, stem, payload) of every released version of this major, and of this build's."""
    versions = [v for v in RELEASED if parse_version(v)[0] == MAJOR]
    versions += [SCHEMA_VERSION] if IN_WORK else []
    return [(v, stem, data) for v in versions for stem, data in payloads(REPO, v).items()]


def _snapshot(version: str) -> dict[str, Any]:
    """The snapshot of a released version, or this build's schema for the one in work."""
    if version in RELEASED:
        loaded: dict[str, Any] = json.loads((REPO / snapshot_path(version)).read_text())
        return loaded
    return SCHEMA


def _minor_steps() -> list[tuple[str, str]]:
    """Each version of a major after its first, with the release before it."""
    versions = RELEASED + ([SCHEMA_VERSION] if IN_WORK else [])
    return [
        (old, new)
        for old, new in itertools.pairwise(versions)
        if parse_version(old)[0] == parse_version(new)[0]
    ]


def _differences(old: Any, new: Any, path: str = "") -> list[str]:
    """JSON paths where ``old`` and ``new`` differ, for a failure message a person can act on."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new)):
            if key not in old:
                out.append(f"{path}/{key} added")
            elif key not in new:
                out.append(f"{path}/{key} removed")
            else:
                out += _differences(old[key], new[key], f"{path}/{key}")
        return out
    return [] if old == new else [f"{path} changed: {old!r} -> {new!r}"]


# ---------------------------------------------------------------- the snapshots


def _failure(committed: Any, current: Any, name: str, advice: str) -> None:
    diff = _differences(committed, current)
    shown = "\n  ".join(diff[:20]) + ("\n  ..." if len(diff) > 20 else "")
    pytest.fail(f"The wire schema differs from {name}:\n  {shown}\n{advice}", pytrace=False)


def test_schema_matches_its_snapshots() -> None:
    """The models' wire schema is the current snapshot and, once SCHEMA_VERSION is released,
    its frozen one: the schema of a released version never changes."""
    current = wire_schema()
    if not IN_WORK:
        frozen = json.loads((REPO / snapshot_path()).read_text())
        if frozen != current:
            _failure(frozen, current, str(snapshot_path()), bump_message(SCHEMA_VERSION))
    path = REPO / CURRENT_SNAPSHOT
    assert path.is_file(), f"run `{REGENERATE}` to write {CURRENT_SNAPSHOT}, and commit it"
    committed = json.loads(path.read_text())
    if committed != current:
        advice = f"run `{REGENERATE}` to update {CURRENT_SNAPSHOT} in place, and commit it"
        _failure(committed, current, str(CURRENT_SNAPSHOT), advice)


def test_schema_version_is_the_last_release_or_the_one_after_it() -> None:
    """Every change between two releases goes into one version: 1.3 released, then 1.4 (or
    2.0) until the next release, never 1.5."""
    last = RELEASED[-1]
    allowed = (last, *next_versions(last))
    assert SCHEMA_VERSION in allowed, (
        f"SCHEMA_VERSION is {SCHEMA_VERSION}, the last release {last}: it may be one of {allowed}"
    )


def test_released_snapshots_are_named_by_their_version() -> None:
    """Each frozen snapshot holds the version in its name, and none is from the future."""
    assert RELEASED[:4] == ["1.0", "1.1", "1.2", "1.3"]  # released with matchcast 0.1.0
    for version in RELEASED:
        assert json.loads((REPO / snapshot_path(version)).read_text())["schema_version"] == version
        assert parse_version(version) <= (MAJOR, MINOR), f"{version} is newer than {SCHEMA_VERSION}"


def test_released_files_are_frozen() -> None:
    """A released version's snapshot and fixtures are as frozen.sha256 lists them, byte for
    byte, and every one of them is listed: a change to a released version is caught."""
    sums = read_sums(REPO)
    frozen = [path for version in RELEASED for path in frozen_files(REPO, version)]
    on_disk = {p.relative_to(REPO) for p in (REPO / FIXTURE_DIR).rglob("*") if p.is_file()}
    on_disk |= {snapshot_path(v) for v in RELEASED}
    assert set(frozen) == on_disk, "a file under tests/fixtures/wire/ of no released version"
    assert set(sums) == set(frozen), f"{FROZEN_SUMS} does not list exactly the frozen files"
    for version in RELEASED:
        assert len(frozen_files(REPO, version)) > 1, f"wire {version} has no fixtures"
    changed = [
        str(path)
        for path, digest in sums.items()
        if hashlib.sha256((REPO / path).read_bytes()).hexdigest() != digest
    ]
    assert not changed, (
        f"released, frozen files changed: {changed}. A released version's files are never "
        f"rewritten: restore them (git checkout), and change SCHEMA_VERSION's instead"
    )


@pytest.mark.parametrize(("old", "new"), _minor_steps(), ids=lambda v: v)
def test_each_minor_version_is_additive_to_the_one_before(old: str, new: str) -> None:
    """1.0 → 1.1 → 1.2 → 1.3 → (the version in work): no field removed or made required, no
    enum value or type removed, no constraint narrowed, against the previous release."""
    problems = additive_problems(_snapshot(old), _snapshot(new))
    assert not problems, not_additive_message(new, old, problems)


def test_strip_annotations_drops_prose_not_properties() -> None:
    """Titles and descriptions go; a property *named* title stays, with its schema."""
    schema = {
        "title": "Book",
        "description": "A book.",
        "properties": {"title": {"type": "string", "title": "Title", "description": "Its title"}},
        "anyOf": [{"type": "null", "title": "Nothing"}],
        "required": ["title"],
    }
    assert strip_annotations(schema) == {
        "properties": {"title": {"type": "string"}},
        "anyOf": [{"type": "null"}],
        "required": ["title"],
    }


def test_a_structural_change_is_a_schema_change() -> None:
    """A new field shows in the snapshot's terms; a docstring edit does not."""
    schema = wire_schema()
    changed = json.loads(json.dumps(schema))
    changed["event"]["$defs"]["Goal"]["properties"]["x_added"] = {"type": "string"}
    assert _differences(schema, changed) == ["/event/$defs/Goal/properties/x_added added"]
    reworded = strip_annotations({**schema["event"], "description": "reworded"})
    assert reworded == schema["event"]


# ---------------------------------------------------------------- the additive check

_Change = Callable[[dict[str, Any]], None]


def _goal(s: dict[str, Any]) -> dict[str, Any]:
    goal: dict[str, Any] = s["event"]["$defs"]["Goal"]
    return goal


def _new_event_type(s: dict[str, Any]) -> None:
    defs = s["event"]["$defs"]
    defs["Corner"] = copy.deepcopy(defs["ClockTick"])
    defs["Corner"]["properties"]["type"] = {
        "const": "corner",
        "default": "corner",
        "type": "string",
    }
    s["event"]["oneOf"].append({"$ref": "#/$defs/Corner"})
    s["event"]["discriminator"]["mapping"]["corner"] = "#/$defs/Corner"


ADDITIVE: dict[str, _Change] = {
    "a new optional field": lambda s: _goal(s)["properties"].update(
        assist={"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
    ),
    "a new event type": _new_event_type,
    "a new enum value": lambda s: _goal(s)["properties"]["method"]["anyOf"][0]["enum"].append(
        "bicycle_kick"
    ),
    "a longer match_id": lambda s: _goal(s)["properties"]["match_id"].update(maxLength=128),
    "a field made optional": lambda s: _goal(s)["required"].remove("scorer"),
    "nothing required": lambda s: s["event"]["$defs"]["ClockTick"].pop("required"),
    "a field made nullable": lambda s: _goal(s)["properties"].update(
        scorer={"anyOf": [{"minLength": 1, "type": "string"}, {"type": "null"}]}
    ),
    "the version itself": lambda s: s["state"]["properties"]["schema_version"].update(
        default="1.9"
    ),
}
NARROWING: dict[str, tuple[_Change, str]] = {
    "a field removed": (
        lambda s: _goal(s)["properties"].pop("detail"),
        "/event/$defs/Goal/properties/detail removed",
    ),
    "a new required field": (
        lambda s: (
            _goal(s)["properties"].update(assist={"type": "string"}),
            _goal(s)["required"].append("assist"),
        ),
        "/event/$defs/Goal/required: assist is now required",
    ),
    "an event type removed": (
        lambda s: s["event"]["discriminator"]["mapping"].pop("card"),
        "/event/discriminator/mapping/card removed",
    ),
    "an enum value removed": (
        lambda s: s["event"]["$defs"]["Card"]["properties"]["card"]["enum"].remove("red"),
        "/event/$defs/Card/properties/card/enum: 'red' removed",
    ),
    "a shorter match_id": (
        lambda s: _goal(s)["properties"]["match_id"].update(maxLength=32),
        "/event/$defs/Goal/properties/match_id/maxLength lowered: 64 -> 32",
    ),
    "a new constraint": (
        lambda s: _goal(s)["properties"]["scorer"].update(maxLength=40),
        "/event/$defs/Goal/properties/scorer/maxLength added: 40",
    ),
    "a type changed": (
        lambda s: _goal(s)["properties"]["seq"].update(type="string"),
        "/event/$defs/Goal/properties/seq/type changed: 'integer' -> 'string'",
    ),
    "a default changed": (
        lambda s: _goal(s)["properties"]["run"].update(default=1),
        "/event/$defs/Goal/properties/run/default changed: 0 -> 1",
    ),
    "a nullable field made non-null": (
        lambda s: _goal(s)["properties"].update(detail={"type": "string", "default": None}),
        "/event/$defs/Goal/properties/detail/anyOf removed",
    ),
    "a state field removed": (
        lambda s: s["state"]["properties"].pop("info"),
        "/state/properties/info removed",
    ),
}


#: The changes above are made to a frozen snapshot, which later versions cannot change.
BASE = _snapshot("1.3")


def _changed(change: _Change) -> dict[str, Any]:
    schema = copy.deepcopy(BASE)
    change(schema)
    return schema


@pytest.mark.parametrize("name", ADDITIVE)
def test_additive_changes_pass_the_check(name: str) -> None:
    assert additive_problems(BASE, _changed(ADDITIVE[name])) == []


@pytest.mark.parametrize("name", NARROWING)
def test_narrowing_changes_are_named_by_the_check(name: str) -> None:
    change, expected = NARROWING[name]
    problems = additive_problems(BASE, _changed(change))
    assert any(p.startswith(expected) for p in problems), problems


def test_the_check_is_not_symmetric() -> None:
    """Undoing an additive change narrows: each released minor, read backwards, fails."""
    for old, new in _minor_steps():
        assert additive_problems(_snapshot(new), _snapshot(old)), f"{new} → {old} passed"


# ---------------------------------------------------------------- fixtures


def test_current_version_has_a_payload_of_every_kind() -> None:
    """This build's payloads (frozen or derived) cover every event type and the state."""
    assert set(CURRENT) == {*EVENT_TYPES, "state"}


@pytest.mark.parametrize(
    ("version", "stem", "payload"),
    _same_major_payloads(),
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_payloads_of_the_current_major_decode(version: str, stem: str, payload: bytes) -> None:
    """Every payload any minor of this major wrote (or, in work, writes) still decodes."""
    decoded = _decode(stem, payload)
    assert decoded.schema_version == version
    if stem != "state":
        assert decoded.type == stem


def test_fixtures_of_other_majors_are_refused() -> None:
    """Payloads of another major get UnsupportedVersionError (none exist before 2.0)."""
    for version in RELEASED:
        if parse_version(version)[0] == MAJOR:
            continue
        for stem, payload in payloads(REPO, version).items():
            with pytest.raises(UnsupportedVersionError):
                _decode(stem, payload)


# ---------------------------------------------------------------- the codec's version rule


def _with_version(payload: bytes, version: str) -> bytes:
    data = json.loads(payload)
    data["schema_version"] = version
    return json.dumps(data).encode()


@pytest.mark.parametrize("stem", ["goal", "state"])
def test_another_major_is_refused(stem: str) -> None:
    """A reader refuses what it may misread, and says which version it met."""
    decode = decode_state if stem == "state" else decode_event
    for version in [f"{MAJOR + 1}.0", f"{MAJOR - 1}.{MINOR}", f"{MAJOR + 1}.{MINOR + 1}"]:
        with pytest.raises(UnsupportedVersionError) as caught:
            decode(_with_version(CURRENT[stem], version))
        assert caught.value.version == version


def _newer(payload: bytes, **changes: Any) -> bytes:
    """The payload as a later minor (1.9) writes it: an extra field at the top and inside."""
    data = json.loads(payload)
    data.update(schema_version=f"{MAJOR}.9", referee="Szymon Marciniak", **changes)
    data["clock"]["stoppage_reason"] = "var"
    return json.dumps(data).encode()


def test_a_newer_minor_is_read_with_its_unknown_fields_ignored() -> None:
    """1.9's goal and state decode in this build; what it does not know is left out."""
    goal = decode_event(_newer(CURRENT["goal"]))
    assert goal.type == "goal"
    assert goal.schema_version == f"{MAJOR}.9"
    assert "referee" not in goal.model_dump()
    expected = decode_event(CURRENT["goal"])
    assert goal.model_copy(update={"schema_version": SCHEMA_VERSION}) == expected
    state = decode_state(_newer(CURRENT["state"]))
    assert state.last_seq == decode_state(CURRENT["state"]).last_seq


def test_a_newer_minors_unknown_event_type_is_skippable_not_invalid() -> None:
    """``cooling_break`` of 1.9: UnknownEventTypeError with its envelope, not a plain rejection."""
    payload = _newer(CURRENT["goal"], type="cooling_break")
    with pytest.raises(UnknownEventTypeError) as caught:
        decode_event(payload, topic="t")
    err = caught.value
    assert (err.event_type, err.version, err.topic) == ("cooling_break", f"{MAJOR}.9", "t")
    original = json.loads(CURRENT["goal"])
    assert (err.match_id, err.seq, err.run) == (
        original["match_id"],
        original["seq"],
        original["run"],
    )


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"extra_field": 1}, "extra_field"),  # strict at its own minor
        ({"type": "cooling_break"}, "cooling_break"),  # an unknown type of its own minor is invalid
    ],
)
def test_this_minors_payloads_are_still_validated_strictly(
    changes: dict[str, Any], reason: str
) -> None:
    data = json.loads(CURRENT["goal"])
    data.update(changes)
    with pytest.raises(DecodeError, match=reason) as caught:
        decode_event(json.dumps(data).encode())
    assert not isinstance(caught.value, UnknownEventTypeError)


def test_a_newer_minors_unknown_type_with_a_bad_envelope_is_rejected() -> None:
    data = json.loads(CURRENT["goal"])
    data.update(schema_version=f"{MAJOR}.9", type="cooling_break", seq=0)
    with pytest.raises(DecodeError, match="seq") as caught:
        decode_event(json.dumps(data).encode())
    assert not isinstance(caught.value, UnknownEventTypeError)


def test_a_10_payload_without_run_reads_as_run_0() -> None:
    """The 1.0 fixtures have no ``run``; they decode, as run 0."""
    for stem, payload in payloads(REPO, "1.0").items():
        assert "run" not in json.loads(payload)
        assert _decode(stem, payload).run == 0


def test_a_reader_one_minor_ahead_reads_this_versions_payloads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Simulates the next minor's build: today's payloads decode there (the slow path)."""
    monkeypatch.setattr(events._codec, "SCHEMA_VERSION", f"{MAJOR}.{MINOR + 1}")
    monkeypatch.setattr(events._codec, "_MINOR", MINOR + 1)
    for stem, payload in CURRENT.items():
        assert _decode(stem, payload).schema_version == SCHEMA_VERSION


def test_a_reader_one_minor_behind_skips_this_versions_new_event_types(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Simulates the previous minor's build: an event type new in this version is skipped
    (UnknownEventTypeError, which a consumer counts), the others decode leniently."""
    previous = f"{MAJOR}.{MINOR - 1}"
    if MINOR == 0 or previous not in RELEASED:
        pytest.skip("no earlier minor of this major")
    old_types = set(payloads(REPO, previous)) - {"state"}
    monkeypatch.setattr(events._codec, "SCHEMA_VERSION", f"{MAJOR}.{MINOR - 1}")
    monkeypatch.setattr(events._codec, "_MINOR", MINOR - 1)
    monkeypatch.setattr(
        events._codec, "_STRICT_VERSIONS", frozenset(f"{MAJOR}.{m}" for m in range(MINOR))
    )
    monkeypatch.setattr(events._codec, "_KNOWN_TYPES", events._codec._KNOWN_TYPES & old_types)
    new_types = set(EVENT_TYPES) - old_types
    for stem, payload in CURRENT.items():
        if stem in new_types:
            with pytest.raises(UnknownEventTypeError) as caught:
                decode_event(payload)
            assert caught.value.event_type == stem
        else:
            assert _decode(stem, payload).schema_version == SCHEMA_VERSION
