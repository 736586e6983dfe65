"""Subscribes to the stream, decodes it, and runs subscriber modules on it.

Depends on :mod:`events`; never on :mod:`simulator`.
"""

from consumers._runner import Runner, RunnerStats
from consumers._subscriber import Handler, Registration, Subscriber
from consumers.scoreboard import Scoreboard, commentary

__all__ = [
    "Handler",
    "Registration",
    "Runner",
    "RunnerStats",
    "Scoreboard",
    "Subscriber",
    "commentary",
]
