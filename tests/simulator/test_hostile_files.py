"""Hostile input files: every reader refuses each one with one clear error, never a traceback,
a hang or a run on memory (a FIFO, /dev/zero, a huge file, deep nesting, an alias bomb, bad
UTF-8, NUL bytes, a directory, a missing file, a recording with one bad line)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events import MatchFileError, encode_event
from matchcast.load import MergeError, read_reports
from matchcast.testing import match_events
from simulator import (
    IMPORT_FILE,
    LOAD_REPORT,
    MATCH_FILE,
    RECORDING,
    FileKind,
    bundled_path,
    load_match,
    load_recording,
    parse_json,
    parse_yaml,
)
from simulator._files import MAX_JSON_DEPTH, MAX_LINE_BYTES, MAX_YAML_DEPTH, MAX_YAML_NODES
from simulator.importers import import_openfootball, import_statsbomb
from tests._cli import run_cli

EVENTS = match_events()
GOOD_LINE = encode_event(EVENTS[0]) + b"\n"
LATER_LINE = encode_event(EVENTS[1]) + b"\n"
DEEP_JSON = b"[" * 1000 + b"]" * 1000  # about 2 KB: RecursionError in json.loads
DEEP_YAML = b"a: " + b"[" * 1000 + b"]" * 1000 + b"\n"
BLOCK_YAML = b"a:\n" + b"".join(b" " * i + b"- \n" for i in range(1, 300))


def _alias_bomb() -> bytes:
    """Nine levels of nine aliases: about 400 million strings once expanded, 500 bytes here."""
    lines = [b'l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 10):
        refs = ", ".join([f"*l{i - 1}"] * 9)
        lines.append(f"l{i}: &l{i} [{refs}]".encode())
    return b"\n".join(lines) + b"\n"


def _content(data: bytes) -> Callable[[Path, FileKind], None]:
    return lambda path, _kind: path.write_bytes(data) and None


def _fifo(path: Path, _kind: FileKind) -> None:
    os.mkfifo(path)


def _dev_zero(path: Path, _kind: FileKind) -> None:
    path.symlink_to("/dev/zero")


def _huge(path: Path, kind: FileKind) -> None:
    with path.open("wb") as f:
        f.truncate(kind.max_bytes + 1)  # sparse: no disk used


def _directory(path: Path, _kind: FileKind) -> None:
    path.mkdir()


def _missing(_path: Path, _kind: FileKind) -> None:
    pass


#: (case, how to make the file, which suffixes it applies to, what the error says)
CORPUS: list[tuple[str, Callable[[Path, FileKind], None], str, str]] = [
    ("fifo", _fifo, "*", "FIFO"),
    ("dev-zero", _dev_zero, "*", "character device (/dev/zero)"),
    ("huge", _huge, "*", "limit for a"),
    ("directory", _directory, "*", "a directory"),
    ("missing", _missing, "*", "no such file"),
    ("invalid-utf8", _content(b'{"match_id": "\xff\xfe"}\n'), "*", "not UTF-8: byte 14"),
    ("nul", _content(b'{"match_id": 1}\x00\n'), "*", "not valid"),
    ("deep-json", _content(DEEP_JSON), ".json .jsonl", "nested deeper than 200"),
    ("deep-flow-yaml", _content(DEEP_YAML), ".yaml", "nested deeper than 100"),
    ("deep-block-yaml", _content(BLOCK_YAML), ".yaml", "nested deeper than 100"),
    ("alias-bomb", _content(_alias_bomb()), ".yaml", "alias bomb"),
    ("deep-line", _content(GOOD_LINE + DEEP_JSON + b"\n" + LATER_LINE), ".jsonl", "line 2:"),
    ("bad-line", _content(GOOD_LINE + b'{"type": "goal"\n' + LATER_LINE), ".jsonl", "line 2:"),
]

#: (reader, suffix, the kind of file it reads, the reader as a function of the path)
READERS: list[tuple[str, str, FileKind, Callable[[Path], object]]] = [
    ("match-yaml", ".yaml", MATCH_FILE, load_match),
    ("match-json", ".json", MATCH_FILE, load_match),
    ("recording", ".jsonl", RECORDING, load_recording),
    ("openfootball", ".json", IMPORT_FILE, import_openfootball),
    ("statsbomb", ".json", IMPORT_FILE, lambda p: import_statsbomb([p])),
    ("load-report", ".json", LOAD_REPORT, lambda p: read_reports([p])),
]

#: The same readers on the command line (the reports by ``load merge``).
COMMANDS: dict[str, list[str]] = {
    "match-yaml": ["replay"],
    "match-json": ["replay"],
    "recording": ["replay"],
    "openfootball": ["import", "openfootball"],
    "statsbomb": ["import", "statsbomb"],
    "load-report": ["load", "merge"],
}


def _cases(*, blocking: bool) -> list[object]:
    """Every (case, reader) that applies; ``blocking``: only the FIFO and /dev/zero, which
    hang or exhaust memory if the check is missing, so they run in a subprocess."""
    out: list[object] = []
    for case, make, suffixes, expected in CORPUS:
        if (case in ("fifo", "dev-zero")) != blocking:
            continue
        for reader, suffix, kind, read in READERS:
            if suffixes == "*" or suffix in suffixes.split():
                args = (make, suffix, kind, read, expected, reader)
                out.append(pytest.param(*args, id=f"{case}-{reader}"))
    return out


def _make(
    tmp_path: Path, make: Callable[[Path, FileKind], None], suffix: str, kind: FileKind
) -> Path:
    path = tmp_path / f"hostile{suffix}"
    make(path, kind)
    return path


@pytest.mark.parametrize(
    ("make", "suffix", "kind", "read", "expected", "reader"), _cases(blocking=False)
)
def test_every_reader_refuses_a_hostile_file_with_an_error_naming_it(
    tmp_path: Path,
    make: Callable[[Path, FileKind], None],
    suffix: str,
    kind: FileKind,
    read: Callable[[Path], object],
    expected: str,
    reader: str,
) -> None:
    path = _make(tmp_path, make, suffix, kind)
    with pytest.raises((MatchFileError, MergeError)) as info:
        read(path)
    assert str(path) in str(info.value)
    assert expected in str(info.value)


@pytest.mark.parametrize(
    ("make", "suffix", "kind", "read", "expected", "reader"), _cases(blocking=False)
)
def test_the_command_line_says_one_clear_error_and_exits_2(
    tmp_path: Path,
    make: Callable[[Path, FileKind], None],
    suffix: str,
    kind: FileKind,
    read: Callable[[Path], object],
    expected: str,
    reader: str,
) -> None:
    path = _make(tmp_path, make, suffix, kind)
    result = run_cli(*COMMANDS[reader], str(path))
    assert result.code == 2, result.stderr
    assert result.stderr.startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    assert str(path) in result.stderr.replace("\n", "")
    assert expected in result.stderr.replace("\n", " ")


@pytest.mark.parametrize(
    ("make", "suffix", "kind", "read", "expected", "reader"), _cases(blocking=True)
)
def test_a_fifo_or_dev_zero_never_hangs_or_exhausts_the_command(
    tmp_path: Path,
    make: Callable[[Path, FileKind], None],
    suffix: str,
    kind: FileKind,
    read: Callable[[Path], object],
    expected: str,
    reader: str,
) -> None:
    """In a subprocess with a timeout: without the check, a FIFO blocks the open forever and
    /dev/zero is read until memory runs out."""
    path = _make(tmp_path, make, suffix, kind)
    result = subprocess.run(
        [sys.executable, "-m", "matchcast", *COMMANDS[reader], str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "MATCHCAST_BROKER": "", "COLUMNS": "400"},
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: ")
    assert "Traceback" not in result.stderr
    assert expected in result.stderr


def test_a_recording_names_each_bad_line_and_reads_the_good_ones_around_it(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    third = encode_event(EVENTS[2]) + b"\n"
    path.write_bytes(GOOD_LINE + DEEP_JSON + b"\n" + LATER_LINE + b"\xff\n" + third)
    with pytest.raises(MatchFileError) as info:
        load_recording(path)
    problems = info.value.problems
    assert [p.split(":")[0] for p in problems] == ["line 2", "line 4"], problems
    assert "nested deeper than 200" in problems[0]
    assert "not UTF-8" in problems[1]


def test_a_line_longer_than_any_message_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(GOOD_LINE + b"[" * (2 * 1024 * 1024) + b"\n")
    with pytest.raises(MatchFileError, match=r"line 2: longer than 1\.0 MiB"):
        load_recording(path)
    path.write_bytes(GOOD_LINE + b"{bad\n" + b"[" * (2 * 1024 * 1024) + b"\n")
    with pytest.raises(MatchFileError) as info:
        load_recording(path)
    assert [p.split(":")[0] for p in info.value.problems] == ["line 2", "line 3"]


def test_yaml_anchors_and_aliases_within_bounds_still_load() -> None:
    data = parse_yaml(b"team: &t {code: ARG}\nagain: *t\nlist: [*t, *t]\n", "x.yaml")
    assert data == {
        "team": {"code": "ARG"},
        "again": {"code": "ARG"},
        "list": [{"code": "ARG"}] * 2,
    }


def test_a_yaml_alias_inside_the_node_it_names_is_refused() -> None:
    with pytest.raises(MatchFileError, match=r"alias \*a is inside the node it names"):
        parse_yaml(b"a: &a [1, *a]\n", "x.yaml")


def test_an_alias_to_a_deep_node_counts_its_depth() -> None:
    deep = b"[" * 60 + b"]" * 60
    with pytest.raises(MatchFileError, match="nested deeper than 100"):
        parse_yaml(b"a: &a " + deep + b"\nb: " + b"[" * 50 + b"*a" + b"]" * 50 + b"\n", "x.yaml")


@pytest.mark.parametrize(
    "value",
    [b"2026-13-45", b"2026-07-14 25:61:61", b"!!int x", b"!!float x", b"!!timestamp 2026-02-30"],
)
def test_a_yaml_value_its_type_cannot_hold_is_a_match_file_error(
    tmp_path: Path, value: bytes
) -> None:
    """PyYAML raises ValueError, not YAMLError, for these: once a traceback."""
    path = tmp_path / "m.yaml"
    path.write_bytes(SEMI_BYTES.replace(b"date: 2026-07-15", b"date: " + value, 1))
    with pytest.raises(MatchFileError, match="not valid YAML"):
        load_match(path)


SEMI_BYTES = bundled_path("semifinal").read_bytes()


@st.composite
def _match_bytes(draw: st.DrawFn) -> bytes:
    """Bytes near a real match file: random, or the semi-final with bytes changed, cut or
    inserted (deep brackets and alias syntax among them)."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=300))
    data = bytearray(SEMI_BYTES)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        piece = draw(
            st.one_of(
                st.binary(max_size=8),
                st.sampled_from(
                    [b"[" * 500, b"{a: " * 300, b"&x ", b"*x", b"\x00", b"\xff", b"2026-13-45"]
                ),
            )
        )
        cut = draw(st.integers(0, 8))
        data[at : at + cut] = piece
    return bytes(data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=_match_bytes(), suffix=st.sampled_from([".yaml", ".json"]))
def test_any_match_file_bytes_load_or_give_a_match_file_error(data: bytes, suffix: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"m{suffix}"
        path.write_bytes(data)
        try:
            match = load_match(path)
        except MatchFileError as err:
            error = err
        else:
            assert match.match_id
            return
    assert error.problems
    assert str(path) in str(error)


def test_the_documented_limits_are_the_limits_applied() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "match-format.md").read_text()
    for kind in (MATCH_FILE, RECORDING, IMPORT_FILE, LOAD_REPORT):
        assert f"{kind.max_bytes // 2**20} MiB" in doc, kind.name
    assert f"{MAX_LINE_BYTES // 2**20} MiB per line" in doc
    assert f"{MAX_JSON_DEPTH} levels: pydantic-core" in doc
    assert f"{MAX_YAML_DEPTH} levels, counted" in doc
    assert f"{MAX_YAML_NODES:,}: an alias bomb" in doc
    # MAX_JSON_DEPTH states pydantic-core's own limit: say so if a release moves it.
    assert parse_json(b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH, "x.json")
    with pytest.raises(MatchFileError, match="nested deeper"):
        parse_json(b"[" * (MAX_JSON_DEPTH + 2) + b"]" * (MAX_JSON_DEPTH + 2), "x.json")
