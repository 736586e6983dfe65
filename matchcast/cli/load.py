"""``matchcast load``: drive many matches onto a broker and measure what subscribers receive."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import io
import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from events import LOAD_ROOT, BrokerError, Topics, quote
from matchcast.cli.chaos import (
    parse_chaos,
    write_chaos_log,
    write_truth,
)
from matchcast.cli.common import CommandExit, fail, setup_logs
from matchcast.cli.common import run as run_command
from matchcast.cli.options import (
    BROKER_PANEL,
    OUTPUT_PANEL,
    PORT,
    CaFileOpt,
    CertFileOpt,
    ChaosLogOpt,
    ChaosOpt,
    ClientOpt,
    HelpAllOpt,
    KeyFileOpt,
    LoadBrokerOpt,
    LoadQosOpt,
    LoadSpeedOpt,
    LogFmtOpt,
    ProtocolOpt,
    RootOpt,
    SeedOpt,
    SubscriptionQosOpt,
    TlsInsecureOpt,
    TruthOpt,
    VerboseOpt,
    connection_options,
    load_matches,
    number,
    parse_protocol,
    parse_speed,
    parse_topics,
    rare,
    whole,
)
from matchcast.load._nodes import NodeAssigner
from matchcast.redact import redact, redact_argv, redact_data, write_private
from matchcast.transport.clients import ClientKind
from matchcast.transport.connection import ENV_PASSWORD
from simulator import ChaosSpec, ChaosSpecError

#: What a worker started with ``--start-on-go`` prints once it is connected and subscribed.
READY_LINE = "matchcast-load-ready"

__all__ = ["make_factory", "nothing_delivered", "register"]


_SHAPE = "Load shape"
_CHECKS = "Checks"
_SCALE = "Scale out"
_OUT = OUTPUT_PANEL


# The outputs ``load`` and ``load merge`` both write; the help of each says what it holds.
def _report_option(help_text: str) -> Any:
    return typer.Option("--report", metavar="FILE", help=help_text, rich_help_panel=_OUT)


def _check_option(help_text: str) -> Any:
    return typer.Option("--check", metavar="EXPR", help=help_text, rich_help_panel=_CHECKS)


_CsvOpt = Annotated[
    Path | None,
    typer.Option("--csv", metavar="FILE", help="Write the per-second series as CSV.", **rare(_OUT)),
]
_ChartOpt = Annotated[
    Path | None,
    typer.Option(
        "--chart", metavar="FILE", help="Draw throughput and latency into a PNG.", **rare(_OUT)
    ),
]


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


@contextlib.contextmanager
def _spawned(spawn: bool) -> Iterator[str | None]:
    if not spawn:
        yield None
        return
    from matchcast.testing import Mosquitto, mosquitto_binary  # noqa: PLC0415

    binary = mosquitto_binary()
    if binary is None:
        raise typer.BadParameter("--spawn-mosquitto: mosquitto is not installed")
    broker = Mosquitto(binary, extra=["max_queued_messages 1000000"]).start()
    try:
        yield broker.url
    finally:
        broker.close()  # stopped, and its folder removed


def write_csv(path: Path, report: dict[str, Any]) -> None:
    """The per-second series of ``report`` as CSV (owner-only, like the report)."""
    rows = report["per_second"]
    out = io.StringIO(newline="")
    if rows:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    write_private(path, redact(out.getvalue()))


def load(
    specs: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="MATCH",
            help="Match specs to copy (default the semi-final): names, files, sim:SEED.",
            show_default=False,
        ),
    ] = None,
    matches: Annotated[
        int,
        typer.Option("--matches", "-k", parser=whole(1), metavar="K", help="Concurrent matches."),
    ] = 10,
    subscribers: Annotated[
        int,
        typer.Option(
            "--subscribers",
            "-m",
            parser=whole(0),
            metavar="M",
            help="Probe subscriber connections.",
        ),
    ] = 1,
    speed: LoadSpeedOpt = "max",
    rate: Annotated[
        float | None,
        typer.Option(
            "--rate",
            parser=number(0.001),
            metavar="N",
            help="Target total events/s (overrides --speed).",
        ),
    ] = None,
    duration: Annotated[
        float | None,
        typer.Option(
            "--duration",
            parser=number(0.1),
            metavar="SECONDS",
            help="Send for this long, replacing finished matches.",
        ),
    ] = None,
    broker: LoadBrokerOpt = None,
    spawn_mosquitto: Annotated[
        bool,
        typer.Option(
            "--spawn-mosquitto",
            help="Start a mosquitto of our own to test.",
            rich_help_panel=BROKER_PANEL,
        ),
    ] = False,
    qos: LoadQosOpt = 0,
    client: ClientOpt = ClientKind.fast,
    ca_file: CaFileOpt = None,
    cert_file: CertFileOpt = None,
    key_file: KeyFileOpt = None,
    tls_insecure: TlsInsecureOpt = False,
    protocol: ProtocolOpt = "auto",
    root: RootOpt = LOAD_ROOT,
    ramp: Annotated[
        float,
        typer.Option(
            "--ramp",
            parser=number(0, 86_400),  # finite: 'inf' ended the run with an IndexError
            metavar="SECONDS",
            help="Start the matches over this many seconds.",
            **rare(_SHAPE),
        ),
    ] = 0.0,
    payload_size: Annotated[
        int,
        typer.Option(
            "--payload-size",
            parser=whole(0),
            metavar="BYTES",
            help="Pad events to this many bytes.",
            **rare(_SHAPE),
        ),
    ] = 0,
    states: Annotated[
        bool,
        typer.Option(
            "--states/--no-states", help="Also publish retained state snapshots.", **rare(_SHAPE)
        ),
    ] = True,
    publishers: Annotated[
        int,
        typer.Option(
            "--publishers",
            parser=whole(1),
            metavar="N",
            help="Publishing connections.",
            **rare(_SHAPE),
        ),
    ] = 1,
    max_inflight: Annotated[
        int,
        typer.Option(
            "--max-inflight",
            parser=whole(1),
            metavar="N",
            help="Publishes in flight per connection.",
            **rare(_SHAPE),
        ),
    ] = 1000,
    shared_group: Annotated[
        str | None,
        typer.Option(
            "--shared-group",
            metavar="NAME",
            help="Probes share $share/NAME/... as one consumer.",
            **rare(_SHAPE),
        ),
    ] = None,
    check: Annotated[
        list[str] | None,
        _check_option(
            "A threshold, e.g. 'p99 < 50ms' or 'lost == 0' (repeatable; one failed exits 3) "
            "on p50 p90 p99 p99.9 max mean (ms), lost duplicates reordered received "
            "publish_failures overruns, delivered_rate achieved_rate (events/s)."
        ),
    ] = None,
    verify_state: Annotated[
        bool,
        typer.Option(
            "--verify-state",
            help="Check each consumer's reported final state against the truth.",
            rich_help_panel=_CHECKS,
        ),
    ] = False,
    expect_consumer: Annotated[
        list[str] | None,
        typer.Option(
            "--expect-consumer",
            metavar="ID",
            help="A consumer id that must report (repeatable).",
            **rare(_CHECKS),
        ),
    ] = None,
    verify_timeout: Annotated[
        float,
        typer.Option(
            "--verify-timeout",
            parser=number(0),
            metavar="SECONDS",
            help="Seconds to wait for the reports.",
            **rare(_CHECKS),
        ),
    ] = 15.0,
    overrun_ms: Annotated[
        float,
        typer.Option(
            "--overrun-ms",
            parser=number(0),
            metavar="MS",
            help="Later than this counts as overrun.",
            **rare(_CHECKS),
        ),
    ] = 10.0,
    drain_idle: Annotated[
        float,
        typer.Option(
            "--drain-idle",
            parser=number(0),
            metavar="SECONDS",
            help="Stop waiting after this idle time.",
            **rare(_CHECKS),
        ),
    ] = 2.0,
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            parser=whole(1),
            metavar="N",
            help="Spread the load over this many processes.",
            rich_help_panel=_SCALE,
        ),
    ] = 1,
    probe_workers: Annotated[
        int,
        typer.Option(
            "--probe-workers",
            parser=whole(0),
            metavar="N",
            help="Run the probes in this many processes of their own; the --workers then "
            "only send.",
            **rare(_SCALE),
        ),
    ] = 0,
    shard: Annotated[
        str | None,
        typer.Option(
            "--shard",
            metavar="i/n",
            help="Run slice i of n (one per machine); merge their reports.",
            **rare(_SCALE),
        ),
    ] = None,
    start_at: Annotated[
        float | None,
        typer.Option(
            "--start-at",
            parser=number(0),
            metavar="EPOCH",
            help="Epoch seconds to start sending (shards start together).",
            **rare(_SCALE),
        ),
    ] = None,
    tag: Annotated[
        str | None,
        typer.Option(
            "--tag",
            metavar="TAG",
            help="Match id tag; give the shards of one run the same.",
            **rare(_SCALE),
        ),
    ] = None,
    probe_only: Annotated[
        bool, typer.Option("--probe-only", hidden=True, help="This shard only probes.")
    ] = False,
    start_on_go: Annotated[
        bool,
        typer.Option(
            "--start-on-go",
            hidden=True,
            help=f"Once connected and subscribed, print {READY_LINE!r} and wait for 'go' on "
            "standard input (how --workers starts its processes together).",
        ),
    ] = False,
    chaos: ChaosOpt = None,
    seed: SeedOpt = 0,
    chaos_log: ChaosLogOpt = None,
    truth: TruthOpt = None,
    report: Annotated[Path | None, _report_option("Write every figure to this JSON file.")] = None,
    csv_path: _CsvOpt = None,
    chart: _ChartOpt = None,
    progress: Annotated[
        bool,
        typer.Option("--progress/--no-progress", help="Live view (on a terminal).", **rare(_OUT)),
    ] = True,
    keep: Annotated[
        bool,
        typer.Option(
            "--keep",
            help="Leave this run's retained states and consumer reports on the broker "
            "(--shard runs always do).",
            **rare(_OUT),
        ),
    ] = False,
    verbose: VerboseOpt = 0,
    log_format: LogFmtOpt = "auto",
    help_all: HelpAllOpt = False,
) -> None:
    """``matchcast load``: drive K concurrent matches onto a broker and measure what M
    subscribers receive."""
    setup_logs(log_format, verbose, quiet_default=True)
    checks = _checks(check)
    _chart_ready(chart)
    if specs and specs[0] == "merge":
        _merge([Path(f) for f in specs[1:]], report, csv_path, chart, checks)
        return
    args = _LoadArgs(
        specs=specs,
        broker=broker,
        tls=(ca_file, cert_file, key_file, tls_insecure),
        spawn_mosquitto=spawn_mosquitto,
        matches=matches,
        subscribers=subscribers,
        shared_group=shared_group,
        speed=speed,
        rate=rate,
        ramp=ramp,
        duration=duration,
        qos=qos,
        payload_size=payload_size,
        states=states,
        publishers=publishers,
        max_inflight=max_inflight,
        overrun_ms=overrun_ms,
        drain_idle=drain_idle,
        client=client,
        root=root,
        verify_state=verify_state,
        expect_consumer=tuple(expect_consumer or ()),
        verify_timeout=verify_timeout,
        workers=workers,
        probe_workers=probe_workers,
        probe_only=probe_only,
        shard=shard,
        start_at=start_at,
        start_on_go=start_on_go,
        tag=tag,
        progress=progress,
        keep=keep,
        chaos=chaos,
        seed=seed,
        chaos_log=chaos_log,
        truth=truth,
        protocol=protocol,
    )
    plan = _plan(args)
    result = _run_load(args, plan)
    _output(result, report, csv_path, chart, checks)
    if result.get("interrupted"):
        raise CommandExit(130)


@dataclass(frozen=True)
class _LoadArgs:
    """The options of one ``matchcast load`` as given (its outputs aside), built once."""

    specs: list[str] | None
    broker: str | None
    tls: tuple[Path | None, Path | None, Path | None, bool]
    spawn_mosquitto: bool
    matches: int
    subscribers: int
    shared_group: str | None
    speed: str
    rate: float | None
    ramp: float
    duration: float | None
    qos: int
    payload_size: int
    states: bool
    publishers: int
    max_inflight: int
    overrun_ms: float
    drain_idle: float
    client: ClientKind
    root: str
    verify_state: bool
    expect_consumer: tuple[str, ...]
    verify_timeout: float
    workers: int
    probe_workers: int
    probe_only: bool
    shard: str | None
    start_at: float | None
    start_on_go: bool
    tag: str | None
    progress: bool
    keep: bool
    chaos: str | None
    seed: int
    chaos_log: Path | None
    truth: Path | None
    protocol: str

    @property
    def in_workers(self) -> bool:
        """Whether this process runs worker processes (``--workers``, ``--probe-workers``)."""
        return self.workers > 1 or self.probe_workers > 0


@dataclass(frozen=True)
class _Plan:
    """What the options of a load run mean for this process, checked: its share of the
    matches and probes (a shard's, or all), and the run's LoadOptions and report parameters."""

    topics: Topics
    protocol: str
    chaos: ChaosSpec | None
    shard: tuple[int, int] | None
    tag: str
    templates: list[Any]
    options: Any  # matchcast.load.LoadOptions, imported when a run starts
    parameters: dict[str, Any]


def _plan(a: _LoadArgs) -> _Plan:
    """Check the options (a bad one ends the command, exit 2) and work out this process's run."""
    from matchcast.load import LoadOptions, LoadShape, MatchTemplate  # noqa: PLC0415

    topics, spd, chaos_spec = (
        parse_topics(a.root),
        parse_speed(a.speed),
        _chaos_options(a.chaos, a.chaos_log, a.truth, a.in_workers),
    )
    checked_protocol = parse_protocol(a.protocol)
    if a.shared_group is not None and (
        not a.shared_group or any(c in a.shared_group for c in "/+#")
    ):
        fail(f"--shared-group {quote(a.shared_group)} must be a name without / + #", 2)
    the_shard = _parse_shard(a.shard) if a.shard else None
    if the_shard is not None and (a.workers > 1 or a.probe_workers):
        fail("--workers/--probe-workers and --shard do not mix: they run the shards themselves", 2)
    sources = [m for spec in (a.specs or [None]) for m in load_matches(spec)]  # type: ignore[list-item]
    run_tag = a.tag or uuid.uuid4().hex[:4]
    my_matches, my_subscribers = _share(a, the_shard)
    shape = LoadShape(
        matches=my_matches,
        speed=spd,
        rate=a.rate,
        ramp_s=a.ramp,
        duration_s=a.duration,
        qos=a.qos,
        payload_size=a.payload_size,
        states=a.states,
        tag=run_tag,
        total_matches=a.matches,
    )
    options = LoadOptions(
        shape=shape,
        topics=topics,
        subscribers=my_subscribers,
        shared_group=a.shared_group,
        publishers=0 if a.probe_only else a.publishers,
        max_inflight=a.max_inflight,
        overrun_ms=a.overrun_ms,
        drain_idle_s=a.drain_idle,
        verify_state=a.verify_state,
        verify_timeout_s=a.verify_timeout,
        expect_consumers=a.expect_consumer,
        shard=the_shard,
        start_at=a.start_at,
        start_gate=_ready_then_wait_for_go if a.start_on_go else None,
        chaos=chaos_spec,
        seed=a.seed,
    )
    parameters = {
        "matches": my_matches,
        "total_matches": a.matches,
        "sources": [m.match_id for m in sources],
        "subscribers": my_subscribers,
        "shared_group": a.shared_group,
        "speed": a.speed,
        "rate": a.rate,
        "ramp_s": a.ramp,
        "duration_s": a.duration,
        "qos": a.qos,
        "payload_size": a.payload_size,
        "states": a.states,
        "publishers": a.publishers,
        "max_inflight": a.max_inflight,
        "overrun_ms": a.overrun_ms,
        "client": a.client.value,
        "root": topics.root,
        "tag": run_tag,
        "shard": a.shard,
        "start_at": a.start_at,
        "workers": a.workers,
        "chaos": str(chaos_spec) if chaos_spec is not None else None,
        "seed": a.seed if chaos_spec is not None else None,
        "argv": redact_argv(sys.argv[1:]),
    }
    return _Plan(
        topics=topics,
        protocol=checked_protocol,
        chaos=chaos_spec,
        shard=the_shard,
        tag=run_tag,
        templates=[MatchTemplate.build(m) for m in sources],
        options=options,
        parameters=parameters,
    )


def _share(a: _LoadArgs, shard: tuple[int, int] | None) -> tuple[int, int]:
    """The matches and probe subscribers of this process: all, or shard i of n's slice."""
    if a.probe_only and shard is None:
        fail("--probe-only goes with --shard i/n (--probe-workers sets both)", 2)
    if shard is None:
        return a.matches, a.subscribers
    i, n = shard
    my_matches = 0 if a.probe_only else len(range(i, a.matches, n))
    if my_matches == 0 and not a.probe_only:
        fail(f"--shard {a.shard}: no match falls to this shard with --matches {a.matches}", 2)
    return my_matches, a.subscribers // n + (1 if i < a.subscribers % n else 0)


def _run_load(a: _LoadArgs, plan: _Plan) -> dict[str, Any]:
    """Run the load here or in worker processes, against the brokers given or a mosquitto of
    its own; the report, this run's retained topics cleared unless kept."""
    from rich.console import Console  # noqa: PLC0415

    from matchcast.load import LoadRun  # noqa: PLC0415

    console = Console(stderr=True)
    with _spawned(a.spawn_mosquitto) as spawned_url:
        # Shards start their round-robin on different nodes, so one publisher each spreads.
        nodes = _nodes(spawned_url or a.broker, a.tls, offset=plan.shard[0] if plan.shard else 0)
        plan.parameters.update(broker=nodes.listed, protocol=plan.protocol)
        if a.in_workers:
            result = _run_workers(
                _shards(a.workers, a.probe_workers, a.subscribers),
                _worker_args(a, plan, nodes.listed),
                console,
                nodes.urls[0].password,
            )
            result["parameters"].update(workers=a.workers, probe_workers=a.probe_workers)
        else:
            factory = make_factory(a.client, nodes, plan.protocol)
            run = LoadRun(plan.options, plan.templates, factory)
            result = _run_here(
                run,
                plan.parameters,
                console,
                a.progress,
                streams=plan.shard is not None,
                nodes=nodes.keys,
            )
            _write_ground_truth(run, plan.chaos, a.seed, a.chaos_log, a.truth)
        # A spawned broker goes with its states; shards and workers: the one that merges.
        _clear_own(
            nodes.urls,
            plan.topics,
            plan.tag,
            console,
            keep=a.keep or bool(spawned_url or plan.shard),
        )
    return result


def _worker_args(a: _LoadArgs, plan: _Plan, brokers: str) -> list[str]:
    """The arguments every worker process shares (each adds its shard's own)."""
    child = [
        *(a.specs or []),
        # The password goes to the workers in their environment, never in arguments
        # (ps shows those): the list is written without it.
        *("--broker", brokers, "--matches", str(a.matches)),
        *("--protocol", plan.protocol),
        *("--speed", a.speed, "--ramp", str(a.ramp)),
        *("--qos", str(a.qos), "--payload-size", str(a.payload_size)),
        "--states" if a.states else "--no-states",
        *("--publishers", str(a.publishers), "--max-inflight", str(a.max_inflight)),
        *("--overrun-ms", str(a.overrun_ms), "--drain-idle", str(a.drain_idle)),
        *("--client", a.client.value, "--root", plan.topics.root, "--tag", plan.tag),
        *("--verify-timeout", str(a.verify_timeout), "--no-progress", "--keep"),
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


def _clear_own(url: Any, topics: Any, tag: str, console: Any, *, keep: bool) -> None:
    """Remove the retained states (and consumer reports) of this run's matches, whose ids
    hold ``-{tag}-``, so runs do not pile them up on the broker; a failure only warns."""
    if keep:
        return
    from matchcast.app.retained import clear_retained, find_retained  # noqa: PLC0415

    async def go() -> int:
        own = await find_retained(url, topics, select=lambda match_id: f"-{tag}-" in match_id)
        return await clear_retained(url, own)

    try:
        cleared = run_command(go)
    except CommandExit:
        console.print("could not clear this run's retained topics: `matchcast clear` does")
        return
    console.print(f"cleared {cleared} retained topic(s) of this run (--keep leaves them)")


def _run_here(
    run: Any,
    parameters: dict[str, Any],
    console: Any,
    progress: bool,
    *,
    streams: bool,
    nodes: tuple[str, ...],
) -> dict[str, Any]:
    """Run ``run`` in this process; its report, marked ``interrupted`` after Ctrl-C."""
    from matchcast.load import build_report  # noqa: PLC0415

    interrupted = run_command(lambda: _interruptible(run, console, progress))
    if interrupted and run.sender is None:
        console.print("interrupted before the first event was sent", markup=False)
        raise CommandExit(130)
    result = build_report(run, parameters, streams=streams, nodes=nodes)
    result["interrupted"] = interrupted
    return result


async def _interruptible(run: Any, console: Any, progress: bool) -> bool:
    """Run ``run``; True if Ctrl-C (or SIGTERM) cut it short, so what it measured so far is
    still reported."""
    import asyncio  # noqa: PLC0415

    try:
        async with _live(run, console, progress and console.is_terminal):
            await run.run()
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is None or task.uncancel() > 0:
            raise
        return True
    return False


def _checks(texts: list[str] | None) -> list[Any]:
    from matchcast.load import CheckError, parse_check  # noqa: PLC0415

    try:
        return [parse_check(t) for t in texts or ()]
    except CheckError as err:
        fail(str(err), 2)


def _chart_ready(chart: Path | None) -> None:
    """Fail before a run whose --chart cannot be drawn, not after it."""
    if chart is None:
        return
    try:
        import matplotlib  # noqa: F401, PLC0415
    except ImportError:
        fail("--chart needs matplotlib: pip install 'matchcast[load]'", 2)


def _chaos_options(
    chaos: str | None, chaos_log: Path | None, truth: Path | None, many: bool
) -> ChaosSpec | None:
    """The ``--chaos`` spec; a bad one, or ground-truth files with workers, end in exit 2."""
    try:
        spec = parse_chaos(chaos)
    except ChaosSpecError as err:
        fail(str(err), 2)
    if (chaos_log or truth) and many:
        fail(
            "--chaos-log and --truth are written by one process: run without --workers "
            "(or per --shard i/n, each shard writing its own files)",
            2,
        )
    return spec


def _write_ground_truth(
    run: Any, spec: ChaosSpec | None, seed: int, chaos_log: Path | None, truth: Path | None
) -> None:
    """``--chaos-log`` and ``--truth`` of a finished run (every match started)."""
    stats = run.stats
    if chaos_log is not None:
        write_chaos_log(chaos_log, stats.faults)
    if truth is not None:
        states = {
            m: stats.truth[m] if m in stats.truth else template.final_state(m)
            for m, template in stats.templates.items()
        }
        write_truth(truth, states, spec, seed)


def _nodes(
    broker: str | None, tls: tuple[Path | None, Path | None, Path | None, bool], *, offset: int
) -> NodeAssigner:
    """The brokers of ``--broker`` (one or a list), to assign connections to round-robin."""
    url = connection_options(broker, *tls)
    if url is None:
        msg = "matchcast load needs --broker URL (or $MATCHCAST_BROKER, or --spawn-mosquitto)"
        fail(msg, 2)
    return NodeAssigner(url, offset=offset)


def _parse_shard(text: str) -> tuple[int, int]:
    i, sep, n = text.partition("/")
    try:
        shard = (int(i), int(n))
    except ValueError:
        shard = (-1, 0)
    if not sep or not 0 <= shard[0] < shard[1]:
        fail(f"--shard must be i/n with 0 <= i < n, e.g. 0/4, not {quote(text)}", 2)
    return shard


def _shards(workers: int, probe_workers: int, subscribers: int) -> list[list[str]]:
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


#: How long the workers of one run may take to connect and subscribe, all together.
_READY_TIMEOUT_S = 120.0


async def _ready_then_wait_for_go() -> None:
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
        fail(f"worker(s) failed to start: {', '.join(why)}")
    for p in procs:
        with contextlib.suppress(OSError):
            p.stdin.write(b"go\n")
            p.stdin.close()


def _run_workers(
    shards: list[list[str]], child: list[str], console: Any, password: str | None = None
) -> dict[str, Any]:
    """Run one process of this machine per shard (``child`` + its own arguments), start them
    together once all are ready; merge their reports. The broker ``password`` reaches them in
    their environment."""
    import subprocess  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    from matchcast.load import MergeError, merge_reports, read_reports  # noqa: PLC0415

    env = {**os.environ, ENV_PASSWORD: password} if password else None
    with tempfile.TemporaryDirectory(prefix="mc-load-") as tmp:
        paths = [Path(tmp) / f"shard-{i}.json" for i in range(len(shards))]
        procs = [
            subprocess.Popen(  # noqa: S603
                [
                    sys.executable,
                    "-m",
                    "matchcast",
                    "load",
                    *child,
                    *own,
                    "--report",
                    str(path),
                    "--log-format",
                    "json",
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
            )
            for own, path in zip(shards, paths, strict=True)
        ]
        console.print(f"[dim]{len(shards)} workers running: pids {[p.pid for p in procs]}[/]")
        try:
            _start_together(procs)
        except KeyboardInterrupt:  # before any sent: nothing measured, nothing to merge
            for proc in procs:
                if proc.stdin is not None:
                    with contextlib.suppress(OSError):
                        proc.stdin.close()  # a worker waiting for its go stops waiting
                proc.wait()
            raise CommandExit(130) from None
        # Ctrl-C reaches the workers too (one process group): each reports what it measured
        # and exits 130; wait for them and merge those reports, marked interrupted.
        interrupted = False
        codes = []
        for proc in procs:
            while True:
                try:
                    codes.append(proc.wait())
                    break
                except KeyboardInterrupt:
                    interrupted = True
        ok = (0, 3, 130) if interrupted else (0, 3)
        bad = [(i, c) for i, c in enumerate(codes) if c not in ok]
        if bad:
            fail(f"worker(s) failed: {', '.join(f'shard {i} exit {c}' for i, c in bad)}")
        try:
            reports = read_reports([p for p in paths if p.exists()])
            if not reports:
                console.print("interrupted before the first event was sent", markup=False)
                raise CommandExit(130)
            merged = merge_reports(reports)
        except MergeError as err:
            fail(f"cannot merge the workers' reports: {err}")
        merged["interrupted"] = interrupted or any(r.get("interrupted") for r in reports)
        return merged


def _merge(
    files: list[Path],
    report: Path | None,
    csv_path: Path | None,
    chart: Path | None,
    checks: list[Any],
) -> None:
    from matchcast.load import MergeError, merge_reports, read_reports  # noqa: PLC0415

    if not files:
        fail("matchcast load merge needs report files: merge a.json b.json --report all.json", 2)
    try:
        merged = merge_reports(read_reports(files))
    except MergeError as err:
        fail(f"cannot merge: {err}", 2)
    _output(merged, report, csv_path, chart, checks)


def _output(
    result: dict[str, Any],
    report: Path | None,
    csv_path: Path | None,
    chart: Path | None,
    checks: list[Any],
) -> None:
    """Print the table, write the files; exit 3 if a check failed or nothing got through."""
    from rich.console import Console  # noqa: PLC0415

    from matchcast.load import evaluate_checks, render_table, write_chart  # noqa: PLC0415

    if checks:
        result["checks"] = evaluate_checks(checks, result)
    failures = _failures(result)
    Console().print(render_table(result))
    if report is not None:
        write_private(report, json.dumps(redact_data(result), indent=1))
    if csv_path is not None:
        write_csv(csv_path, result)
    if chart is not None:
        try:
            write_chart(result, chart)
        except RuntimeError as err:
            fail(str(err), 2)
    if failures and not result.get("interrupted"):
        stderr = Console(stderr=True, highlight=False)
        for line in failures:
            stderr.print(f"[bold red]failed:[/] {escape(line)}")
        raise typer.Exit(3)


def _failures(result: dict[str, Any]) -> list[str]:
    """Why the run fails (exit 3): a failed check, a wrong final state, or nothing delivered."""
    out = [
        f"--check {c['check']} (actual {c['actual']:g})"
        for c in result.get("checks") or ()
        if not c["passed"]
    ]
    verification = result.get("verification")
    if verification is not None and not verification["ok"]:
        out.append("verify-state: a consumer's final state is wrong or missing")
    nothing = nothing_delivered(result)
    if nothing is not None:
        out.append(f"nothing was delivered: {nothing}")
    return out


def nothing_delivered(result: dict[str, Any]) -> str | None:
    """Why a run whose probes received nothing of what they should have is a failure, or None.

    A ``$share`` subscription that a broker grants and never serves (NATS 2.9, amqtt) looks
    like a quiet broker otherwise: such a run exits 3, like a failed check. A shard that only
    sends has nobody to deliver to and never fails this way.
    """
    delivery = result.get("delivery") or {}
    params = result.get("parameters") or {}
    probes = int(params.get("subscribers") or 0) or len(delivery.get("consumers") or ())
    if not probes and "subscribers" in params:
        return None
    expected = delivery.get("expected", 0)
    if expected and not delivery.get("unique", delivery.get("received", 0)):
        shared = params.get("shared_group")
        why = (
            f" (does the broker serve $share/{shared}/...? NATS 2.9 grants it and delivers nothing)"
            if shared
            else ""
        )
        return f"the probes received none of the {expected:,} events they expected{why}"
    if probes and not expected and not delivery.get("received", 0):
        return "no event was published or received"
    return None


@contextlib.asynccontextmanager
async def _live(run: Any, console: Any, enabled: bool) -> AsyncIterator[None]:
    """A live line of progress, refreshed every second, while the run lasts."""
    if not enabled:
        yield
        return
    import asyncio  # noqa: PLC0415

    from rich.live import Live  # noqa: PLC0415

    def line() -> str:
        p = run.progress()
        return (
            f"{p.elapsed_s:6.1f}s  matches {p.matches_active} active / {p.matches_started} started"
            f"  sent {p.sent_per_s:,}/s  delivered {p.delivered_per_s:,}/s  p99 {p.p99_ms:.1f} ms"
            f"  overruns {p.overruns:,}  failures {p.failures:,}"
        )

    with Live(line(), console=console, refresh_per_second=2, transient=True) as live:

        async def tick() -> None:
            while True:
                await asyncio.sleep(1.0)
                live.update(line())

        task = asyncio.ensure_future(tick())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def consume(
    consumer_id: Annotated[
        str,
        typer.Option(
            "--consumer-id", metavar="ID", help="This consumer's name in reports and topics."
        ),
    ] = "consumer-1",
    shared_group: Annotated[
        str | None,
        typer.Option(
            "--shared-group", metavar="NAME", help="Join $share/NAME/... (a consumer group)."
        ),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            "--metrics-port", parser=PORT, metavar="PORT", help="Serve Prometheus /metrics here."
        ),
    ] = None,
    metrics_addr: Annotated[
        str,
        typer.Option("--metrics-addr", metavar="ADDRESS", help="Address for the metrics server."),
    ] = "127.0.0.1",
    report_state: Annotated[
        bool,
        typer.Option("--report-state/--no-report-state", help="Publish its state at each change."),
    ] = True,
    idle_exit: Annotated[
        float | None,
        typer.Option(
            "--idle-exit",
            parser=number(0.1),
            metavar="SECONDS",
            help="Exit after this many idle seconds.",
        ),
    ] = None,
    broker: LoadBrokerOpt = None,
    client: ClientOpt = ClientKind.fast,
    ca_file: CaFileOpt = None,
    cert_file: CertFileOpt = None,
    key_file: KeyFileOpt = None,
    tls_insecure: TlsInsecureOpt = False,
    protocol: ProtocolOpt = "auto",
    qos: SubscriptionQosOpt = 1,
    root: RootOpt = LOAD_ROOT,
    verbose: VerboseOpt = 0,
    log_format: LogFmtOpt = "auto",
    help_all: HelpAllOpt = False,
) -> None:
    """``matchcast load-consumer``: the consumer runner under load, metrics on HTTP, final
    states reported for ``load --verify-state``."""
    from matchcast.load import RunnerMetrics, run_consumer  # noqa: PLC0415

    setup_logs(log_format, max(verbose, 1), quiet_default=True)
    topics = parse_topics(root)
    url = connection_options(broker, ca_file, cert_file, key_file, tls_insecure)
    if url is None:
        fail("matchcast load-consumer needs --broker URL (or $MATCHCAST_BROKER)", 2)
    metrics = RunnerMetrics()
    if metrics_port is not None:
        metrics.serve(metrics_port, metrics_addr)
    factory = make_factory(client, url, parse_protocol(protocol))

    async def go() -> None:
        async with factory(f"mc-consume-{consumer_id}", "consumer") as conn:
            await run_consumer(
                conn,
                topics,
                consumer_id,
                metrics=metrics,
                report_state=report_state,
                shared_group=shared_group,
                qos=qos,
                idle_exit_s=idle_exit,
            )

    run_command(go)


def merge(
    files: Annotated[
        list[Path],
        typer.Argument(metavar="REPORT", help="Reports of shards (--shard or --workers)."),
    ],
    report: Annotated[
        Path | None, _report_option("Write the merged report to this JSON file.")
    ] = None,
    csv_path: _CsvOpt = None,
    chart: _ChartOpt = None,
    check: Annotated[
        list[str] | None, _check_option("A threshold, as for load (repeatable); failed: exit 3.")
    ] = None,
    help_all: HelpAllOpt = False,
) -> None:
    """``matchcast load merge``: combine the reports of shards into one (see :data:`MERGE_HELP`)."""
    checks = _checks(check)
    _chart_ready(chart)
    _merge(files, report, csv_path, chart, checks)


#: ``load``'s help after its summary.
LOAD_HELP = "`matchcast load merge A.json B.json --report all.json` combines the reports of shards."
#: ``load merge``'s help after its summary.
MERGE_HELP = "Counts, streams and latency histograms are merged, not averaged percentiles."


def register(app: typer.Typer) -> None:
    """Add the ``load`` and ``load-consumer`` commands to ``app``; ``load merge`` is run as the
    hidden ``load merge`` (see ``matchcast.cli.main``), so it has a help of its own."""
    app.command("load", help=LOAD_HELP)(load)
    app.command("load merge", hidden=True, help=MERGE_HELP)(merge)
    app.command("load-consumer")(consume)
