"""Running the command line in-process, with the exit code ``matchcast.cli.main`` would give."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import structlog
from typer.testing import CliRunner

from matchcast.cli import app
from matchcast.cli.common import CommandExit

_QUIETED = ("amqtt", "transitions", "asyncio")


@dataclass(frozen=True)
class CliResult:
    code: int
    stdout: str
    stderr: str


def run_cli(*args: str, input: str | None = None) -> CliResult:  # noqa: A002 - click's name
    """``matchcast ARGS...``: exit code, standard output, standard error.

    Commands configure logging onto the runner's captured stream, which is closed afterwards;
    the configuration before the call is put back so later tests do not log into it.
    """
    config = structlog.get_config()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    levels = {name: logging.getLogger(name).level for name in _QUIETED}
    try:
        result = CliRunner().invoke(app, list(args), input=input)
    finally:
        structlog.configure(**config)
        root.handlers[:] = handlers
        root.setLevel(level)
        for name, old in levels.items():
            logging.getLogger(name).setLevel(old)
    code = result.exit_code
    if isinstance(result.exception, CommandExit):
        code = result.exception.code
    elif result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return CliResult(code, result.stdout, result.stderr)
