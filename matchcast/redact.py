"""Secrets stay in the process: the one place that knows them and scrubs them from output.

A broker password reaches matchcast in a URL (``mqtt://user:pass@host``), in
``$MATCHCAST_PASSWORD``, or in an argument (``--password X``). Wherever it is read
(:func:`matchcast.transport.connection.broker_url_from`) it is :func:`remember`-ed; everything
matchcast writes for people or files passes through here on the way out:

- log lines: :func:`redact_event` is a structlog processor (``matchcast.logs``) and
  :class:`RedactFilter` guards the standard library's loggers (aiomqtt, paho, aiohttp);
- error messages: the CLI's one-line errors go through :func:`redact`;
- load reports, CSV and charts: :func:`redact_argv` and :func:`redact_data` on what they
  hold, written by :func:`write_private` (mode 0600: only the owner reads a run's details).

What is scrubbed: the password of any ``scheme://user:password@`` URL, the value of any
argument named like a secret (``--password``, ``--key-password``, ``--token``, ...), and every
remembered secret wherever it appears. Secrets shorter than :data:`MIN_SECRET` characters are
not searched for in free text (they would mask digits of every figure); URLs and arguments
are still masked.

Text reaches here already cut (:func:`events.clip`: input is cut to 200 characters and
``…[+N chars]`` before anything else), and every pattern here runs in time linear in the text
(no nested or overlapping quantifiers; ``tests/test_regex_linear.py``). Where a cut falls inside
a secret, what is left of it is masked too: a URL's password cut before its ``@``, and the
start of a remembered secret just before the cut mark.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, MutableMapping
from pathlib import Path
from typing import Any

from events import MESSAGE_LIMIT, clip

__all__ = [
    "MASK",
    "RedactFilter",
    "forget_all",
    "redact",
    "redact_argv",
    "redact_data",
    "redact_event",
    "remember",
    "write_private",
]

MASK = "***"
MIN_SECRET = 4
_known: set[str] = set()
#: ``://user:password@``, or ``://user:passw`` cut (``…[+N chars]``) before its ``@``. It
#: starts only just after a ``://`` and neither part crosses a ``/``, so each character is read
#: a bounded number of times: linear. (Starting at any letter of a scheme, as it once did, made
#: it quadratic in a run of letters: 8 s for 20,000 of them.)
_URL_PASSWORD = re.compile(r"(?<=://)(?P<user>[^/\s:@]*):(?P<pw>[^@\s/…]*)(?P<end>@|(?=…\[\+))")
#: An option's name: one or two dashes, then word characters and dashes.
_FLAG_NAME = re.compile(r"--?[\w-]+")
_SECRET_WORDS = ("password", "passwd", "passphrase", "secret", "token")
#: Where a cut left the rest of a piece of input out (:func:`events.clip`).
_CUT_MARK = "…[+"
#: The shortest start of a remembered secret masked before a cut mark.
_MIN_CUT_PREFIX = 2


def remember(secret: str | None) -> None:
    """From now on, ``secret`` is masked wherever matchcast writes it."""
    if secret and len(secret) >= MIN_SECRET:
        _known.add(secret)


def forget_all() -> None:
    """Forget every remembered secret (for tests)."""
    _known.clear()


def redact(text: str) -> str:
    """``text`` with URL passwords and every remembered secret replaced by ``***``."""
    text = _URL_PASSWORD.sub(lambda m: f"{m['user']}:{MASK}{m['end']}", text)
    for secret in sorted(_known, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, MASK)
    if _known and _CUT_MARK in text:
        text = _mask_cut_secrets(text)
    return text


def _mask_cut_secrets(text: str) -> str:
    """``text`` with the start of a remembered secret masked where a cut mark follows it."""
    pieces = text.split(_CUT_MARK)
    for i in range(len(pieces) - 1):
        for secret in _known:
            head = pieces[i]
            for k in range(min(len(secret) - 1, len(head)), _MIN_CUT_PREFIX - 1, -1):
                if head.endswith(secret[:k]):
                    pieces[i] = head[:-k] + MASK
                    break
    return _CUT_MARK.join(pieces)


def _secret_flag(name: str) -> bool:
    """``name`` is an option named like a secret (``--password``, ``--api-token``)."""
    return _FLAG_NAME.fullmatch(name) is not None and any(
        word in name.lower() for word in _SECRET_WORDS
    )


def redact_argv(argv: Iterable[str]) -> list[str]:
    """Command-line arguments fit to record: secret-named options' values masked
    (``--password X``, ``--password=X``), URLs and remembered secrets redacted."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        name, eq, _ = arg.partition("=")
        if hide_next:
            out.append(MASK)
            hide_next = False
        elif _secret_flag(name):
            if eq:
                out.append(f"{name}={MASK}")
            else:
                out.append(arg)
                hide_next = True
        else:
            out.append(redact(arg))
    return out


def redact_data(value: Any) -> Any:
    """A JSON-like document with every string in it redacted (keys included)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_data(k): redact_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_data(v) for v in value]
    return value


def redact_event(
    _logger: object, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: no secret in any key or value of a log line."""
    for key, value in list(event_dict.items()):
        if isinstance(value, str):
            event_dict[key] = redact(value)
        elif isinstance(value, dict | list | tuple):
            event_dict[key] = redact_data(value)
    return event_dict


class RedactFilter(logging.Filter):
    """A standard-library logging filter that redacts each record's message."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Render the message now, redacted (a record's args could hold a secret)."""
        message = record.getMessage()
        clean = redact(clip(message, MESSAGE_LIMIT))  # a library's message may quote input
        if clean != message:
            record.msg, record.args = clean, ()
        return True


def write_private(path: Path, data: str | bytes) -> None:
    """Write ``data`` to ``path``, readable and writable by the owner only (0600), also when
    the file already existed with wider permissions."""
    raw = data.encode() if isinstance(data, str) else data
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as f:
            fd = -1
            f.write(raw)
    finally:
        if fd >= 0:
            os.close(fd)
