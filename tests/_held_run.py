"""A test run that holds the session's mosquitto, for ``test_nothing_left.py`` to signal.

Not collected by a normal run (its name is no ``test_*.py``): that test runs this file alone,
in a pytest of its own, and stops it with SIGINT or SIGTERM while it holds the broker.
"""

from __future__ import annotations

import time

from matchcast.testbroker import Mosquitto


def test_holds_the_session_mosquitto(mosquitto: Mosquitto) -> None:
    time.sleep(60)
