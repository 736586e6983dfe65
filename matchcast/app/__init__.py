"""The application layer: what the commands do, as coroutines the CLI, the web page and the
tests all call, on a broker URL (never a command line, never an embedded broker of its own).

- :mod:`~matchcast.app.replay`: ``run_replay``, a replayer with its status topic and the
  control service that takes its commands;
- :mod:`~matchcast.app.watch`: ``run_watch``, subscribers on the live stream;
- :mod:`~matchcast.app.control`: sending a command to a running replayer (``matchcast control``,
  the page's buttons);
- :mod:`~matchcast.app.replayers`: following the replayers' statuses;
- :mod:`~matchcast.app.retained`: finding and clearing matchcast's retained topics.

``matchcast.app.run_replay`` and ``matchcast.app.run_watch`` are the documented entry points
(docs/subscribers.md).
"""

from matchcast.app.replay import ControlService, run_replay, status_payload
from matchcast.app.watch import run_watch
from matchcast.transport.clients import mqtt_client

__all__ = ["ControlService", "mqtt_client", "run_replay", "run_watch", "status_payload"]
