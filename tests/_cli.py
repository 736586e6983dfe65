"""Running the command line in-process, with the exit code ``matchcast.cli.main`` would give."""

from __future__ import annotations

from dataclasses import dataclass

from typer.testing import CliRunner

from matchcast.cli import _Exit, app


@dataclass(frozen=True)
class CliResult:
    code: int
    stdout: str
    stderr: str


def run_cli(*args: str) -> CliResult:
    """``matchcast ARGS...``: exit code, standard output, standard error."""
    result = CliRunner().invoke(app, list(args))
    code = result.exit_code
    if isinstance(result.exception, _Exit):
        code = result.exception.code
    elif result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return CliResult(code, result.stdout, result.stderr)
