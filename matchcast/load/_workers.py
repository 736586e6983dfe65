"""``load --workers N``: one process of this machine per shard, started together, merged.

Each worker is ``matchcast load --shard i/n --start-on-go``: once its probes listen it prints
:data:`READY_LINE` and waits for ``go`` on its standard input; the parent says go to all at
once when every one is ready, waits for them and merges their reports (``load merge``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from events import BrokerError
from matchcast.load._errors import LoadError
from matchcast.transport.connection import ENV_PASSWORD

if TYPE_CHECKING:
    from matchcast.load._args import LoadArgs, Plan

__all__ = ["READY_LINE", "ready_then_wait_for_go", "run_workers", "shards", "worker_args"]

#: What a worker started with ``--start-on-go`` prints once it is connected and subscribed.
READY_LINE = "matchcast-load-ready"
#: How long the workers of one run may take to connect and subscribe, all together.
_READY_TIMEOUT_S = 120.0


def shards(workers: int, probe_workers: int, subscribers: int) -> list[list[str]]:
    """Each worker process's own arguments: shards that send and probe; or, with
    ``probe_workers``, senders without probes followed by probes that send nothing."""
    if not probe_workers:
        return [
            ["--subscribers", str(subscribers), "--shard", f"{i}/{workers}"] for i in range(workers)
        ]
    senders = [["--subscribers", "0", "--shard", f"{i}/{workers}"] for i in range(workers)]
    probes = [
        ["--subscribers", str(subscribers), "--shard", f"{j}/{probe_workers}", "--probe-only"]
        for j in range(probe_workers)
    ]
    return senders + probes


def worker_args(a: LoadArgs, plan: Plan, brokers: str) -> list[str]:
    """The arguments every worker process shares (each adds its shard's own)."""
    child = [
        *(a.specs or []),
        # The password goes to the workers in their environment, never in arguments
        # (ps shows those): the list is written without it.
        *("--broker", brokers, "--protocol", plan.protocol),
        *("--speed", a.speed, "--ramp", str(a.ramp)),
        *("--qos", str(a.qos), "--payload-size", str(a.payload_size)),
        "--states" if a.states else "--no-states",
        *("--publishers", str(a.publishers), "--max-inflight", str(a.max_inflight)),
        *("--overrun-ms", str(a.overrun_ms), "--drain-idle", str(a.drain_idle)),
        *("--client", a.client.value, "--root", plan.topics.root, "--tag", plan.tag),
        *("--verify-timeout", str(a.verify_timeout), "--no-progress", "--keep"),
        *(("--stages", a.stages) if a.stages else ("--matches", str(a.matches))),
        *(("--rate", str(a.rate)) if a.rate is not None else ()),
        *(("--duration", str(a.duration)) if a.duration is not None else ()),
        *(("--shared-group", a.shared_group) if a.shared_group else ()),
        *(("--verify-state",) if a.verify_state else ()),
        *(x for c in a.expect_consumer for x in ("--expect-consumer", c)),
        *(("--chaos", str(plan.chaos), "--seed", str(a.seed)) if plan.chaos else ()),
    ]
    # Every worker must be connected and subscribed before any sends: each says so,
    # and all are told to go at once (a fixed start time was missed under load).
    return [*child, "--start-on-go", *(("--start-at", repr(a.start_at)) if a.start_at else ())]


async def ready_then_wait_for_go() -> None:
    """Tell the parent this worker listens; send nothing until it says go."""
    sys.stdout.write(READY_LINE + "\n")
    sys.stdout.flush()
    line = await asyncio.to_thread(sys.stdin.readline)
    if line.strip() != "go":
        raise BrokerError("load", "the parent process went away before the start")


def _start_together(procs: list[Any]) -> None:
    """Wait until every worker printed READY_LINE, then tell them all to go.

    A worker's standard output is read to its end on a thread of its own, so a worker that
    prints more can never block on a full pipe.
    """
    import threading  # noqa: PLC0415

    ready = [threading.Event() for _ in procs]

    def watch(proc: Any, flag: threading.Event) -> None:
        for raw in proc.stdout:
            if raw.strip() == READY_LINE.encode():
                flag.set()
        flag.set()  # ended without being ready: the exit code says why

    for proc, flag in zip(procs, ready, strict=True):
        threading.Thread(target=watch, args=(proc, flag), daemon=True).start()
    deadline = time.monotonic() + _READY_TIMEOUT_S
    for flag in ready:
        flag.wait(max(0.0, deadline - time.monotonic()))
    early = [(i, p.poll()) for i, p in enumerate(procs) if p.poll() is not None]
    late = [i for i, f in enumerate(ready) if not f.is_set()]
    if early or late:
        for p in procs:
            p.kill()
        why = [f"shard {i} exited {c} before it was ready" for i, c in early] + [
            f"shard {i} not connected after {_READY_TIMEOUT_S:.0f}s" for i in late
        ]
        raise LoadError(f"worker(s) failed to start: {', '.join(why)}")
    for p in procs:
        with contextlib.suppress(OSError):
            p.stdin.write(b"go\n")
            p.stdin.close()


def _spawn(child: list[str], own: list[str], path: Path, env: dict[str, str] | None) -> Any:
    import subprocess  # noqa: PLC0415

    argv = [sys.executable, "-m", "matchcast", "load", *child, *own]
    return subprocess.Popen(  # noqa: S603
        [*argv, "--report", str(path), "--log-format", "json"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
    )


def _wait_all(procs: list[Any]) -> tuple[list[int], bool]:
    """Every worker's exit code, and whether Ctrl-C came meanwhile.

    Ctrl-C reaches the workers too (one process group): each reports what it measured and
    exits 130; the parent waits for them and merges those reports, marked interrupted.
    """
    interrupted = False
    codes = []
    for proc in procs:
        while True:
            try:
                codes.append(proc.wait())
                break
            except KeyboardInterrupt:
                interrupted = True
    return codes, interrupted


def run_workers(
    own_args: list[list[str]], child: list[str], console: Any, password: str | None = None
) -> dict[str, Any]:
    """Run one process of this machine per shard (``child`` + its own arguments), start them
    together once all are ready; merge their reports. The broker ``password`` reaches them in
    their environment."""
    import tempfile  # noqa: PLC0415

    from matchcast.load._merge import MergeError, merge_reports, read_reports  # noqa: PLC0415

    env = {**os.environ, ENV_PASSWORD: password} if password else None
    with tempfile.TemporaryDirectory(prefix="mc-load-") as tmp:
        paths = [Path(tmp) / f"shard-{i}.json" for i in range(len(own_args))]
        procs = [_spawn(child, own, path, env) for own, path in zip(own_args, paths, strict=True)]
        console.print(f"[dim]{len(procs)} workers running: pids {[p.pid for p in procs]}[/]")
        try:
            _start_together(procs)
        except KeyboardInterrupt:  # before any sent: nothing measured, nothing to merge
            for proc in procs:
                if proc.stdin is not None:
                    with contextlib.suppress(OSError):
                        proc.stdin.close()  # a worker waiting for its go stops waiting
                proc.wait()
            raise LoadError("", 130) from None
        codes, interrupted = _wait_all(procs)
        ok = (0, 3, 130) if interrupted else (0, 3)
        bad = [(i, c) for i, c in enumerate(codes) if c not in ok]
        if bad:
            raise LoadError(f"worker(s) failed: {', '.join(f'shard {i} exit {c}' for i, c in bad)}")
        try:
            reports = read_reports([p for p in paths if p.exists()])
            if not reports:
                console.print("interrupted before the first event was sent", markup=False)
                raise LoadError("", 130)
            merged = merge_reports(reports)
        except MergeError as err:
            raise LoadError(f"cannot merge the workers' reports: {err}") from None
        merged["interrupted"] = interrupted or any(r.get("interrupted") for r in reports)
        return merged
