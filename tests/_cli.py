"""Running the command line: in-process, with the exit code ``matchcast.cli.main`` would give
(:func:`run_cli`), or as its own process, as a person runs it (:func:`matchcast`); and what
every mistake must look like (:func:`one_clear_line`)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
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


def matchcast(
    *args: str, timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m matchcast ARGS...`` in a process of its own, with no broker from the
    environment unless ``env`` gives one."""
    return subprocess.run(
        [sys.executable, "-m", "matchcast", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "MATCHCAST_BROKER": "", **(env or {})},
        check=False,
    )


def one_clear_line(result: subprocess.CompletedProcess[str], code: int, *needles: str) -> None:
    """A mistake ends with exit ``code`` and one ``error:`` line naming each of ``needles``,
    never a traceback."""
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: ")
    for needle in needles:
        assert needle in result.stderr, result.stderr
