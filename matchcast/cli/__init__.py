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
"""

from matchcast.cli.host import app, main

__all__ = ["app", "main"]
