"""structlog configuration, done once at the program's edge (the CLI).

Console rendering on a terminal, JSON lines otherwise. Event names are stable
``noun.past_verb`` strings (``replay.started``, ``sequence.gap_detected``); values go in keys.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any, Literal, TextIO

import structlog

from consumers.printable import printable
from matchcast import redact

__all__ = ["LogFormat", "configure_logging"]

LogFormat = Literal["auto", "console", "json"]


def configure_logging(
    fmt: LogFormat = "auto", level: int | str = logging.INFO, stream: TextIO | None = None
) -> None:
    """Configure structlog for the process.

    Args:
        fmt: ``console`` (coloured, aligned), ``json`` (one object per line), or ``auto``
            (console when ``stream`` is a terminal).
        level: minimum level, e.g. ``logging.INFO`` or ``"warning"``.
        stream: where logs go; standard error by default, keeping standard output for results.
    """
    stream = stream or sys.stderr
    if isinstance(level, str):
        level = logging.getLevelNamesMapping()[level.upper()]
    if fmt == "auto":
        fmt = "console" if stream.isatty() else "json"
    renderer: structlog.typing.Processor = (
        structlog.dev.ConsoleRenderer(colors=stream.isatty())
        if fmt == "console"
        else structlog.processors.JSONRenderer(ensure_ascii=False)
    )
    processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        # Tracebacks become text here, so that the redaction below sees them too.
        structlog.processors.dict_tracebacks
        if fmt == "json"
        else structlog.processors.format_exc_info,
        # No secret in any log line (matchcast.redact), and wire text shows its control
        # characters escaped instead of driving the terminal (consumers printable).
        redact.redact_event,
        _printable_values,
        renderer,
    ]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(stream),
        cache_logger_on_first_use=False,
    )
    # Third-party libraries log through the standard library; keep them quiet unless debugging.
    logging.basicConfig(
        level=max(level, logging.WARNING),
        stream=stream,
        format="%(name)s %(levelname)s %(message)s",
    )
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, redact.RedactFilter) for f in handler.filters):
            handler.addFilter(redact.RedactFilter())
    for noisy in ("amqtt", "transitions", "asyncio"):
        logging.getLogger(noisy).setLevel(
            logging.CRITICAL if level > logging.DEBUG else logging.DEBUG
        )


def _printable_values(
    _logger: object, _method: str, event_dict: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """structlog processor: string values (a topic, a name off the wire) with their control
    characters escaped, so a log line cannot clear or rewrite the terminal it is shown on."""
    for key, value in list(event_dict.items()):
        if isinstance(value, str) and key != "exception":  # a traceback keeps its lines
            event_dict[key] = printable(value)
    return event_dict
