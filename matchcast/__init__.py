"""The matchcast application: the CLI, the MQTT adapter, the embedded broker, logging.

The domain lives in :mod:`events`; replaying in :mod:`simulator`; subscribing in
:mod:`consumers`. This package wires them to a real broker and a command line.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
