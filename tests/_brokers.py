"""Kept for older imports: the broker test kit lives in :mod:`matchcast.testbroker`."""

from matchcast.testbroker import REQUIRE_ENV, Mosquitto, mosquitto_binary, wait_port

__all__ = ["REQUIRE_ENV", "Mosquitto", "mosquitto_binary", "wait_port"]
