"""The ``matchcast`` command line: one module per command group, and what they share.

- :mod:`~matchcast.cli.host`: the typer app, ``--version``, the examples in each help, and
  ``main`` (the console script), which turns every error into one line and an exit code;
- :mod:`~matchcast.cli.options`: every option more than one command takes, and the checks of
  their values: the one place for a CLI option;
- :mod:`~matchcast.cli.common`: ``fail``, ``run`` and the logs setup every command uses;
- a module per command group: ``replay`` (replay, demo), ``watch``, ``broker``, ``schema``
  (schema, asyncapi), ``clear``, ``consume``, ``control``, ``load`` (load, load merge,
  load-consumer), ``matches`` (simulate, import), ``web``; and ``chaos``, the ``--chaos``
  options replay and load share.

Command modules import :mod:`~matchcast.cli.options` and :mod:`~matchcast.cli.common` and the
public names of one another, never a private one (``tests/test_layout.py`` checks it).

This package imports nothing at all: :func:`main`, the console script, is first to run, so a
Ctrl-C while the rest imports (typer, a command's modules) ends in ``interrupted`` and exit
130, not a traceback.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import typer

__all__ = ["app", "main"]


def main() -> None:
    """The ``matchcast`` console script: :func:`matchcast.cli.host.main`, with a Ctrl-C at
    any moment one line and exit 130."""
    try:
        from matchcast.cli.host import main as run  # noqa: PLC0415 - after the guard is up

        run()
    except KeyboardInterrupt:
        # Where a command had not caught it yet: its imports, its start, its last words.
        try:
            sys.stderr.write("interrupted\n")
            sys.stderr.flush()
        finally:
            sys.exit(130)


def __getattr__(name: str) -> Any:
    if name == "app":
        from matchcast.cli.host import app  # noqa: PLC0415

        return app
    raise AttributeError(name)


if TYPE_CHECKING:
    app: typer.Typer
