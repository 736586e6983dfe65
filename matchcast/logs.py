"""structlog configuration, done once at the program's edge (the CLI).

Console rendering on a terminal, JSON lines otherwise. Event names are stable
``noun.past_verb`` strings (``replay.started``, ``sequence.gap_detected``); values go in keys.
The standard library's records (aiohttp, asyncio, paho, amqtt) are rendered by the same
processors, so one stream has one format: with ``--log-format json`` every line is JSON.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any, Literal, TextIO, cast

import structlog

from consumers.printable import printable
from events import MESSAGE_LIMIT, QUOTE_LIMIT, clip, clip_bytes
from matchcast import redact

__all__ = ["COMPOSED_KEYS", "LogFormat", "clip_values", "configure_logging"]

LogFormat = Literal["auto", "console", "json"]


def configure_logging(
    fmt: LogFormat = "auto", level: int | str = logging.INFO, stream: TextIO | None = None
) -> None:
    """Configure structlog for the process.

    Args:
        fmt: ``console`` (coloured, aligned), ``json`` (one object per line), or ``auto``
            (console when ``stream`` is a terminal).
        level: minimum level, e.g. ``logging.INFO`` or ``"warning"``.
        stream: where logs go; standard error by default, keeping standard output for results
            (whatever ``sys.stderr`` is at each line: while a live view draws, rich's, which
            prints the line above the view instead of gluing it to its border).
    """
    stream = stream or cast("TextIO", _CurrentStderr())
    if isinstance(level, str):
        level = logging.getLevelNamesMapping()[level.upper()]
    if fmt == "auto":
        fmt = "console" if stream.isatty() else "json"
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer(colors=stream.isatty())
        if fmt == "console"
        else structlog.processors.JSONRenderer(ensure_ascii=False)
    )
    # Tracebacks become text here, so that the redaction below sees them too.
    tracebacks: structlog.typing.Processor = (
        structlog.processors.dict_tracebacks
        if fmt == "json"
        else structlog.processors.format_exc_info
    )
    # Every value cut first (events.clip), so nothing after it takes time on a long string;
    # no secret in any log line (matchcast.redact), and wire text shows its control characters
    # escaped instead of driving the terminal (consumers printable).
    last: list[structlog.typing.Processor] = [
        tracebacks,
        clip_values,
        redact.redact_event,
        _printable_values,
    ]
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            *last,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=False,
    )
    # Third-party libraries (aiohttp, asyncio, paho, amqtt) log through the standard library:
    # their records go through the same processors and renderer, so in JSON mode every line on
    # the stream is a JSON object (with the library's ``logger`` name), and in console mode they
    # look like ours. Kept quiet unless debugging.
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=[
            structlog.stdlib.add_log_level,
            structlog.stdlib.add_logger_name,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
        ],
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *last, renderer],
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _LibraryHandler)]:
        root.removeHandler(old)
    handler = _LibraryHandler(stream)
    handler.setFormatter(formatter)
    root.addHandler(handler)
    root.setLevel(max(level, logging.WARNING))
    for h in root.handlers:
        if not any(isinstance(f, redact.RedactFilter) for f in h.filters):
            h.addFilter(redact.RedactFilter())
    for noisy in ("amqtt", "transitions", "asyncio"):
        logging.getLogger(noisy).setLevel(
            logging.CRITICAL if level > logging.DEBUG else logging.DEBUG
        )
    paho = logging.getLogger("mqtt")  # aiomqtt's logger, which paho logs through
    for earlier in [f for f in paho.filters if isinstance(f, _SocketErrorsAsDebug)]:
        paho.removeFilter(earlier)
    paho.addFilter(_SocketErrorsAsDebug(shown=level <= logging.DEBUG))


class _SocketErrorsAsDebug(logging.Filter):
    """paho logs a lost socket as an error (``failed to receive on socket: [Errno 104]
    Connection reset by peer``) beside matchcast's own warning for the same loss
    (``broker.connection_lost``, ``replay.connection_lost``), which says what happens next: a
    newcomer's failover run read the library's line as a failure. It is kept, as debug."""

    _PREFIXES = ("failed to receive on socket", "timeout on socket")

    def __init__(self, *, shown: bool) -> None:
        super().__init__()
        self.shown = shown  # logging at debug level (-v -v)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR and str(record.msg).startswith(self._PREFIXES):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return self.shown
        return True


class _CurrentStderr:
    """``sys.stderr`` as it is when a line is written, not as it was when logging was set up:
    a live view (``rich.live.Live``) swaps in a proxy that prints above the view."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()

    def isatty(self) -> bool:
        return sys.stderr.isatty()


class _LibraryHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The root handler :func:`configure_logging` installs (and replaces when called again,
    so the stream and format of the last call hold)."""


#: Keys whose values matchcast composes itself, quoting any input in them cut already
#: (a rejection reason, an error, a hint, a broker list from the command line): cut at
#: :data:`events.MESSAGE_LIMIT`. Every other value may be input itself (a topic, an id, an
#: excerpt) and is cut at :data:`events.QUOTE_LIMIT`.
COMPOSED_KEYS = frozenset({"event", "reason", "error", "hint", "broker", "url"})
#: A traceback's text is matchcast's own but for the error messages in it.
TRACEBACK_LIMIT = 20_000


def _clip_value(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return clip(value, limit)
    if isinstance(value, bytes | bytearray):
        return clip_bytes(bytes(value), limit)
    if isinstance(value, dict):
        return {_clip_value(k, QUOTE_LIMIT): _clip_value(v, limit) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clip_value(v, limit) for v in value]
    return value


def clip_values(
    _logger: object, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor, before any other that reads values: every string in a log line
    cut (:func:`events.clip`), input at 200 characters, matchcast's own composed values at
    :data:`events.MESSAGE_LIMIT`, a traceback at :data:`TRACEBACK_LIMIT`."""
    for key, value in list(event_dict.items()):
        if key == "exception":
            limit = TRACEBACK_LIMIT if isinstance(value, str) else MESSAGE_LIMIT
        else:
            limit = MESSAGE_LIMIT if key in COMPOSED_KEYS else QUOTE_LIMIT
        event_dict[key] = _clip_value(value, limit)
    return event_dict


def _printable_values(
    _logger: object, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: string values (a topic, a name off the wire) with their control
    characters escaped, so a log line cannot clear or rewrite the terminal it is shown on."""
    for key, value in list(event_dict.items()):
        if isinstance(value, str) and key != "exception":  # a traceback keeps its lines
            event_dict[key] = printable(value)
    return event_dict
