"""One ``matchcast load`` from its checked options to its report: the orchestration.

The command module (:mod:`matchcast.cli.load`) reads the options into a
:class:`~matchcast.load.LoadArgs` and a :class:`~matchcast.load.Plan` and calls
:func:`execute`, lending it a :class:`Runtime` (how to run a coroutine with Ctrl-C as a clean
cancel, where to talk to a person, how to read ``--broker``). :func:`execute` starts a
mosquitto if asked, runs the load here (its figures each second to every
:class:`~matchcast.load.LiveSink`, ``--check`` evaluated as it goes) or as shards on a Dask
cluster (:mod:`matchcast.load._dask`), builds the report, clears the run's retained topics,
and gives the report with its checks evaluated; :mod:`matchcast.load._output` prints and writes it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from matchcast.load._args import LoadArgs, Plan
from matchcast.load._errors import LoadError
from matchcast.load._live import JsonLines, LiveSink, TerminalView
from matchcast.load._nodes import NodeAssigner
from matchcast.load._run import LoadRun
from matchcast.load._session import LiveOptions, Session, make_factory

if TYPE_CHECKING:
    from matchcast.transport.connection import BrokerURL

__all__ = ["Runtime", "execute"]


@dataclass(frozen=True)
class Runtime:
    """What the command module lends the orchestration.

    Attributes:
        run: runs a coroutine function to its end, Ctrl-C and SIGTERM as a clean cancel,
            a broker that cannot be reached as one line and exit 1.
        console: where a person reads progress (standard error).
        brokers: the nodes ``--broker`` names (its text, or a spawned broker's URL), with
            the TLS options and $MATCHCAST_BROKER applied; None if there is none.
    """

    run: Callable[[Callable[[], Coroutine[Any, Any, Any]]], Any]
    console: Any
    brokers: Callable[[str | None], Sequence[BrokerURL] | None]


@contextlib.contextmanager
def _spawned(spawn: bool) -> Iterator[str | None]:
    if not spawn:
        yield None
        return
    from matchcast.testing import Mosquitto, mosquitto_binary  # noqa: PLC0415

    binary = mosquitto_binary()
    if binary is None:
        raise LoadError("--spawn-mosquitto: mosquitto is not installed", 2)
    broker = Mosquitto(binary, extra=["max_queued_messages 1000000"]).start()
    try:
        yield broker.url
    finally:
        broker.close()  # stopped, and its folder removed


def _nodes(rt: Runtime, broker: str | None, *, offset: int) -> NodeAssigner:
    """The brokers of ``--broker`` (one or a list), to assign connections to round-robin."""
    urls = rt.brokers(broker)
    if not urls:
        msg = "matchcast load needs --broker URL (or $MATCHCAST_BROKER, or --spawn-mosquitto)"
        raise LoadError(msg, 2)
    return NodeAssigner(tuple(urls), offset=offset)


def _sinks(live: LiveOptions, console: Any) -> list[LiveSink]:
    """The sinks of this run: the JSON lines or the terminal line, then the others."""
    own: list[LiveSink] = []
    if live.live == "json":
        own.append(JsonLines())
    elif live.live == "terminal" and console.is_terminal:
        own.append(TerminalView(console))
    return [*own, *live.sinks]


def execute(a: LoadArgs, plan: Plan, rt: Runtime, live: LiveOptions) -> tuple[dict[str, Any], Any]:
    """Run the load here or in worker processes, against the brokers given or a mosquitto of
    its own: the report (checks evaluated) and the :class:`LoadRun` (None for workers); this
    run's retained topics cleared unless kept.

    Raises:
        LoadError: bad options (2), workers that failed (1), or Ctrl-C before anything was
            sent (130).
    """
    sinks = _sinks(live, rt.console)
    run: LoadRun | None = None
    with _spawned(a.spawn_mosquitto) as spawned_url:
        # Shards start their round-robin on different nodes, so one publisher each spreads.
        nodes = _nodes(rt, spawned_url or a.broker, offset=plan.shard[0] if plan.shard else 0)
        plan.parameters.update(broker=nodes.listed, protocol=plan.protocol)
        if a.in_workers:
            result = _on_dask(a, plan, rt, live, sinks, nodes)
        else:
            factory = make_factory(a.client, nodes, plan.protocol)
            run = LoadRun(plan.options, plan.templates, factory)
            session = Session(run, plan, live, sinks, streams=plan.shard is not None)
            result = rt.run(lambda: session.go(nodes.keys))
            if result is None:
                rt.console.print("interrupted before the first event was sent", markup=False)
                raise LoadError("", 130)
        # A spawned broker goes with its states; shards and workers: the one that merges.
        if not (a.keep or spawned_url or plan.shard):
            _clear_own(rt, nodes.urls, plan)
    return result, run


def _on_dask(
    a: LoadArgs,
    plan: Plan,
    rt: Runtime,
    live: LiveOptions,
    sinks: Sequence[LiveSink],
    nodes: NodeAssigner,
) -> dict[str, Any]:
    """The run as shards on a Dask cluster (``--dask``) or a local one (``--workers``)."""
    from matchcast.load._dask import need_distributed, run_on_dask, shard_plans  # noqa: PLC0415

    need_distributed("--dask" if a.dask is not None else "--workers")
    senders = a.shards if a.shards is not None else a.workers
    plans = shard_plans(a, plan, senders, a.probe_workers)
    result: dict[str, Any] = rt.run(
        lambda: run_on_dask(
            a.dask,
            plans,
            nodes.urls,
            a.client,
            sinks,
            live.checks,
            (live.abort_on_fail, live.check_delay_s),
        )
    )
    result["parameters"].update(
        workers=a.workers, probe_workers=a.probe_workers, dask=a.dask, shards=senders
    )
    return result


def _clear_own(rt: Runtime, urls: Sequence[BrokerURL], plan: Plan) -> None:
    """Remove the retained states (and consumer reports) of this run's matches, whose ids
    hold ``-{tag}-``, so runs do not pile them up on the broker; a failure only warns."""
    from matchcast.app.retained import clear_retained, find_retained  # noqa: PLC0415

    tag = plan.tag

    async def go() -> int:
        own = await find_retained(urls, plan.topics, select=lambda match_id: f"-{tag}-" in match_id)
        return await clear_retained(urls, own)

    try:
        cleared = rt.run(go)
    except Exception:  # the command's runner said why (it ends the command otherwise)
        rt.console.print("could not clear this run's retained topics: `matchcast clear` does")
        return
    rt.console.print(f"cleared {cleared} retained topic(s) of this run (--keep leaves them)")
