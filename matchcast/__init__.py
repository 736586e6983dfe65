"""The matchcast application: the domain wired to real brokers, a command line and a page.

The domain lives in :mod:`events`; replaying in :mod:`simulator`; subscribing in
:mod:`consumers`. Here, each folder has one job: :mod:`matchcast.cli` the command line,
:mod:`matchcast.app` what the commands do (on a broker URL), :mod:`matchcast.transport` MQTT
(both clients, the broker URL and TLS, failover, the embedded broker), :mod:`matchcast.contract`
the topic API's description and documents, :mod:`matchcast.web` the match page and
:mod:`matchcast.load` the load tester; beside them the logs, the redaction of secrets and the
test kits :mod:`matchcast.testing` and :mod:`matchcast.testbroker`.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
