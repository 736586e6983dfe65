"""A match file's validation error as the lines a person reads: one per problem, each quoted
input cut, at most :data:`events.MAX_PROBLEMS` of them, each with its line and column in the
file where the file's positions (simulator/_files.py) say.
"""

from __future__ import annotations

import re

from pydantic import ValidationError

from events import MAX_PROBLEMS, MESSAGE_LIMIT, clip, quote
from simulator._files import Positions


def _where(loc: tuple[str | int, ...], positions: Positions | None) -> str:
    """`` (line L, column C)`` of the value at ``loc``, or of the nearest value around it
    that the file has (a missing field: its mapping); empty without positions."""
    if not positions:
        return ""
    at: tuple[str | int, ...] = ()
    for part in loc:  # a union's member name in ``loc`` is no key of the file: skipped
        if (*at, part) in positions:
            at = (*at, part)
    if not at:  # the top level: its line says nothing
        return ""
    line, column = positions[at]
    return f" (line {line}, column {column})"


#: A whole-file rule's problem that names its field first: ``timeline.0.team: ...``.
_NAMED = re.compile(r"([A-Za-z_][\w]*(?:\.\w+)*): ")


def _locate(problem: str, positions: Positions | None) -> str:
    """A whole-file rule's ``problem``, with the line and column of the field it names."""
    named = _NAMED.match(problem)
    if named is None:
        return problem
    loc = tuple(int(p) if p.isdigit() else p for p in named[1].split("."))
    return f"{named[1]}{_where(loc, positions)}: {problem[named.end() :]}"


def _problems(err: ValidationError, positions: Positions | None = None) -> list[str]:
    """One line per problem, each quoted input cut (:func:`events.quote`), at most
    :data:`MAX_PROBLEMS` of them and how many more; each with its line and column in the
    file where ``positions`` says."""
    out = []
    for e in err.errors(include_url=False):
        loc = ".".join(clip(str(p)) for p in e["loc"]) or "(file)"
        if loc != "(file)":
            loc += _where(tuple(e["loc"]), positions)
        msg = clip(e["msg"].removeprefix("Value error, "), MESSAGE_LIMIT)
        if e["type"] == "value_error":
            out += [
                f"{loc}: {m}" if loc != "(file)" else _locate(m, positions) for m in msg.split("; ")
            ]
        else:
            got = e.get("input")
            shown = "" if isinstance(got, dict | list) or got is None else f" (got {quote(got)})"
            out.append(f"{loc}: {msg}{shown}")
    if len(out) > MAX_PROBLEMS:
        out[MAX_PROBLEMS:] = [f"and {len(out) - MAX_PROBLEMS} more problems"]
    return out
