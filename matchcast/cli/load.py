"""``matchcast load``, ``load merge`` and ``load-consumer``: their options, read and checked.

What a run does is :mod:`matchcast.load`'s (:func:`matchcast.load.execute`): this module reads
the options, builds a :class:`~matchcast.load.LoadArgs` and a plan, and calls it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from events import LOAD_ROOT
from matchcast.cli.chaos import parse_chaos, write_chaos_log, write_truth
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
    LoadFeedOpt,
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
    in_feeds,
    load_matches,
    number,
    parse_protocol,
    parse_speed,
    parse_topics,
    rare,
    whole,
)
from matchcast.load import LoadError, make_factory, nothing_delivered
from matchcast.transport.clients import ClientKind
from simulator import ChaosSpec, ChaosSpecError, Feed

__all__ = ["make_factory", "nothing_delivered", "register"]


_SHAPE = "Load shape"
_CHECKS = "Checks"
_SCALE = "Scale out"
_OUT = OUTPUT_PANEL


def _metrics_port(**extra: Any) -> Any:
    """``--metrics-port`` of load and load-consumer (declared once)."""
    help_text = "Serve Prometheus /metrics here."
    return typer.Option("--metrics-port", parser=PORT, metavar="PORT", help=help_text, **extra)


def _metrics_addr(**extra: Any) -> Any:
    """``--metrics-addr`` of load and load-consumer (declared once)."""
    help_text = "Address for the metrics server."
    return typer.Option("--metrics-addr", metavar="ADDRESS", help=help_text, **extra)


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
        int | None,
        typer.Option(
            "--matches",
            "-k",
            parser=whole(1),
            metavar="K",
            help="Concurrent matches (default 10).",
            show_default=False,
        ),
    ] = None,
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
    speed: LoadSpeedOpt = None,
    feed: LoadFeedOpt = Feed.full,
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
    stages: Annotated[
        str | None,
        typer.Option(
            "--stages",
            metavar="D:N,...",
            help="Live matches over time, ramped linearly to each target: 30s:100,5m:1000,30s:0 "
            "(replaces --matches, --ramp, --duration).",
            rich_help_panel=_SHAPE,
        ),
    ] = None,
    subscriber_stages: Annotated[
        str | None,
        typer.Option(
            "--subscriber-stages",
            metavar="D:N,...",
            help="Probe subscribers over time, as --stages (replaces --subscribers).",
            **rare(_SHAPE),
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
        float | None,
        typer.Option(
            "--ramp",
            parser=number(0, 86_400),  # finite: 'inf' ended the run with an IndexError
            metavar="SECONDS",
            help="Start the matches over this many seconds.",
            **rare(_SHAPE),
        ),
    ] = None,
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
    abort_on_fail: Annotated[
        bool,
        typer.Option(
            "--abort-on-fail",
            help="End the run at the first --check that fails on the figures so far (exit 3).",
            rich_help_panel=_CHECKS,
        ),
    ] = False,
    check_delay: Annotated[
        float,
        typer.Option(
            "--check-delay",
            parser=number(0, 86_400),
            metavar="SECONDS",
            help="Warm-up before --abort-on-fail looks at the checks.",
            **rare(_CHECKS),
        ),
    ] = 0.0,
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
    dask: Annotated[
        str | None,
        typer.Option(
            "--dask",
            metavar="ADDRESS",
            help="Run --shards N as tasks on this Dask scheduler (tcp://host:8786), one a worker.",
            **rare(_SCALE),
        ),
    ] = None,
    shards: Annotated[
        int | None,
        typer.Option(
            "--shards",
            parser=whole(1),
            metavar="N",
            help="Shards of the run on --dask.",
            **rare(_SCALE),
        ),
    ] = None,
    chaos: ChaosOpt = None,
    seed: SeedOpt = 0,
    chaos_log: ChaosLogOpt = None,
    truth: TruthOpt = None,
    report: Annotated[Path | None, _report_option("Write every figure to this JSON file.")] = None,
    csv_path: _CsvOpt = None,
    chart: _ChartOpt = None,
    live: Annotated[
        str,
        typer.Option(
            "--live",
            metavar="terminal|json|none",
            help="Figures each second: a line on a terminal, or a JSON line on standard output.",
            rich_help_panel=_OUT,
        ),
    ] = "terminal",
    progress: Annotated[
        bool,
        typer.Option("--progress/--no-progress", help="Live line (on a terminal).", **rare(_OUT)),
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
    dashboard: Annotated[
        int | None,
        typer.Option(
            "--dashboard",
            parser=PORT,
            metavar="PORT",
            help="Serve live charts of the run on http://127.0.0.1:PORT/ (0: a free port).",
            **rare(_OUT),
        ),
    ] = None,
    dashboard_host: Annotated[
        str,
        typer.Option(
            "--dashboard-host", metavar="ADDRESS", help="Address for the dashboard.", **rare(_OUT)
        ),
    ] = "127.0.0.1",
    report_html: Annotated[
        Path | None,
        typer.Option(
            "--report-html",
            metavar="FILE",
            help="Write the charts of the run into one self-contained HTML file.",
            **rare(_OUT),
        ),
    ] = None,
    load_metrics_port: Annotated[int | None, _metrics_port(**rare(_OUT))] = None,
    load_metrics_addr: Annotated[str, _metrics_addr(**rare(_OUT))] = "127.0.0.1",
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
        _merged([Path(f) for f in specs[1:]], report, csv_path, chart, checks)
        return
    if live not in ("terminal", "json", "none"):
        fail(f"--live {live!r}: terminal, json or none", 2)
    from matchcast.load._outputs import live_outputs  # noqa: PLC0415

    try:
        sinks = tuple(
            live_outputs(
                dashboard=dashboard,
                dashboard_host=dashboard_host,
                report_html=report_html,
                metrics_port=load_metrics_port,
                metrics_addr=load_metrics_addr,
            )
        )
    except ValueError as err:
        fail(str(err), 2)
    args = _args(locals())
    console = Console(stderr=True)
    try:
        args = args.honest()
        plan = _plan(args)
        result, run = _execute(args, plan, console, live, checks, abort_on_fail, check_delay, sinks)
        if run is not None:
            _write_ground_truth(run, plan.chaos, seed, chaos_log, truth)
        out = Console(stderr=live == "json")
        failures = output(result, out, report=report, csv_path=csv_path, chart=chart)
    except LoadError as err:
        _end(err)
    _exit(result, failures)


def _args(given: dict[str, Any]) -> Any:
    """The options of ``load`` (its local names) as :class:`~matchcast.load.LoadArgs`."""
    from matchcast.load import LoadArgs  # noqa: PLC0415

    names = set(LoadArgs.__dataclass_fields__) - {"parsed_stages", "parsed_subscriber_stages"}
    values = {name: given[name] for name in names if name in given}
    a, b, c, d = given["ca_file"], given["cert_file"], given["key_file"], given["tls_insecure"]
    values.update(
        tls=(a, b, c, d),
        expect_consumer=tuple(given["expect_consumer"] or ()),
        progress=given["progress"] and given["live"] == "terminal",
    )
    return LoadArgs(**values)


def _plan(args: Any) -> Any:
    """Read what the command module reads (sources, topics, speed, chaos, protocol) and plan."""
    from matchcast.load import plan  # noqa: PLC0415

    loaded = [m for spec in (args.specs or [None]) for m in load_matches(spec)]
    sources = in_feeds(loaded, Feed(args.feed))
    return plan(
        args,
        sources=sources,
        topics=parse_topics(args.root),
        speed=parse_speed(args.speed),
        chaos=_chaos_options(args.chaos, args.chaos_log, args.truth, args.in_workers),
        protocol=parse_protocol(args.protocol),
    )


def _execute(
    args: Any,
    plan: Any,
    console: Console,
    live: str,
    checks: list[Any],
    abort_on_fail: bool,
    check_delay: float,
    sinks: tuple[Any, ...] = (),
) -> tuple[dict[str, Any], Any]:
    from matchcast.load import LiveOptions, Runtime, execute  # noqa: PLC0415

    def brokers(text: str | None) -> Any:
        return connection_options(text, *args.tls)

    runtime = Runtime(run=run_command, console=console, brokers=brokers)
    options = LiveOptions(
        sinks=sinks,
        live=live if args.progress or live != "terminal" else "none",
        checks=tuple(checks),
        check_delay_s=check_delay,
        abort_on_fail=abort_on_fail,
    )
    return execute(args, plan, runtime, options)


def _end(err: LoadError) -> NoReturn:
    if err.message:
        fail(err.message, err.code)
    raise CommandExit(err.code)


def _exit(result: dict[str, Any], failures: list[str]) -> None:
    """Exit 130 after Ctrl-C, 3 with the reasons when the run failed."""
    if result.get("interrupted"):
        raise CommandExit(130)
    if failures:
        stderr = Console(stderr=True, highlight=False)
        for line in failures:
            stderr.print(f"[bold red]failed:[/] {escape(line)}")
        raise typer.Exit(3)


def _merged(
    files: list[Path],
    report: Path | None,
    csv_path: Path | None,
    chart: Path | None,
    checks: list[Any],
) -> None:
    from matchcast.load import evaluate_checks, merge_files  # noqa: PLC0415

    try:
        merged = merge_files(files)
        if checks:
            merged["checks"] = evaluate_checks(checks, merged)
        failures = output(merged, Console(), report=report, csv_path=csv_path, chart=chart)
    except LoadError as err:
        _end(err)
    _exit(merged, failures)


def output(result: dict[str, Any], console: Console, **files: Path | None) -> list[str]:
    """:func:`matchcast.load.output`, imported when a run ends."""
    from matchcast.load import output as write_output  # noqa: PLC0415

    return write_output(result, console, **files)


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
    metrics_port: Annotated[int | None, _metrics_port()] = None,
    metrics_addr: Annotated[str, _metrics_addr()] = "127.0.0.1",
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
    factory = make_factory(client, url, parse_protocol(protocol))

    async def go() -> None:
        server = None
        if metrics_port is not None:
            try:
                server = await metrics.serve(metrics_port, metrics_addr)
            except OSError as err:
                fail(str(err), 1)
        try:
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
        finally:
            if server is not None:
                await server.cleanup()

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
    _merged(files, report, csv_path, chart, checks)


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
