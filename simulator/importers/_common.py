"""What every importer needs: reading JSON, naming records in errors, slugs."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from events import MatchFileError
from simulator._files import IMPORT_FILE, parse_json, read_input

__all__ = ["MAX_PROBLEMS", "fail", "read_json", "record_path", "slug", "validation_problems"]

#: Problems listed in one error; the rest are counted.
MAX_PROBLEMS = 20


def read_json(path: Path) -> Any:
    """The parsed JSON in ``path``, bounded like every input file (see
    :mod:`simulator._files`): a regular file of at most 64 MiB, nested at most 200 deep.

    Raises:
        MatchFileError: missing, not a regular file, too big, unreadable, not UTF-8 JSON, or
            nested too deep.
    """
    return parse_json(read_input(path, IMPORT_FILE), path)


def record_path(loc: Sequence[int | str], root: str = "") -> str:
    """``('matches', 12, 'goals1', 0, 'minute')`` -> ``matches[12].goals1[0].minute``."""
    out = root
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out or "(file)"


def validation_problems(err: ValidationError, root: str = "") -> list[str]:
    """One line per problem of a pydantic error, each naming the record and field."""
    out = []
    for e in err.errors(include_url=False):
        got = e.get("input")
        shown = "" if isinstance(got, dict | list) or got is None else f" (got {got!r})"
        msg = e["msg"].removeprefix("Value error, ")
        out.append(f"{record_path(e['loc'], root)}: {msg}{shown}")
    return out


def fail(path: Path | str, problems: Sequence[str]) -> MatchFileError:
    """A :class:`MatchFileError` listing at most :data:`MAX_PROBLEMS` problems."""
    shown = list(problems[:MAX_PROBLEMS])
    if len(problems) > MAX_PROBLEMS:
        shown.append(f"... and {len(problems) - MAX_PROBLEMS} more")
    return MatchFileError(path, shown)


def slug(text: str) -> str:
    """``Match for third place`` -> ``match-for-third-place``."""
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    return "-".join(re.findall(r"[a-z0-9]+", plain))
