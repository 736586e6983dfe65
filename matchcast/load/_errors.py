"""The one error the load orchestration ends a command with.

``LoadError`` carries the line a person reads and the exit code (2: bad input, 1: a
failure at run time, 3: a failed threshold, 130: interrupted); the command module says the
line and exits with the code. An empty message ends the command with the code alone (what
was to be said is already said).
"""

from __future__ import annotations

__all__ = ["LoadError"]


class LoadError(Exception):
    """A load run that ends the command: ``message`` for a person, ``code`` to exit with."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
