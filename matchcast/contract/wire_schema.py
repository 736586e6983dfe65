"""The wire schema as a committed snapshot, and payload fixtures per schema version.

``tests/snapshots/wire-schema-{version}.json`` holds the JSON Schema of the events and of the
state snapshot as of each :data:`events.SCHEMA_VERSION`; a test fails when the models' schema
differs from the snapshot of the current version, so the schema never changes without the
version changing. ``tests/fixtures/wire/{version}/`` holds one payload per event type plus the
state, as that version wrote them; a test decodes every fixture of the current major, so a
minor version that could not read its predecessors' payloads fails.

Titles and descriptions are left out of the snapshot: they change no payload's validity, and a
docstring fix should not need a new schema version.

Both are written by ``python -m matchcast.contract.wire_docs`` (see there), never overwritten.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from events import SCHEMA_VERSION, EventAdapter, MatchState, encode_event, encode_state
from matchcast.contract.wire_examples import example_events, example_state

__all__ = [
    "FIXTURE_DIR",
    "SNAPSHOT_DIR",
    "fixture_files",
    "render_snapshot",
    "snapshot_path",
    "strip_annotations",
    "wire_schema",
]

#: Where the snapshots and fixtures live, relative to the repository root.
SNAPSHOT_DIR = Path("tests/snapshots")
FIXTURE_DIR = Path("tests/fixtures/wire")

_ANNOTATIONS = frozenset({"title", "description", "examples"})
#: Keywords whose value is a map of names to schemas, a list of schemas, or one schema.
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})
_SCHEMA_LISTS = frozenset({"oneOf", "anyOf", "allOf", "prefixItems"})
_SCHEMA_ONE = frozenset(
    {"items", "additionalProperties", "propertyNames", "not", "contains", "if", "then", "else"}
)


def strip_annotations(schema: Any) -> Any:
    """``schema`` without ``title``, ``description`` and ``examples``, at every level.

    Only schema objects lose them: a property that happens to be *named* ``title`` stays.
    """
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _ANNOTATIONS:
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: strip_annotations(sub) for name, sub in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [strip_annotations(sub) for sub in value]
        elif key in _SCHEMA_ONE:
            out[key] = (
                [strip_annotations(sub) for sub in value]
                if isinstance(value, list)
                else strip_annotations(value)
            )
        else:
            out[key] = value
    return out


def wire_schema() -> dict[str, Any]:
    """What the snapshot of the current version holds: the event union and the state."""
    return {
        "schema_version": SCHEMA_VERSION,
        "event": strip_annotations(EventAdapter.json_schema()),
        "state": strip_annotations(MatchState.model_json_schema()),
    }


def render_snapshot(schema: dict[str, Any]) -> str:
    """The snapshot file's text."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def snapshot_path(version: str = SCHEMA_VERSION) -> Path:
    """The snapshot of ``version``, relative to the repository root."""
    return SNAPSHOT_DIR / f"wire-schema-{version}.json"


def _pretty(payload: bytes) -> str:
    return json.dumps(json.loads(payload), indent=2, ensure_ascii=False) + "\n"


def fixture_files() -> dict[str, str]:
    """File name -> text of the current version's fixtures: ``{type}.json`` and ``state.json``.

    The payloads are the encoder's output, indented so a diff reads well.
    """
    files = {f"{e.type}.json": _pretty(encode_event(e)) for e in example_events()}
    files["state.json"] = _pretty(encode_state(example_state()))
    return files
