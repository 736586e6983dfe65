"""One load run in this process, its live sinks around it, in one event loop.

:class:`Session` starts the sinks, runs a :class:`~matchcast.load.LoadRun` with its figures
each second to every sink (:func:`~matchcast.load.follow`), builds the report, evaluates the
checks and hands it to the sinks; the command (:mod:`matchcast.load._command`) and each Dask
shard (:mod:`matchcast.load._dask`) run one. :func:`make_factory` makes the MQTT clients.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from matchcast.load._args import Plan
from matchcast.load._checks import Check, evaluate_checks
from matchcast.load._errors import LoadError
from matchcast.load._live import LiveSink, Seconds, follow
from matchcast.load._nodes import NodeAssigner
from matchcast.load._report import build_report
from matchcast.load._run import LoadRun
from matchcast.transport.clients import ClientKind

__all__ = ["LiveOptions", "Session", "close_sinks", "evaluate", "make_factory"]


@dataclass(frozen=True)
class LiveOptions:
    """The figures while the run goes: where they go and what is checked on them.

    Attributes:
        live: ``terminal`` (the live line on a terminal), ``json`` (a JSON line a second on
            standard output) or ``none``.
        sinks: more places for the figures (a dashboard, Prometheus metrics, an HTML report).
        checks: the ``--check`` thresholds: on the final report, and each second on the
            figures so far with ``abort_on_fail``.
        check_delay_s: seconds of warm-up before a check can abort the run.
        abort_on_fail: end the run at the first failed check (report marked aborted, exit 3).
    """

    live: str = "terminal"
    sinks: tuple[LiveSink, ...] = ()
    checks: tuple[Check, ...] = ()
    check_delay_s: float = 0.0
    abort_on_fail: bool = False


def make_factory(kind: ClientKind, brokers: Any, protocol: str = "auto") -> Any:
    """A :data:`~matchcast.load.ClientFactory` for ``kind``, each connection to the next node
    of its role: ``brokers`` is a :class:`NodeAssigner`, a list of broker URLs, or one."""
    from matchcast.transport.connection import BrokerURL  # noqa: PLC0415

    if isinstance(brokers, NodeAssigner):
        nodes = brokers
    else:
        nodes = NodeAssigner((brokers,) if isinstance(brokers, BrokerURL) else tuple(brokers))
    if kind is ClientKind.fast:
        from matchcast.transport.fastmqtt import FastClient  # noqa: PLC0415

        def fast(client_id: str, role: str) -> AbstractAsyncContextManager[Any]:
            # Its node first, then the others it fails over to.
            return FastClient(nodes.assign(role), client_id=client_id, protocol=protocol)  # type: ignore[arg-type]

        return fast
    from matchcast.transport.mqtt import MqttClient  # noqa: PLC0415

    def slow(client_id: str, role: str) -> AbstractAsyncContextManager[Any]:
        url = nodes.assign(role)
        # paho does not hold its QoS 2 publishes to the broker's receive maximum (mosquitto's
        # is 20): the broker refuses the excess in PUBREC, and aiomqtt reports success.
        # Measured here: with 1000 in flight 20 of 424 QoS 2 events arrived, with 20 all.
        # paho's own default of 20 it is; the load sender's window queues the rest.
        return MqttClient(url, client_id=client_id, max_inflight=20, protocol=protocol)  # type: ignore[arg-type]

    return slow


def evaluate(result: dict[str, Any], checks: Sequence[Check]) -> None:
    if checks:
        result["checks"] = evaluate_checks(list(checks), result)


async def close_sinks(sinks: Sequence[LiveSink]) -> None:
    for sink in sinks:
        with contextlib.suppress(Exception):
            await sink.close()


class Session:
    """One run in this process, its sinks around it, in one event loop."""

    def __init__(
        self,
        run: LoadRun,
        plan: Plan,
        live: LiveOptions,
        sinks: Sequence[LiveSink],
        *,
        streams: bool,
    ) -> None:
        self.run, self.plan, self.live, self.sinks = run, plan, live, sinks
        self.streams = streams
        self.seconds = Seconds(run)

    async def go(self, nodes: tuple[str, ...]) -> dict[str, Any] | None:
        """Start the sinks, run, build the report; None if Ctrl-C came before any send."""
        try:
            for sink in self.sinks:
                try:
                    await sink.start()
                except OSError as err:
                    raise LoadError(f"{type(sink).__name__} cannot start: {err}", 2) from None
            interrupted = await self._interruptible()
            if interrupted and self.run.sender is None:
                return None
            for row in self.seconds.fill():
                self._hand(row)
            result = build_report(
                self.run,
                self.plan.parameters,
                streams=self.streams,
                nodes=nodes,
                seconds=self.seconds.rows,
            )
            result["interrupted"] = interrupted
            evaluate(result, self.live.checks)
            for sink in self.sinks:
                await sink.finish(result)
            return result
        finally:
            await close_sinks(self.sinks)

    def _hand(self, row: dict[str, Any]) -> None:
        for sink in self.sinks:
            with contextlib.suppress(Exception):
                sink.second(row)

    async def _interruptible(self) -> bool:
        """Run; True if Ctrl-C (or SIGTERM) cut it short, so what it measured so far is
        still reported."""
        live = self.live
        follower = asyncio.ensure_future(
            follow(
                self.run,
                self.seconds,
                self.sinks,
                checks=live.checks,
                check_delay_s=live.check_delay_s,
                abort_on_fail=live.abort_on_fail,
            )
        )
        try:
            await self.run.run()
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task.uncancel() > 0:
                raise
            return True
        finally:
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follower
        return False
