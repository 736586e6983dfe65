"""The errors :mod:`consumers` raises on purpose, under :class:`events.MatchcastError`::

MatchcastError
 └── PluginError     a subscriber plug-in that cannot be found, loaded, configured or started
"""

from __future__ import annotations

from events import MatchcastError

__all__ = ["PluginError"]


class PluginError(MatchcastError):
    """A subscriber plug-in that cannot be used.

    Attributes:
        plugin: the plug-in as the user named it (``module:attr``, a path, an entry point name)
            or the subscriber's name.
        reason: what is wrong and, where there is one, what to do about it.
    """

    def __init__(self, plugin: str, reason: str) -> None:
        self.plugin = plugin
        self.reason = reason
        super().__init__(f"plug-in {plugin!r}: {reason}")
