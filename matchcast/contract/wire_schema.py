"""The wire schema's snapshots and payload fixtures: one kept in place, a frozen copy per release.

``tests/snapshots/wire-schema-current.json`` is the JSON Schema of the events and of the state
snapshot as the models declare them now, ``SCHEMA_VERSION`` included. ``python -m
matchcast.contract.wire_docs`` rewrites it in place, so a change to the wire shows in its diff
as what changed, and nothing else.

A released version is frozen: ``tests/snapshots/wire-schema-{version}.json`` is a copy of the
current snapshot as it was released, ``tests/fixtures/wire/{version}/`` one payload per event
type plus the state as that version wrote them, and ``tests/snapshots/frozen.sha256`` the SHA-256
of each of those files (``sha256sum -c`` reads it). Nothing rewrites them; a test fails when
one differs from its sum. A version is released exactly when its frozen snapshot exists; a
release makes one (:func:`freeze`, ``python -m matchcast.contract.wire_docs --freeze``).

A version under development (``SCHEMA_VERSION`` above the last release) has no committed
fixtures: its payloads are derived from the wire examples (:func:`payloads`).

Tests check that the models' schema equals the snapshot of ``SCHEMA_VERSION``, that a minor
version is additive to the last release (:mod:`matchcast.contract.wire_compat`), and that the
payloads of every released version of this major still decode.

Titles and descriptions are left out of the snapshot: they change no payload's validity, and a
docstring fix should not need a new schema version.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from events import SCHEMA_VERSION, EventAdapter, MatchState, encode_event, encode_state
from matchcast.contract.wire_examples import example_events, example_state

__all__ = [
    "CURRENT_SNAPSHOT",
    "FIXTURE_DIR",
    "FROZEN_SUMS",
    "REGENERATE",
    "SNAPSHOT_DIR",
    "fixture_files",
    "freeze",
    "frozen_files",
    "next_versions",
    "parse_version",
    "payloads",
    "read_sums",
    "released_versions",
    "render_snapshot",
    "snapshot_path",
    "strip_annotations",
    "wire_schema",
]

#: Where the snapshots and fixtures live, relative to the repository root.
SNAPSHOT_DIR = Path("tests/snapshots")
FIXTURE_DIR = Path("tests/fixtures/wire")
#: The snapshot of the schema as it is now, rewritten in place; a release copies it.
CURRENT_SNAPSHOT = SNAPSHOT_DIR / "wire-schema-current.json"
#: ``sha256sum`` lines of every frozen file: each released version's snapshot and fixtures.
FROZEN_SUMS = SNAPSHOT_DIR / "frozen.sha256"
#: The command that writes the contract's files (matchcast.contract.wire_docs).
REGENERATE = "python -m matchcast.contract.wire_docs"

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


def parse_version(text: str) -> tuple[int, int]:
    """``"1.3"`` as ``(1, 3)``, for ordering versions."""
    major, minor = text.split(".")
    return int(major), int(minor)


def next_versions(version: str) -> tuple[str, str]:
    """The versions that may follow a release of ``version``: its next minor, the next major."""
    major, minor = parse_version(version)
    return f"{major}.{minor + 1}", f"{major + 1}.0"


def snapshot_path(version: str = SCHEMA_VERSION) -> Path:
    """The frozen snapshot of a released ``version``, relative to the repository root."""
    return SNAPSHOT_DIR / f"wire-schema-{version}.json"


def released_versions(root: Path) -> list[str]:
    """The released versions, oldest first: those with a frozen snapshot under ``root``."""
    files = (root / SNAPSHOT_DIR).glob("wire-schema-*.json")
    names = (p.stem.removeprefix("wire-schema-") for p in files)
    return sorted((n for n in names if n[:1].isdigit()), key=parse_version)


def _pretty(payload: bytes) -> str:
    return json.dumps(json.loads(payload), indent=2, ensure_ascii=False) + "\n"


def fixture_files() -> dict[str, str]:
    """File name -> text of the current version's payloads: ``{type}.json`` and ``state.json``.

    The payloads are the encoder's output on the wire examples, indented so a diff reads well.
    """
    files = {f"{e.type}.json": _pretty(encode_event(e)) for e in example_events()}
    files["state.json"] = _pretty(encode_state(example_state()))
    return files


def payloads(root: Path, version: str = SCHEMA_VERSION) -> dict[str, bytes]:
    """A payload of every event type and of the state (``"state"``) as ``version`` writes them.

    A released version's come from its frozen fixtures; the version under development's are
    derived from the wire examples, as the release will freeze them.

    Raises:
        ValueError: ``version`` is neither released nor the one under development.
    """
    if version in released_versions(root):
        directory = root / FIXTURE_DIR / version
        return {p.stem: p.read_bytes() for p in sorted(directory.glob("*.json"))}
    if version == SCHEMA_VERSION:
        return {Path(name).stem: text.encode() for name, text in fixture_files().items()}
    raise ValueError(f"wire {version} is neither released nor {SCHEMA_VERSION}, the one in work")


def frozen_files(root: Path, version: str) -> list[Path]:
    """A released ``version``'s frozen files, relative to ``root``: its snapshot, its fixtures."""
    fixtures = sorted((root / FIXTURE_DIR / version).glob("*.json"))
    return [snapshot_path(version), *(p.relative_to(root) for p in fixtures)]


def _sum_line(root: Path, path: Path) -> str:
    return f"{hashlib.sha256((root / path).read_bytes()).hexdigest()}  {path.as_posix()}\n"


def read_sums(root: Path) -> dict[Path, str]:
    """Frozen file (relative to ``root``) -> its SHA-256, as ``FROZEN_SUMS`` lists them."""
    sums: dict[Path, str] = {}
    for line in (root / FROZEN_SUMS).read_text().splitlines():
        digest, _, path = line.partition("  ")
        sums[Path(path)] = digest
    return sums


def freeze(root: Path, schema: dict[str, Any], files: dict[str, str]) -> list[Path]:
    """Release the version under development: its snapshot and fixtures become frozen files.

    The current snapshot is copied to ``wire-schema-{version}.json``, ``files`` (from
    :func:`fixture_files`) are written to ``tests/fixtures/wire/{version}/``, and their sums are
    appended to ``frozen.sha256``; ``version`` is ``schema``'s (from :func:`wire_schema`).

    Returns:
        The files written, relative to ``root``.

    Raises:
        ValueError: the version is already released, or the current snapshot is missing or is
            not ``schema`` (run the command without ``--freeze`` first).
    """
    version = schema["schema_version"]
    if version in released_versions(root):
        raise ValueError(
            f"wire {version} is already released (frozen in {snapshot_path(version)}); "
            "a release with no wire change freezes nothing"
        )
    current = root / CURRENT_SNAPSHOT
    if not current.is_file() or json.loads(current.read_text()) != schema:
        raise ValueError(f"{CURRENT_SNAPSHOT} is missing or stale: run `{REGENERATE}` first")
    directory = root / FIXTURE_DIR / version
    if directory.exists():
        raise ValueError(
            f"{directory.relative_to(root)} exists, but wire {version} has no frozen "
            "snapshot: it was never released; remove it"
        )
    (root / snapshot_path(version)).write_bytes(current.read_bytes())
    directory.mkdir(parents=True)
    for name, text in files.items():
        (directory / name).write_text(text)
    frozen = frozen_files(root, version)
    with (root / FROZEN_SUMS).open("a") as sums:
        sums.writelines(_sum_line(root, path) for path in frozen)
    return [FROZEN_SUMS, *frozen]
