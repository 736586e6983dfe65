"""The wire's release cycle on a copy of the snapshots: a change before a release updates one
snapshot in place, a release freezes a copy (``wire_docs --freeze``), a released version never
moves."""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from events import SCHEMA_VERSION
from matchcast.contract.wire_docs import bump_message, snapshot_problems
from matchcast.contract.wire_schema import (
    CURRENT_SNAPSHOT,
    FIXTURE_DIR,
    FROZEN_SUMS,
    SNAPSHOT_DIR,
    fixture_files,
    freeze,
    next_versions,
    payloads,
    read_sums,
    released_versions,
    render_snapshot,
    snapshot_path,
    wire_schema,
)

REPO = Path(__file__).resolve().parents[1]
SCHEMA = wire_schema()
MINOR, MAJOR = next_versions(SCHEMA_VERSION)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A repository holding only this checkout's snapshots and fixtures, with wire
    SCHEMA_VERSION released (as it is at a release; the checkout may be past it)."""
    shutil.copytree(REPO / SNAPSHOT_DIR, tmp_path / SNAPSHOT_DIR)
    shutil.copytree(REPO / FIXTURE_DIR, tmp_path / FIXTURE_DIR)
    if SCHEMA_VERSION not in released_versions(tmp_path):
        freeze(tmp_path, SCHEMA, fixture_files())
    return tmp_path


class Sync:
    """Stands in for the command's writer: writes under ``root`` what differs, and records it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.written: list[Path] = []

    def __call__(self, path: Path, text: str) -> None:
        target = self.root / path
        if not target.is_file() or target.read_text() != text:
            target.write_text(text)
            self.written.append(path)


def _files(root: Path) -> dict[Path, bytes]:
    return {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _pretend(version: str, *fields: str, drop: str = "") -> dict[str, Any]:
    """The schema as it would be at ``version`` with optional ``fields`` added to Goal and the
    field ``drop`` taken out of it."""
    schema = copy.deepcopy(SCHEMA)
    schema["schema_version"] = version
    goal = schema["event"]["$defs"]["Goal"]
    for name in fields:
        goal["properties"][name] = {
            "anyOf": [{"type": "string"}, {"type": "null"}],
            "default": None,
        }
    if drop:
        del goal["properties"][drop]
    return schema


def test_the_released_version_unchanged_writes_nothing(root: Path) -> None:
    sync = Sync(root)
    assert snapshot_problems(root, SCHEMA, sync) == []
    assert sync.written == []


def test_a_change_to_the_released_version_asks_for_a_bump(root: Path) -> None:
    before = _files(root)
    sync = Sync(root)
    assert snapshot_problems(root, _pretend(SCHEMA_VERSION, "x_pretend_a"), sync) == [
        bump_message(SCHEMA_VERSION)
    ]
    assert (sync.written, _files(root)) == ([], before)


def test_changes_before_a_release_update_one_snapshot_in_place(root: Path) -> None:
    """The next minor, then a second change in it: the current snapshot is rewritten in place,
    its diff is the change (and the version), and no other file is written."""
    before = _files(root)
    sync = Sync(root)
    assert snapshot_problems(root, _pretend(MINOR, "x_pretend_a"), sync) == []
    assert snapshot_problems(root, _pretend(MINOR, "x_pretend_a", "x_pretend_b"), sync) == []
    after = _files(root)
    assert sync.written == [CURRENT_SNAPSHOT, CURRENT_SNAPSHOT]
    assert set(after) == set(before)
    assert {p for p in before if before[p] != after[p]} == {CURRENT_SNAPSHOT}
    assert json.loads(after[CURRENT_SNAPSHOT]) == _pretend(MINOR, "x_pretend_a", "x_pretend_b")
    diff = list(
        difflib.unified_diff(
            before[CURRENT_SNAPSHOT].decode().splitlines(),
            after[CURRENT_SNAPSHOT].decode().splitlines(),
            n=0,
        )
    )
    removed = [line for line in diff if line.startswith("-") and not line.startswith("---")]
    added = [line for line in diff if line.startswith("+") and not line.startswith("+++")]
    assert removed, "the version did not change"
    assert all(SCHEMA_VERSION in line for line in removed), removed  # only the version's lines
    assert len(added) - len(removed) < 40, "more than the two new fields were added"


def test_a_minor_that_is_not_additive_is_refused(root: Path) -> None:
    [problem] = snapshot_problems(root, _pretend(MINOR, drop="detail"), Sync(root))
    assert f"wire {MINOR} is a minor version of {SCHEMA_VERSION} but not additive" in problem
    assert "/event/$defs/Goal/properties/detail removed" in problem
    assert f"SCHEMA_VERSION {MAJOR}" in problem


def test_a_major_may_break(root: Path) -> None:
    assert snapshot_problems(root, _pretend(MAJOR, drop="detail"), Sync(root)) == []


def test_a_version_past_the_next_is_refused(root: Path) -> None:
    """Every change between two releases goes into one version."""
    skipped = next_versions(MINOR)[0]
    sync = Sync(root)
    [problem] = snapshot_problems(root, _pretend(skipped, "x_pretend_a"), sync)
    assert f"SCHEMA_VERSION is {skipped}, but the last release is {SCHEMA_VERSION}" in problem
    assert sync.written == []


def test_a_release_freezes_the_next_snapshot_and_writes_its_fixtures(root: Path) -> None:
    schema = _pretend(MINOR, "x_pretend_a")
    snapshot_problems(root, schema, Sync(root))
    files = fixture_files()
    changed = freeze(root, schema, files)
    assert released_versions(root)[-1] == MINOR
    frozen = (root / snapshot_path(MINOR)).read_bytes()
    assert frozen == (root / CURRENT_SNAPSHOT).read_bytes()
    assert json.loads(frozen) == schema
    written = {name: (root / FIXTURE_DIR / MINOR / name).read_text() for name in files}
    assert written == files
    assert set(payloads(root, MINOR)) == {Path(name).stem for name in files}
    sums = read_sums(root)
    for path in [snapshot_path(MINOR), *(FIXTURE_DIR / MINOR / name for name in files)]:
        assert path in changed
        assert sums[path] == hashlib.sha256((root / path).read_bytes()).hexdigest()
    # Released: the snapshot is frozen, and a further change needs the next version again.
    sync = Sync(root)
    assert snapshot_problems(root, schema, sync) == []
    assert snapshot_problems(root, _pretend(MINOR, "x_pretend_a", "x_pretend_b"), sync) == [
        bump_message(MINOR)
    ]
    assert sync.written == []
    with pytest.raises(ValueError, match="already released"):
        freeze(root, schema, files)


def test_a_release_refuses_a_stale_next_snapshot(root: Path) -> None:
    snapshot_problems(root, _pretend(MINOR, "x_pretend_a"), Sync(root))
    before = _files(root)
    with pytest.raises(ValueError, match="missing or stale"):
        freeze(root, _pretend(MINOR, "x_pretend_a", "x_pretend_b"), fixture_files())
    assert _files(root) == before
    assert FROZEN_SUMS in before


def test_a_missing_current_snapshot_is_written(root: Path) -> None:
    (root / CURRENT_SNAPSHOT).unlink()
    sync = Sync(root)
    assert snapshot_problems(root, SCHEMA, sync) == []
    assert sync.written == [CURRENT_SNAPSHOT]
    assert (root / CURRENT_SNAPSHOT).read_text() == render_snapshot(SCHEMA)
