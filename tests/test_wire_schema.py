"""Schema stability: the wire schema changes only with SCHEMA_VERSION, old payloads decode."""

from __future__ import annotations

import json
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
from matchcast.contract.wire_docs import REGENERATE
from matchcast.contract.wire_examples import EVENT_TYPES
from matchcast.contract.wire_schema import (
    FIXTURE_DIR,
    SNAPSHOT_DIR,
    snapshot_path,
    strip_annotations,
    wire_schema,
)

REPO = Path(__file__).resolve().parents[1]
MAJOR, MINOR = (int(p) for p in SCHEMA_VERSION.split("."))


def _version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


def _fixture_dirs() -> list[Path]:
    return sorted((REPO / FIXTURE_DIR).iterdir(), key=lambda p: _version(p.name))


def _same_major_fixtures() -> list[Path]:
    return [
        f for d in _fixture_dirs() if _version(d.name)[0] == MAJOR for f in sorted(d.glob("*.json"))
    ]


def _decode(path: Path) -> Any:
    payload = path.read_bytes()
    return decode_state(payload) if path.stem == "state" else decode_event(payload)


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


# ---------------------------------------------------------------- the snapshot


def test_schema_matches_the_snapshot_of_the_current_version() -> None:
    """The models' wire schema is the one committed for SCHEMA_VERSION: no silent changes."""
    path = REPO / snapshot_path()
    assert path.is_file(), (
        f"no schema snapshot for SCHEMA_VERSION {SCHEMA_VERSION}: run `{REGENERATE}` to write "
        f"{snapshot_path()} and the version's payload fixtures, and commit them"
    )
    committed = json.loads(path.read_text())
    current = wire_schema()
    if committed != current:
        diff = _differences(committed, current)
        shown = "\n  ".join(diff[:20]) + ("\n  ..." if len(diff) > 20 else "")
        pytest.fail(
            f"The wire schema changed, but SCHEMA_VERSION is still {SCHEMA_VERSION}:\n  {shown}\n"
            f"Bump SCHEMA_VERSION in events/_models.py: to {MAJOR}.{MINOR + 1} if every "
            f"{SCHEMA_VERSION} payload still decodes (a new optional field or event type, a "
            f"looser constraint), to {MAJOR + 1}.0 if not (a field removed, renamed or made "
            "required, a type or constraint narrowed). Then run "
            f"`{REGENERATE}`; see docs/wire-format.md. If {SCHEMA_VERSION} was never released, "
            f"delete {snapshot_path()} and run `{REGENERATE}` instead.",
            pytrace=False,
        )


def test_snapshots_are_named_by_their_version() -> None:
    """Each snapshot holds the version in its name, and none is from the future."""
    snapshots = sorted((REPO / SNAPSHOT_DIR).glob("wire-schema-*.json"))
    assert snapshots
    for path in snapshots:
        version = path.stem.removeprefix("wire-schema-")
        assert json.loads(path.read_text())["schema_version"] == version
        assert _version(version) <= (MAJOR, MINOR), f"{path.name} is newer than {SCHEMA_VERSION}"


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


# ---------------------------------------------------------------- fixtures


def test_current_version_has_a_fixture_of_every_payload_kind() -> None:
    """tests/fixtures/wire/{SCHEMA_VERSION}/ has one payload per event type and the state."""
    directory = REPO / FIXTURE_DIR / SCHEMA_VERSION
    expected = {f"{t}.json" for t in EVENT_TYPES} | {"state.json"}
    found = {p.name for p in directory.glob("*.json")} if directory.is_dir() else set()
    assert found == expected, f"run `{REGENERATE}` to write the missing fixtures"


@pytest.mark.parametrize("path", _same_major_fixtures(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fixtures_of_the_current_major_decode(path: Path) -> None:
    """Every payload any minor of this major wrote still decodes: minors are additive."""
    decoded = _decode(path)
    assert decoded.schema_version == path.parent.name
    if path.stem != "state":
        assert decoded.type == path.stem


def test_fixtures_of_other_majors_are_refused() -> None:
    """Payloads of another major get UnsupportedVersionError (none exist before 2.0)."""
    for directory in _fixture_dirs():
        if _version(directory.name)[0] == MAJOR:
            continue
        for path in directory.glob("*.json"):
            with pytest.raises(UnsupportedVersionError):
                _decode(path)


# ---------------------------------------------------------------- the codec's version rule


def _with_version(path: Path, version: str) -> bytes:
    data = json.loads(path.read_text())
    data["schema_version"] = version
    return json.dumps(data).encode()


@pytest.mark.parametrize("stem", ["goal", "state"])
def test_another_major_is_refused(stem: str) -> None:
    """A reader refuses what it may misread, and says which version it met."""
    path = REPO / FIXTURE_DIR / SCHEMA_VERSION / f"{stem}.json"
    decode = decode_state if stem == "state" else decode_event
    for version in [f"{MAJOR + 1}.0", f"{MAJOR - 1}.{MINOR}", f"{MAJOR + 1}.{MINOR + 1}"]:
        with pytest.raises(UnsupportedVersionError) as caught:
            decode(_with_version(path, version))
        assert caught.value.version == version


def _newer(path: Path, **changes: Any) -> bytes:
    """The fixture as a later minor (1.9) writes it: an extra field at the top and inside."""
    data = json.loads(path.read_text())
    data.update(schema_version=f"{MAJOR}.9", referee="Szymon Marciniak", **changes)
    data["clock"]["stoppage_reason"] = "var"
    return json.dumps(data).encode()


def test_a_newer_minor_is_read_with_its_unknown_fields_ignored() -> None:
    """1.9's goal and state decode in this build; what it does not know is left out."""
    goal = decode_event(_newer(REPO / FIXTURE_DIR / SCHEMA_VERSION / "goal.json"))
    assert goal.type == "goal"
    assert goal.schema_version == f"{MAJOR}.9"
    assert "referee" not in goal.model_dump()
    expected = decode_event((REPO / FIXTURE_DIR / SCHEMA_VERSION / "goal.json").read_bytes())
    assert goal.model_copy(update={"schema_version": SCHEMA_VERSION}) == expected
    state = decode_state(_newer(REPO / FIXTURE_DIR / SCHEMA_VERSION / "state.json"))
    assert (
        state.last_seq
        == decode_state((REPO / FIXTURE_DIR / SCHEMA_VERSION / "state.json").read_bytes()).last_seq
    )


def test_a_newer_minors_unknown_event_type_is_skippable_not_invalid() -> None:
    """``cooling_break`` of 1.9: UnknownEventTypeError with its envelope, not a plain rejection."""
    payload = _newer(REPO / FIXTURE_DIR / SCHEMA_VERSION / "goal.json", type="cooling_break")
    with pytest.raises(UnknownEventTypeError) as caught:
        decode_event(payload, topic="t")
    err = caught.value
    assert (err.event_type, err.version, err.topic) == ("cooling_break", f"{MAJOR}.9", "t")
    original = json.loads((REPO / FIXTURE_DIR / SCHEMA_VERSION / "goal.json").read_text())
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
    data = json.loads((REPO / FIXTURE_DIR / SCHEMA_VERSION / "goal.json").read_text())
    data.update(changes)
    with pytest.raises(DecodeError, match=reason) as caught:
        decode_event(json.dumps(data).encode())
    assert not isinstance(caught.value, UnknownEventTypeError)


def test_a_newer_minors_unknown_type_with_a_bad_envelope_is_rejected() -> None:
    data = json.loads((REPO / FIXTURE_DIR / SCHEMA_VERSION / "goal.json").read_text())
    data.update(schema_version=f"{MAJOR}.9", type="cooling_break", seq=0)
    with pytest.raises(DecodeError, match="seq") as caught:
        decode_event(json.dumps(data).encode())
    assert not isinstance(caught.value, UnknownEventTypeError)


def test_a_10_payload_without_run_reads_as_run_0() -> None:
    """The 1.0 fixtures have no ``run``; they decode, as run 0."""
    for path in sorted((REPO / FIXTURE_DIR / "1.0").glob("*.json")):
        assert "run" not in json.loads(path.read_text())
        assert _decode(path).run == 0


def test_a_reader_one_minor_ahead_reads_this_versions_payloads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Simulates the next minor's build: today's fixtures decode there (the slow path)."""
    monkeypatch.setattr(events._codec, "SCHEMA_VERSION", f"{MAJOR}.{MINOR + 1}")
    monkeypatch.setattr(events._codec, "_MINOR", MINOR + 1)
    for path in sorted((REPO / FIXTURE_DIR / SCHEMA_VERSION).glob("*.json")):
        assert _decode(path).schema_version == SCHEMA_VERSION


def test_a_reader_one_minor_behind_skips_this_versions_new_event_types(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Simulates the previous minor's build: an event type new in this version is skipped
    (UnknownEventTypeError, which a consumer counts), the others decode leniently."""
    previous = REPO / FIXTURE_DIR / f"{MAJOR}.{MINOR - 1}"
    if MINOR == 0 or not previous.is_dir():
        pytest.skip("no earlier minor of this major")
    old_types = {p.stem for p in previous.glob("*.json")} - {"state"}
    monkeypatch.setattr(events._codec, "SCHEMA_VERSION", f"{MAJOR}.{MINOR - 1}")
    monkeypatch.setattr(events._codec, "_MINOR", MINOR - 1)
    monkeypatch.setattr(
        events._codec, "_STRICT_VERSIONS", frozenset(f"{MAJOR}.{m}" for m in range(MINOR))
    )
    monkeypatch.setattr(events._codec, "_KNOWN_TYPES", events._codec._KNOWN_TYPES & old_types)
    new_types = set(EVENT_TYPES) - old_types
    for path in sorted((REPO / FIXTURE_DIR / SCHEMA_VERSION).glob("*.json")):
        if path.stem in new_types:
            with pytest.raises(UnknownEventTypeError) as caught:
                decode_event(path.read_bytes())
            assert caught.value.event_type == path.stem
        else:
            assert _decode(path).schema_version == SCHEMA_VERSION
