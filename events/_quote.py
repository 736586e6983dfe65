"""Input quoted in a message: cut first, in one place, before anything else touches it.

Whatever matchcast says about input it was given (a rejection reason, a log value, a dead
letter, a terminal line, an ``error:`` line) quotes at most :data:`QUOTE_LIMIT` characters of
each piece of input, followed by ``…[+N chars]``; the cut comes before any other processing
(redaction, escaping, rendering), so the time a message costs never grows with the length of
a string an attacker chose. A 100,000-letter event ``type`` once froze every consumer for half
a minute: its rejection reason quoted it whole, and each step after took its time on it.

- :func:`clip` cuts a piece of input text; :func:`clip_bytes` a payload (for an excerpt);
- :func:`quote` is :func:`clip` in quotes, for a message (``f"not {quote(value)}"``);
- :func:`format_validation_error` is pydantic's verdict, one line per problem, each quoted
  input cut, at most :data:`MAX_PROBLEMS` problems;
- :data:`MESSAGE_LIMIT` bounds a whole message built from cut pieces, as a last guard.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

__all__ = [
    "MAX_PROBLEMS",
    "MESSAGE_LIMIT",
    "QUOTE_LIMIT",
    "clip",
    "clip_bytes",
    "format_validation_error",
    "quote",
    "validation_problems",
]

#: Characters of one piece of input a message quotes; the rest is counted, not shown.
QUOTE_LIMIT = 200
#: Characters of a whole message (a reason, an error line) built from quoted input.
MESSAGE_LIMIT = 2000
#: Problems a validation verdict lists; the rest are counted.
MAX_PROBLEMS = 10


def clip(text: str, limit: int = QUOTE_LIMIT) -> str:
    """``text``, or its first ``limit`` characters and ``…[+N chars]``.

    >>> clip("a" * 205)[-14:]
    'aaaa…[+5 chars]'
    """
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…[+{len(text) - limit} chars]"


def clip_bytes(data: bytes, limit: int = QUOTE_LIMIT) -> str:
    """The first ``limit`` bytes of ``data`` as text (undecodable bytes as U+FFFD), and
    ``…[+N bytes]`` when there are more: a payload's excerpt for a log line."""
    head = data[:limit].decode("utf-8", "replace")
    if len(data) <= limit:
        return head
    return f"{head}…[+{len(data) - limit} bytes]"


def quote(value: object, limit: int = QUOTE_LIMIT) -> str:
    """``repr`` of a piece of input, cut first: ``'abc'``, ``'aaa…[+99800 chars]'``.

    A string is cut before ``repr`` sees it; anything else is cut after, and never holds
    much (a number, None).
    """
    if isinstance(value, str):
        return repr(clip(value, limit))
    if isinstance(value, bytes):
        return repr(clip_bytes(value, limit))
    return clip(repr(value), limit)


def _cut_inputs(message: str, ctx: dict[str, Any] | None) -> str:
    """``message`` with each long string of its context (where pydantic puts the input it
    quotes: a tag, a literal, a pattern's input) replaced by its cut form."""
    for value in (ctx or {}).values():
        if isinstance(value, str) and len(value) > QUOTE_LIMIT and value in message:
            message = message.replace(value, clip(value))
    return clip(message, MESSAGE_LIMIT)


def format_validation_error(err: ValidationError, *, root: str = "(root)") -> str:
    """One readable piece per problem, ``field.path: what was expected``, joined with ``; ``.

    Every piece of input it quotes is cut (:func:`clip`): a field name from the input (an
    extra key), a tag or a value pydantic repeats. At most :data:`MAX_PROBLEMS` problems are
    listed, then how many more there are.
    """
    return "; ".join(validation_problems(err, root=root))


def validation_problems(err: ValidationError, *, root: str = "(root)") -> list[str]:
    """The problems of :func:`format_validation_error`, one string each."""
    errors = err.errors(include_url=False, include_input=False)
    parts = []
    for e in errors[:MAX_PROBLEMS]:
        loc = ".".join(clip(str(p)) for p in e["loc"]) or root
        msg = e["msg"].removeprefix("Value error, ")  # our own validators' words
        parts.append(f"{loc}: {_cut_inputs(msg, e.get('ctx'))}")
    if len(errors) > MAX_PROBLEMS:
        parts.append(f"and {len(errors) - MAX_PROBLEMS} more problems")
    return parts
