"""Shards of one load run as tasks on a Dask cluster: ``--dask ADDR --shards N``, and
``--workers N`` on a local cluster of N processes.

One task a shard, each pinned to a worker of its own (worker restrictions, never moved to
another, never retried: a lost worker fails its shard). Each shard connects and subscribes,
says ``ready`` on the run's Dask queue and waits for the run's ``go`` event, set once every
shard is ready, so none sends before every probe listens. While the run goes, each shard puts
its per-second rows on the queue; the coordinator adds them up by second and hands them to its
live sinks (the terminal line, the JSON lines, a dashboard). At the end the shard reports are
merged as ``load merge`` does; a failed shard is named in the report's ``shards`` and in the
exit (1), and the per-second figures it streamed stay in ``per_second_streamed``. Ctrl-C, or
a ``--check`` failed with ``--abort-on-fail``, sets the run's ``stop`` event: each shard stops
sending, drains and reports.

``distributed`` is an optional dependency (``pip install 'matchcast[dask]'``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import logging
import queue as threading_queue
import signal
import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

import structlog

from matchcast.load._args import LoadArgs, Plan, plan
from matchcast.load._checks import Check, evaluate_checks
from matchcast.load._errors import LoadError
from matchcast.load._live import ROW_KIND, LiveSink

__all__ = ["INSTALL", "need_distributed", "run_on_dask", "run_shard", "shard_plans"]

_log = structlog.get_logger("matchcast.load")

#: What to install for ``--dask`` and ``--workers``.
INSTALL = "pip install 'matchcast[dask]'"
#: How long the shards of one run may take to connect and subscribe, all together.
READY_TIMEOUT_S = 120.0
#: A second's row is handed on once every running shard gave it, or once a shard is this
#: many seconds further on (a shard that lags or died does not hold the live view back).
_ROW_WAIT_S = 2


def need_distributed(option: str) -> None:
    """End the command (exit 2) naming the install when ``distributed`` is missing."""
    try:
        import distributed  # noqa: F401, PLC0415
    except ImportError:
        raise LoadError(f"{option} runs on Dask: {INSTALL}", 2) from None


def _distributed() -> Any:
    """``distributed`` (an optional dependency, untyped), imported when needed."""
    return importlib.import_module("distributed")


def shard_plans(a: LoadArgs, base: Plan, senders: int, probe_shards: int) -> list[Plan]:
    """Each shard's plan: ``senders`` shards that send (and probe, unless ``probe_shards``),
    then ``probe_shards`` that only probe, all with the run's tag."""
    specs = [
        (f"{i}/{senders}", 0 if probe_shards else a.subscribers, False) for i in range(senders)
    ]
    specs += [(f"{j}/{probe_shards}", a.subscribers, True) for j in range(probe_shards)]
    sources = [t.source for t in base.templates]
    out = []
    for shard, subscribers, probe_only in specs:
        mine = dataclasses.replace(
            a,
            shard=shard,
            subscribers=subscribers,
            probe_only=probe_only,
            workers=1,
            probe_workers=0,
            dask=None,
            shards=None,
            tag=base.tag,
            spawn_mosquitto=False,
        )
        out.append(
            plan(
                mine,
                sources=sources,
                topics=base.topics,
                speed=base.options.shape.speed,
                chaos=base.chaos,
                protocol=base.protocol,
            )
        )
    return out


class _QueueSink:
    """A shard's sink: its rows onto the run's Dask queue, by a thread of its own (a put is a
    round trip to the scheduler; ``second`` must not block)."""

    def __init__(self, dask_queue: Any, index: int) -> None:
        self._dask_queue = dask_queue
        self._index = index
        self._pending: threading_queue.SimpleQueue[Any] = threading_queue.SimpleQueue()
        self._thread = threading.Thread(target=self._pump, daemon=True)

    def _pump(self) -> None:
        while (item := self._pending.get()) is not None:
            with contextlib.suppress(Exception):  # the coordinator went: nobody to tell
                self._dask_queue.put(item)

    def put(self, kind: str, body: Any = None) -> None:
        """Queue ``[kind, shard index, body]`` for the coordinator."""
        self._pending.put([kind, self._index, body])

    async def start(self) -> None:
        """Start the thread that puts."""
        self._thread.start()

    def second(self, row: dict[str, Any]) -> None:
        """A row for the coordinator."""
        self.put("row", row)

    async def finish(self, report: dict[str, Any]) -> None:
        """Nothing: the report is the task's result."""

    async def close(self) -> None:
        """Let the thread put what is left, then end it."""
        self._pending.put(None)
        await asyncio.to_thread(self._thread.join, 10.0)


def run_shard(
    the_plan: Plan,
    urls: Sequence[Any],
    client: Any,
    index: int,
    run_id: str,
    checks: tuple[Check, ...] = (),
    abort: tuple[bool, float] = (False, 0.0),
) -> Any:
    """One shard, as a Dask task: connect, say ready, wait for go, run, report. Its logs go
    to the worker's standard error, warnings and worse. With ``abort`` (``--abort-on-fail``,
    ``--check-delay``) it evaluates ``checks`` each second on its own figures; the first
    that fails ends it and stops the other shards too."""
    from matchcast.logs import configure_logging  # noqa: PLC0415

    configure_logging("json", "WARNING")
    dist = _distributed()
    from matchcast.load._nodes import NodeAssigner  # noqa: PLC0415
    from matchcast.load._run import LoadRun  # noqa: PLC0415
    from matchcast.load._session import LiveOptions, Session, make_factory  # noqa: PLC0415

    rows = dist.Queue(f"matchcast-load-{run_id}")
    go = dist.Event(f"matchcast-load-{run_id}-go")
    stop = dist.Event(f"matchcast-load-{run_id}-stop")
    sink = _QueueSink(rows, index)
    nodes = NodeAssigner(tuple(urls), offset=the_plan.shard[0] if the_plan.shard else 0)

    async def gate() -> None:
        sink.put("ready")
        if not await asyncio.to_thread(go.wait, READY_TIMEOUT_S):
            raise LoadError("the coordinator gave no go")

    options = dataclasses.replace(the_plan.options, start_gate=gate)
    run = LoadRun(options, the_plan.templates, make_factory(client, nodes, the_plan.protocol))
    live = LiveOptions(live="none", checks=checks, abort_on_fail=abort[0], check_delay_s=abort[1])
    session = Session(run, the_plan, live, [sink], streams=True)

    async def go_run() -> Any:
        loop = asyncio.get_running_loop()

        def watch() -> None:
            """Stop sending when the coordinator says stop (Ctrl-C, an abort)."""
            while not done.is_set():
                try:
                    told = stop.wait(1.0)
                except Exception:  # the cluster is going: so is this shard
                    return
                if told and not done.is_set():
                    with contextlib.suppress(RuntimeError):  # the run ended meanwhile
                        loop.call_soon_threadsafe(stop_sending)
                    return

        def stop_sending() -> None:
            if run.sender is not None:
                run.sender.stop()

        done = threading.Event()
        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            report = await session.go(nodes.keys)
        finally:
            done.set()
        if run.aborted is not None:  # the others stop too
            await asyncio.to_thread(stop.set)
        return report

    return asyncio.run(go_run())


class _Rows:
    """The shards' per-second rows, added up by second."""

    def __init__(self, shards: int) -> None:
        self.by_t: dict[int, dict[int, dict[str, Any]]] = {}
        self.latest = [-1] * shards
        self.running = set(range(shards))
        self.next_t = 0
        self.out: list[dict[str, Any]] = []

    def add(self, index: int, row: dict[str, Any]) -> None:
        self.by_t.setdefault(row["t"], {})[index] = row
        self.latest[index] = max(self.latest[index], row["t"])

    def ready(self, *, final: bool = False) -> list[dict[str, Any]]:
        """The rows that can be handed on now (every row, ``final``)."""
        out = []
        while self.next_t in self.by_t:
            got = self.by_t[self.next_t]
            ahead = max(self.latest, default=-1) - self.next_t >= _ROW_WAIT_S
            if not (final or ahead or self.running <= set(got)):
                break
            out.append(_sum_rows(self.next_t, list(got.values())))
            self.next_t += 1
        self.out += out
        return out


def _sum_rows(t: int, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One second of the run from the shards' rows: counts summed; latency and sender lag
    the largest of the shards' (percentiles do not add up: the report merges histograms)."""

    def most(key: str) -> float | None:
        values = [r[key] for r in rows if r.get(key) is not None]
        return max(values) if values else None

    summed = ("offered", "sent", "delivered", "lost", "duplicates", "reordered")
    out: dict[str, Any] = {"kind": ROW_KIND, "t": t}
    out.update({k: sum(r.get(k, 0) for r in rows) for k in summed})
    out.update({k: most(k) for k in ("latency_p50", "latency_p99", "latency_max")})
    out["sender_lag_ms"] = most("sender_lag_ms") or 0.0
    for key in ("live_matches", "subscribers", "connections"):
        out[key] = sum(r.get(key, 0) for r in rows)
    nodes: dict[str, dict[str, Any]] = {}
    for r in rows:
        for key, node in (r.get("nodes") or {}).items():
            acc = nodes.setdefault(key, {"delivered": 0, "latency_p99": None})
            acc["delivered"] += node["delivered"]
            p99 = [v for v in (acc["latency_p99"], node["latency_p99"]) if v is not None]
            acc["latency_p99"] = max(p99) if p99 else None
    out["nodes"] = nodes
    return out


@contextlib.asynccontextmanager
async def _ignoring_sigint(cluster: Any) -> Any:
    """Start ``cluster`` with SIGINT ignored, so the processes it starts inherit that; this
    process's own handler is back once they are up."""
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        started = await cluster
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
    async with started:
        yield started


@dataclasses.dataclass
class _Shards:
    """The shards of a run as the coordinator follows them."""

    plans: list[Plan]
    workers: list[str]
    futures: list[Any]
    failed: dict[int, str] = dataclasses.field(default_factory=dict)

    def check(self, alive: set[str]) -> None:
        """Mark the shards that failed: an error, or a worker no longer in the cluster."""
        for i, fut in enumerate(self.futures):
            if i in self.failed:
                continue
            if fut.status in ("error", "cancelled"):
                self.failed[i] = f"its task ended {fut.status}"
            elif fut.status == "pending" and self.workers[i] not in alive:
                self.failed[i] = f"its worker {self.workers[i]} was lost"
                fut.cancel()

    def settled(self) -> bool:
        return all(i in self.failed or f.status == "finished" for i, f in enumerate(self.futures))


async def run_on_dask(
    address: str | None,
    plans: list[Plan],
    urls: Sequence[Any],
    client_kind: Any,
    sinks: Sequence[LiveSink],
    checks: Sequence[Check] = (),
    abort: tuple[bool, float] = (False, 0.0),
) -> dict[str, Any]:
    """Run the shards of ``plans`` on the cluster at ``address`` (None: a local cluster of a
    process a shard): the merged report, with ``shards`` and ``per_second_streamed``.

    Raises:
        LoadError: a cluster with fewer workers than shards (2), shards that never became
            ready, or every shard failed (1).
    """
    dist = _distributed()
    dask: Any = importlib.import_module("dask")

    run_id = uuid.uuid4().hex[:8]
    async with contextlib.AsyncExitStack() as stack:
        # The scheduler's own lines (workers coming and going) are not the run's.
        quiet = logging.getLogger("distributed")
        stack.callback(quiet.setLevel, quiet.level)
        quiet.setLevel(logging.ERROR)
        if address is None:
            # One try a shard: a shard whose worker died is failed, never run again.
            stack.enter_context(dask.config.set({"distributed.scheduler.allowed-failures": 0}))
            # Its worker processes ignore Ctrl-C (which a terminal sends the whole process
            # group): the coordinator tells them to stop, and they report what they measured.
            cluster = await stack.enter_async_context(
                _ignoring_sigint(
                    dist.LocalCluster(
                        n_workers=len(plans),
                        threads_per_worker=1,
                        processes=True,
                        asynchronous=True,
                        # A free port on loopback: 8787, the default, may be taken by another
                        # cluster (two runs at once), and its warning ends the start.
                        dashboard_address="127.0.0.1:0",
                        silence_logs=40,
                    )
                )
            )
            address = cluster.scheduler_address
        client = await stack.enter_async_context(dist.Client(address, asynchronous=True))
        workers = sorted((await client.scheduler.identity())["workers"])
        if len(workers) < len(plans):
            raise LoadError(
                f"{len(plans)} shards need as many Dask workers (one shard a worker); "
                f"{address} has {len(workers)}",
                2,
            )
        queue = await dist.Queue(f"matchcast-load-{run_id}", client=client)
        go = dist.Event(f"matchcast-load-{run_id}-go", client=client)
        stop = dist.Event(f"matchcast-load-{run_id}-stop", client=client)
        shards = _Shards(plans, workers[: len(plans)], [])
        for i, (the_plan, worker) in enumerate(zip(plans, shards.workers, strict=True)):
            shards.futures.append(
                client.submit(
                    run_shard,
                    the_plan,
                    tuple(urls),
                    client_kind,
                    i,
                    run_id,
                    tuple(checks),
                    abort,
                    workers=[worker],
                    allow_other_workers=False,
                    retries=0,
                    pure=False,
                    key=f"matchcast-load-{run_id}-shard-{i}",
                )
            )
        for sink in sinks:
            await sink.start()
        try:
            rows, interrupted = await _follow(client, queue, go, stop, shards, sinks)
            merged = await _merged(shards, rows, interrupted)
            if checks:
                merged["checks"] = evaluate_checks(list(checks), merged)
            for sink in sinks:
                await sink.finish(merged)
            return merged
        finally:
            for sink in sinks:
                with contextlib.suppress(Exception):
                    await sink.close()
    raise AssertionError("unreachable")  # pragma: no cover


async def _follow(
    client: Any, queue: Any, go: Any, stop: Any, shards: _Shards, sinks: Sequence[LiveSink]
) -> tuple[_Rows, bool]:
    """Say go once every shard is ready; hand on the rows by second until every shard is
    done or failed. Ctrl-C sets ``stop`` (the shards stop sending and report) and is
    remembered."""
    rows = _Rows(len(shards.plans))
    ready: set[int] = set()
    deadline = time.monotonic() + READY_TIMEOUT_S
    interrupted = started = False
    while not shards.settled():
        try:
            for kind, index, body in await queue.get(batch=True):
                if kind == "ready":
                    ready.add(index)
                elif kind == "row":
                    rows.add(index, body)
            if not started and len(ready) == len(shards.plans):
                await go.set()
                started = True
                _log.info("load.shards_started", shards=len(ready))
            if not started and time.monotonic() > deadline:
                raise LoadError(
                    f"shards not connected after {READY_TIMEOUT_S:.0f}s: {sorted(ready)} ready"
                )
            shards.check(set((await client.scheduler.identity())["workers"]))
            rows.running -= set(shards.failed) | {
                i for i, f in enumerate(shards.futures) if f.status == "finished"
            }
            for row in rows.ready():
                _hand(sinks, row)
            await asyncio.sleep(0.25)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task.uncancel() > 0 or interrupted:
                raise
            interrupted = True
            await stop.set()
    for row in rows.ready(final=True):
        _hand(sinks, row)
    await stop.set()  # the shards' watchers wait on it: they end now, not at the close
    return rows, interrupted


def _hand(sinks: Sequence[LiveSink], row: dict[str, Any]) -> None:
    for sink in sinks:
        try:
            sink.second(row)
        except Exception as err:  # a sink's failure ends no run
            _log.warning("load.sink_failed", sink=type(sink).__name__, error=str(err))


async def _merged(shards: _Shards, rows: _Rows, interrupted: bool) -> dict[str, Any]:
    """The shards' reports merged; the failed ones named; the streamed rows kept."""
    from matchcast.load._merge import MergeError, merge_reports  # noqa: PLC0415

    reports = []
    for i, fut in enumerate(shards.futures):
        if i in shards.failed:
            if fut.status == "error":  # say why: a KilledWorker, or the shard's own error
                err = await fut.exception()
                shards.failed[i] = f"on {shards.workers[i]}: {type(err).__name__}: {err}"[:400]
            continue
        try:
            reports.append(await fut)
        except Exception as err:  # the shard's own error, said in the report and the exit
            shards.failed[i] = f"{type(err).__name__}: {err}"
    if not reports:
        why = "; ".join(f"shard {i}: {e}" for i, e in sorted(shards.failed.items()))
        raise LoadError(f"every shard failed: {why}")
    try:
        merged = merge_reports(reports)
    except MergeError as err:
        raise LoadError(f"cannot merge the shards' reports: {err}") from None
    streamed = {row["t"]: row for row in rows.out}
    for row in merged["per_second"]:
        extra = streamed.get(row["t"], {})
        row.update({k: v for k, v in extra.items() if k not in row and k != "kind"})
    merged["per_second_streamed"] = rows.out
    merged["shards"] = [
        {
            "shard": p.parameters["shard"],
            "probe_only": p.options.publishers == 0,
            "worker": w,
            "status": "failed" if i in shards.failed else "ok",
            "error": shards.failed.get(i),
        }
        for i, (p, w) in enumerate(zip(shards.plans, shards.workers, strict=True))
    ]
    merged["interrupted"] = interrupted or any(r.get("interrupted") for r in reports)
    merged["aborted"] = next((r["aborted"] for r in reports if r.get("aborted")), None)
    return merged
