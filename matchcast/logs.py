"""structlog configuration, done once at the program's edge (the CLI).

Console rendering on a terminal, JSON lines otherwise. Event names are stable
``noun.past_verb`` strings (``replay.started``, ``sequence.gap_detected``); values go in keys.
"""

from __future__ import annotations

import logging
import sys
from typing import Literal, TextIO

import structlog

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
    ]
    if fmt == "json":
        processors += [structlog.processors.dict_tracebacks]
    processors.append(renderer)
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
    for noisy in ("amqtt", "transitions", "asyncio"):
        logging.getLogger(noisy).setLevel(
            logging.CRITICAL if level > logging.DEBUG else logging.DEBUG
        )
