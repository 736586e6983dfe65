"""Kept for older imports: the broker test kit lives in :mod:`matchcast.testing`."""

from matchcast.testing import REQUIRE_ENV, Mosquitto, mosquitto_binary, wait_port

__all__ = ["REQUIRE_ENV", "Mosquitto", "mosquitto_binary", "wait_port"]
