"""Input files, bounded before they are read: the one boundary every file read crosses.

matchcast reads match files, recordings, import files and load reports. Each is checked here
before a byte is read or parsed, so a hostile or mistaken file costs one clear error:

- the path opens without blocking (``O_NONBLOCK``: a FIFO never hangs the open) and the open
  file is a regular file (not a FIFO, a device such as ``/dev/zero``, a socket or a directory;
  checked on the open descriptor, so a symlink is judged by what it points to);
- it is no larger than the limit of its :class:`FileKind`, and no more than that is ever read
  (a file that grows while it is read is refused too);
- JSON is parsed by pydantic-core's parser, which refuses nesting past its limit
  (:data:`MAX_JSON_DEPTH`) instead of recursing; YAML is parsed with a depth counter
  (:data:`MAX_YAML_DEPTH`) and a count of nodes with every alias expanded
  (:data:`MAX_YAML_NODES`), so neither deep nesting nor an alias bomb ("billion laughs")
  gets past the parser;
- the text is UTF-8; a bad byte is named by its offset.

Every problem is a :class:`~events.MatchFileError` naming the file and what to do.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import pydantic_core
import yaml

from events import MatchFileError

__all__ = [
    "IMPORT_FILE",
    "LOAD_REPORT",
    "MATCH_FILE",
    "MAX_JSON_DEPTH",
    "MAX_LINE_BYTES",
    "MAX_YAML_DEPTH",
    "MAX_YAML_NODES",
    "RECORDING",
    "FileKind",
    "Positions",
    "input_lines",
    "load_input",
    "open_input",
    "parse_json",
    "parse_yaml",
    "read_input",
]

_MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class FileKind:
    """A kind of input file and its size limit.

    Attributes:
        name: what the file is, in words (``match file``).
        max_bytes: the largest file of this kind read.
        expected: what to give instead of a file that is not one (``a match file (.yaml, ...)``).
        too_big: what to do with a file over the limit.
    """

    name: str
    max_bytes: int
    expected: str
    too_big: str


MATCH_FILE = FileKind(
    "match file",
    8 * _MIB,
    "a match file (.yaml, .yml or .json)",
    "a real match file is a few KB: is it the right file?",
)
RECORDING = FileKind(
    "recording",
    256 * _MIB,
    "a recording (.jsonl) written by the recorder subscriber",
    "split it into smaller recordings (a recording's lines may be split at any line)",
)
IMPORT_FILE = FileKind(
    "import file",
    64 * _MIB,
    "an openfootball or StatsBomb JSON file",
    "a StatsBomb events file is under 10 MB: is it the right file?",
)
LOAD_REPORT = FileKind(
    "load report",
    256 * _MIB,
    "a report written by matchcast load --report",
    "is it a matchcast load report?",
)

#: Nesting pydantic-core's JSON parser accepts; deeper input is refused, never recursed into.
MAX_JSON_DEPTH = 200
#: Nesting accepted in YAML (a match file is about 5 deep).
MAX_YAML_DEPTH = 100
#: Nodes a YAML document may hold, each alias counted as a full copy of what it names.
MAX_YAML_NODES = 1_000_000
#: The longest line of a recording: a wire payload (256 KiB at most) wrapped in a snapshot.
MAX_LINE_BYTES = 1 * _MIB

_TYPES = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _size(n: int) -> str:
    return f"{n / _MIB:.1f} MiB" if n >= _MIB else f"{n:,} bytes"


def _limit(kind: FileKind) -> str:
    return f"over the {_size(kind.max_bytes)} limit for a {kind.name}: {kind.too_big}"


def _not_regular(path: Path, mode: int, kind: FileKind) -> MatchFileError:
    what = next((name for test, name in _TYPES if test(mode)), "not a regular file")
    real = os.path.realpath(path)
    via = f" ({real})" if real != os.path.abspath(path) else ""
    return MatchFileError(path, [f"is {what}{via}, not a regular file: give {kind.expected}"])


@contextlib.contextmanager
def open_input(path: Path | str, kind: FileKind) -> Iterator[BinaryIO]:
    """Open ``path`` for reading once it is known to be a regular file within ``kind``'s limit.

    Raises:
        MatchFileError: missing, unreadable, not a regular file, or over the size limit.
    """
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise MatchFileError(path, [f"no such file: give {kind.expected}"]) from None
    except OSError as err:
        raise MatchFileError(path, [f"cannot open it: {err.strerror or err}"]) from None
    try:
        _check(fd, path, kind)
        f = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with f:
        yield f


def _check(fd: int, path: Path, kind: FileKind) -> None:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise _not_regular(path, info.st_mode, kind)
    if info.st_size > kind.max_bytes:
        raise MatchFileError(path, [f"is {_size(info.st_size)}, {_limit(kind)}"])
    os.set_blocking(fd, True)


def read_input(path: Path | str, kind: FileKind) -> bytes:
    """The bytes of ``path``, read only if it is a regular file within ``kind``'s limit.

    Raises:
        MatchFileError: as :func:`open_input`, or the file grew past the limit while read.
    """
    with open_input(path, kind) as f:
        try:
            data = f.read(kind.max_bytes + 1)
        except OSError as err:
            raise MatchFileError(path, [f"cannot read it: {err.strerror or err}"]) from None
    if len(data) > kind.max_bytes:
        raise MatchFileError(path, [f"grew while being read, {_limit(kind)}"])
    return data


def input_lines(
    path: Path | str, kind: FileKind, *, max_line: int = MAX_LINE_BYTES
) -> Generator[tuple[int, bytes], None, None]:
    """The non-blank lines of ``path`` with their numbers (from 1), each at most ``max_line``.

    Raises:
        MatchFileError: as :func:`read_input`, or a line is longer than ``max_line``.
    """
    total = 0
    with open_input(path, kind) as f:
        for n in range(1, 2**63):
            try:
                line = f.readline(max_line + 1)
            except OSError as err:
                raise MatchFileError(path, [f"cannot read it: {err.strerror or err}"]) from None
            if not line:
                return
            total += len(line)
            if total > kind.max_bytes:
                raise MatchFileError(path, [f"grew while being read, {_limit(kind)}"])
            if len(line) > max_line:
                raise MatchFileError(
                    path,
                    [
                        f"line {n}: longer than {_size(max_line)}; no event or snapshot is that "
                        f"long: give {kind.expected}"
                    ],
                )
            if line.strip():
                yield n, line


def _utf8(data: bytes, path: Path | str, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise MatchFileError(
            path, [f"{where}not UTF-8: byte {err.start} is {data[err.start : err.start + 1]!r}"]
        ) from None


def parse_json(data: bytes, path: Path | str, *, line: int | None = None) -> Any:
    """The JSON value in ``data`` (read from ``path``, at ``line`` of it if given).

    Parsed by pydantic-core, which refuses nesting deeper than :data:`MAX_JSON_DEPTH`.

    Raises:
        MatchFileError: not UTF-8, not JSON, or nested too deep; names the line if given.
    """
    where = f"line {line}: " if line is not None else ""
    try:
        return pydantic_core.from_json(data)
    except ValueError as err:
        _utf8(data, path, where)  # a clearer message than the parser's for a bad byte
        reason = str(err)
        if "recursion limit" in reason:
            reason = f"nested deeper than {MAX_JSON_DEPTH} levels ({reason})"
        raise MatchFileError(path, [f"{where}not valid JSON: {reason}"]) from None


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing depth and alias bombs as the events arrive.

    The composer recurses once per level and builds a node per event; counting here, before
    it does, keeps the recursion under :data:`MAX_YAML_DEPTH`. An alias is counted as a full
    copy of the node it names, which is what validation would walk.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._open: list[tuple[str | None, int, list[int]]] = []  # anchor, nodes at start, height
        self._anchored: dict[str, tuple[int, int]] = {}  # anchor -> (nodes, height)
        self._nodes = 0

    def _refuse(self, event: yaml.Event, what: str) -> yaml.MarkedYAMLError:
        mark = event.start_mark  # the pure-Python parser's, a yaml.error.Mark
        return yaml.MarkedYAMLError(problem=what, problem_mark=mark)  # type: ignore[arg-type]

    def _grow(self, event: yaml.Event, nodes: int, height: int) -> None:
        self._nodes += nodes
        if self._nodes > MAX_YAML_NODES:
            raise self._refuse(
                event,
                f"more than {MAX_YAML_NODES:,} nodes, aliases expanded (an alias bomb?)",
            )
        if len(self._open) + height > MAX_YAML_DEPTH:
            raise self._refuse(event, f"nested deeper than {MAX_YAML_DEPTH} levels")
        if self._open:
            parent = self._open[-1][2]
            parent[0] = max(parent[0], height + 1)

    def get_event(self) -> Any:
        event = super().get_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            if any(a == event.anchor for a, _, _ in self._open):
                raise self._refuse(event, f"alias *{event.anchor} is inside the node it names")
            if event.anchor in self._anchored:  # else the composer says it is undefined
                nodes, height = self._anchored[event.anchor]
                self._grow(event, nodes, height)
        elif isinstance(event, yaml.ScalarEvent):
            self._grow(event, 1, 0)
            if event.anchor is not None:
                self._anchored[event.anchor] = (1, 0)
        elif isinstance(event, yaml.CollectionStartEvent):
            self._grow(event, 1, 1)
            self._open.append((event.anchor, self._nodes, [1]))
        elif isinstance(event, yaml.CollectionEndEvent) and self._open:
            anchor, start, tallest = self._open.pop()
            if self._open:
                parent = self._open[-1][2]
                parent[0] = max(parent[0], tallest[0] + 1)
            if anchor is not None:
                self._anchored[anchor] = (self._nodes - start + 1, tallest[0])
        return event


#: Where each value of a parsed document starts: its path of keys and indices (as in a
#: validation error's ``loc``) to its line and column, both counted from 1.
Positions = dict[tuple[str | int, ...], tuple[int, int]]


def _positions(
    node: yaml.Node, at: tuple[str | int, ...], out: Positions, budget: list[int]
) -> None:
    """Record where ``node`` and everything under it start (an alias's copy is not walked
    again: its first place is the one a person edits)."""
    if budget[0] <= 0 or at in out:
        return
    budget[0] -= 1
    out[at] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                _positions(value, (*at, str(key.value)), out, budget)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _positions(item, (*at, i), out, budget)


def parse_yaml(data: bytes, path: Path | str, positions: Positions | None = None) -> Any:
    """The YAML document in ``data`` (read from ``path``), safely and within bounds.

    Args:
        positions: filled with where each value starts, for errors that name a line.

    Raises:
        MatchFileError: not UTF-8, not YAML, nested deeper than :data:`MAX_YAML_DEPTH`, or
            more than :data:`MAX_YAML_NODES` nodes with aliases expanded.
    """
    text = _utf8(data, path, "")
    try:
        loader = _BoundedLoader(text)
        loader.name = Path(path).name
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            if positions is not None:
                _positions(node, (), positions, [MAX_YAML_NODES])
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except (yaml.YAMLError, ValueError, OverflowError) as err:  # ValueError: 2026-13-45
        raise MatchFileError(path, [f"not valid YAML: {' '.join(str(err).split())}"]) from None


def load_input(path: Path | str, kind: FileKind, positions: Positions | None = None) -> Any:
    """Read ``path`` within ``kind``'s bounds and parse it: JSON for ``.json``, YAML otherwise.

    Args:
        positions: filled with where each value starts (a YAML file's; JSON has none).

    Raises:
        MatchFileError: as :func:`read_input`, :func:`parse_json` or :func:`parse_yaml`.
    """
    data = read_input(path, kind)
    if Path(path).suffix == ".json":
        return parse_json(data, path)
    return parse_yaml(data, path, positions)
