"""Subscribes to the stream, decodes it, and runs subscriber modules on it.

Depends on :mod:`events`; never on :mod:`simulator`. See docs/subscribers.md.
"""

from consumers._deadletter import DeadLetter
from consumers._errors import PluginError
from consumers._latejoin import MAX_DISCOVERED_PER_STATUS, listed_matches
from consumers._plugins import (
    ENTRY_POINT_GROUP,
    InstalledPlugin,
    as_subscriber,
    installed_plugins,
    load_plugin,
    plugin_label,
    split_options,
)
from consumers._runner import MAX_MATCHES, HandlerCall, Runner, RunnerStats
from consumers._score import ScoreDict
from consumers._subscriber import (
    Handler,
    Hook,
    Registration,
    StateHandler,
    Subscriber,
    on,
    on_start,
    on_state,
    on_stop,
)
from consumers.recorder import Recorder
from consumers.scoreboard import Scoreboard, commentary
from consumers.stats import Stats
from consumers.ticker import Ticker

__all__ = [
    "ENTRY_POINT_GROUP",
    "MAX_DISCOVERED_PER_STATUS",
    "MAX_MATCHES",
    "DeadLetter",
    "Handler",
    "HandlerCall",
    "Hook",
    "InstalledPlugin",
    "PluginError",
    "Recorder",
    "Registration",
    "Runner",
    "RunnerStats",
    "ScoreDict",
    "Scoreboard",
    "StateHandler",
    "Stats",
    "Subscriber",
    "Ticker",
    "as_subscriber",
    "commentary",
    "installed_plugins",
    "listed_matches",
    "load_plugin",
    "on",
    "on_start",
    "on_state",
    "on_stop",
    "plugin_label",
    "split_options",
]
