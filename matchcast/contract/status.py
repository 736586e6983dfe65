"""The retained status message of a replayer: :class:`events.ReplayerStatus`.

The model lives in ``events`` beside the control messages it carries (a consumer reads the
match ids it lists: ``consumers/_latejoin.py``); it is named here too, where the contract's
other descriptions are. It is not part of the versioned event schema: it carries no
``schema_version``. Read one with :func:`events.decode_status`, which ignores fields a newer
replayer adds.
"""

from __future__ import annotations

from events import ReplayerStatus

__all__ = ["ReplayerStatus"]
