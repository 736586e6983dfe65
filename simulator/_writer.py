"""Write a match back out as a match file, the same bytes for the same match.

Importers and the simulator build :class:`~simulator.Match` objects; this turns them into the
YAML (or JSON) that :func:`~simulator.load_match` reads, so every match can be inspected,
edited and replayed like the bundled semi-final.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import yaml

from events import MatchFileError
from simulator._matchfile import Match

__all__ = ["MatchFormat", "dump_match", "write_match"]

MatchFormat = Literal["yaml", "json"]


def dump_match(match: Match, fmt: MatchFormat = "yaml", *, header: str | None = None) -> str:
    """The text of a match file for ``match``.

    Args:
        match: the match.
        fmt: ``yaml`` or ``json``.
        header: comment lines put at the top of a YAML file (ignored for JSON).
    """
    data = _tidy(match.model_dump(mode="json", exclude_none=True))
    if fmt == "json":
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
    if header:
        comment = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
        text = comment + text
    return text


def _tidy(value: object) -> object:
    """Reorder every mapping as people read it: ``type`` first, ``source`` and ``note`` last."""
    if isinstance(value, list):
        return [_tidy(v) for v in value]
    if not isinstance(value, dict):
        return value
    first = [k for k in ("type",) if k in value]
    last = [k for k in ("source", "note") if k in value]
    middle = [k for k in value if k not in first and k not in last]
    return {k: _tidy(value[k]) for k in (*first, *middle, *last)}


def write_match(match: Match, path: Path | str, *, header: str | None = None) -> Path:
    """Write ``match`` to ``path`` (JSON for ``.json``, YAML otherwise); returns the path.

    Raises:
        MatchFileError: the file cannot be written.
    """
    path = Path(path)
    fmt: MatchFormat = "json" if path.suffix == ".json" else "yaml"
    try:
        path.write_text(dump_match(match, fmt, header=header), encoding="utf-8")
    except OSError as err:
        raise MatchFileError(path, [f"cannot write: {err.strerror or err}"]) from None
    return path
