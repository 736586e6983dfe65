"""One rule for what a test needs from the machine: skipped where missing, failed in CI.

Every skip for a missing tool goes through :func:`require`, tied to the
``MATCHCAST_REQUIRE_*`` variable that ``.ci/run`` sets once it has installed that tool, so a
CI run never passes by skipping what it was meant to prove.
"""

from __future__ import annotations

import os

import pytest

__all__ = ["MONITORING_ENV", "require"]

#: Makes docker-compose and promtool mandatory for the monitoring profile's checks.
MONITORING_ENV = "MATCHCAST_REQUIRE_MONITORING"


def require(available: object, what: str, env: str, install: str) -> None:
    """Go on when ``available`` is true; else fail when ``$env`` is ``1`` (CI), skip otherwise.

    Args:
        available: the tool's path, module or a flag; anything false means missing.
        what: the tool, as a person names it ("mosquitto_sub").
        env: the ``MATCHCAST_REQUIRE_*`` variable that makes it mandatory.
        install: how to get it ("apt-get install mosquitto-clients").
    """
    if available:
        return
    if os.environ.get(env) == "1":
        pytest.fail(f"{what} is required ({env}=1) but missing: {install}")
    pytest.skip(f"{what} is missing ({install})")
