"""``matchcast load``: drive many matches onto a broker and measure what subscribers receive."""

from __future__ import annotations

import contextlib
import csv
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Annotated, Any

import typer

from matchcast.options import CaFileOpt, CertFileOpt, ClientKind, KeyFileOpt, TlsInsecureOpt

#: Unlike the other commands, a load test never falls back to the embedded broker.
_BrokerOpt = Annotated[
    str | None,
    typer.Option(
        "--broker",
        "-b",
        help="mqtt://\\[user:pass@]host:port or mqtts://...; default $MATCHCAST_BROKER.",
        show_default=False,
    ),
]

__all__ = ["register"]


def make_factory(kind: ClientKind, url: Any) -> Any:
    """A :data:`~matchcast.load.ClientFactory` for ``kind`` connecting to ``url``."""
    if kind is ClientKind.fast:
        from matchcast.fastmqtt import FastClient  # noqa: PLC0415

        def fast(client_id: str, role: str) -> AbstractAsyncContextManager[Any]:
            return FastClient(url, client_id=client_id)

        return fast
    from matchcast.mqtt import MqttClient  # noqa: PLC0415

    def slow(client_id: str, role: str) -> AbstractAsyncContextManager[Any]:
        # paho does not hold its QoS 2 publishes to the broker's receive maximum (mosquitto's
        # is 20): the broker refuses the excess in PUBREC, and aiomqtt reports success.
        # Measured here: with 1000 in flight 20 of 424 QoS 2 events arrived, with 20 all.
        # paho's own default of 20 it is; the load sender's window queues the rest.
        return MqttClient(url, client_id=client_id, max_inflight=20)

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
        broker.stop()


def write_csv(path: Path, report: dict[str, Any]) -> None:
    """The per-second series of ``report`` as CSV."""
    rows = report["per_second"]
    with path.open("w", newline="") as f:
        if not rows:
            return
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def load(
    specs: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[MATCH]...",
            help="Match specs to copy (default the semi-final): names, files, sim:SEED.",
            show_default=False,
        ),
    ] = None,
    broker: _BrokerOpt = None,
    ca_file: CaFileOpt = None,
    cert_file: CertFileOpt = None,
    key_file: KeyFileOpt = None,
    tls_insecure: TlsInsecureOpt = False,
    spawn_mosquitto: Annotated[
        bool, typer.Option("--spawn-mosquitto", help="Start a mosquitto of our own to test.")
    ] = False,
    matches: Annotated[
        int, typer.Option("--matches", "-k", min=1, help="Concurrent matches.")
    ] = 10,
    subscribers: Annotated[
        int, typer.Option("--subscribers", "-m", min=0, help="Probe subscriber connections.")
    ] = 1,
    shared_group: Annotated[
        str | None,
        typer.Option("--shared-group", help="Probes share $share/NAME/... as one consumer."),
    ] = None,
    speed: Annotated[
        str, typer.Option("--speed", help="Match seconds per wall second per match, or max.")
    ] = "max",
    rate: Annotated[
        float | None,
        typer.Option("--rate", min=0.001, help="Target total events/s (overrides --speed)."),
    ] = None,
    ramp: Annotated[
        float, typer.Option("--ramp", min=0, help="Start the matches over this many seconds.")
    ] = 0.0,
    duration: Annotated[
        float | None,
        typer.Option("--duration", min=0.1, help="Send for this long, replacing finished matches."),
    ] = None,
    qos: Annotated[int, typer.Option("--qos", min=0, max=2, help="QoS of every message.")] = 0,
    payload_size: Annotated[
        int, typer.Option("--payload-size", min=0, help="Pad events to this many bytes.")
    ] = 0,
    states: Annotated[
        bool, typer.Option("--states/--no-states", help="Also publish retained state snapshots.")
    ] = True,
    publishers: Annotated[
        int, typer.Option("--publishers", min=1, help="Publishing connections.")
    ] = 1,
    max_inflight: Annotated[
        int, typer.Option("--max-inflight", min=1, help="Publishes in flight per connection.")
    ] = 1000,
    overrun_ms: Annotated[
        float, typer.Option("--overrun-ms", min=0, help="Later than this counts as overrun.")
    ] = 10.0,
    drain_idle: Annotated[
        float, typer.Option("--drain-idle", min=0, help="Stop waiting after this idle time.")
    ] = 2.0,
    client: Annotated[
        ClientKind,
        typer.Option(
            "--client",
            help="fast (mqtt5 codec and our own 3.1.1; 7x aiomqtt here) or aiomqtt.",
        ),
    ] = ClientKind.fast,
    root: Annotated[str, typer.Option("--root", help="Topic root.")] = "matchcast-load",
    report: Annotated[
        Path | None, typer.Option("--report", help="Write every figure to this JSON file.")
    ] = None,
    csv_path: Annotated[
        Path | None, typer.Option("--csv", help="Write the per-second series as CSV.")
    ] = None,
    verify_state: Annotated[
        bool,
        typer.Option(
            "--verify-state",
            help="Afterwards, check each consumer's reported final state against the truth.",
        ),
    ] = False,
    expect_consumer: Annotated[
        list[str] | None,
        typer.Option("--expect-consumer", help="A consumer id that must report (repeatable)."),
    ] = None,
    verify_timeout: Annotated[
        float, typer.Option("--verify-timeout", min=0, help="Seconds to wait for the reports.")
    ] = 15.0,
    chart: Annotated[
        Path | None, typer.Option("--chart", help="Draw throughput and latency into a PNG.")
    ] = None,
    workers: Annotated[
        int, typer.Option("--workers", min=1, help="Spread the load over this many processes.")
    ] = 1,
    probe_workers: Annotated[
        int,
        typer.Option(
            "--probe-workers",
            min=0,
            help="Run the probes in this many processes of their own; the --workers then "
            "only send (as mosquitto_pub and mosquitto_sub are two processes).",
        ),
    ] = 0,
    probe_only: Annotated[
        bool, typer.Option("--probe-only", hidden=True, help="This shard only probes.")
    ] = False,
    shard: Annotated[
        str | None,
        typer.Option("--shard", help="i/n: run slice i of n (one per machine); merge reports."),
    ] = None,
    start_at: Annotated[
        float | None,
        typer.Option("--start-at", help="Epoch seconds to start sending (shards start together)."),
    ] = None,
    tag: Annotated[
        str | None, typer.Option("--tag", help="Match id tag; give shards of one run the same.")
    ] = None,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="Live view (on a terminal).")
    ] = True,
    log_format: Annotated[
        str, typer.Option("--log-format", help="auto, console or json.")
    ] = "auto",
    verbose: Annotated[int, typer.Option("--verbose", "-v", count=True, help="More logs.")] = 0,
) -> None:
    """Drive K concurrent matches onto a broker and measure what M subscribers receive.

    `matchcast load merge A.json B.json --report all.json` combines the reports of shards.
    """
    from rich.console import Console  # noqa: PLC0415

    from matchcast import cli  # noqa: PLC0415
    from matchcast.load import (  # noqa: PLC0415
        LoadOptions,
        LoadRun,
        LoadShape,
        MatchTemplate,
        build_report,
    )

    cli._setup_logs(log_format, verbose, quiet_default=True)
    if specs and specs[0] == "merge":
        _merge([Path(f) for f in specs[1:]], report, csv_path, chart)
        return
    topics = cli._topics(root)
    spd = cli._speed(speed)
    if shared_group is not None and (not shared_group or any(c in shared_group for c in "/+#")):
        cli._fail(f"--shared-group {shared_group!r} must be a name without / + #", 2)
    the_shard = _parse_shard(shard) if shard else None
    if the_shard is not None and (workers > 1 or probe_workers):
        cli._fail(
            "--workers/--probe-workers and --shard do not mix: they run the shards themselves", 2
        )
    sources = [m for spec in (specs or [None]) for m in cli._matches(spec)]  # type: ignore[list-item]
    templates = [MatchTemplate.build(m) for m in sources]
    run_tag = tag or uuid.uuid4().hex[:4]
    my_matches, my_subscribers = matches, subscribers
    if probe_only and the_shard is None:
        cli._fail("--probe-only goes with --shard i/n (--probe-workers sets both)", 2)
    if the_shard is not None:
        i, n = the_shard
        my_matches = 0 if probe_only else len(range(i, matches, n))
        my_subscribers = subscribers // n + (1 if i < subscribers % n else 0)
        if my_matches == 0 and not probe_only:
            cli._fail(f"--shard {shard}: no match falls to this shard with --matches {matches}", 2)
    shape = LoadShape(
        matches=my_matches,
        speed=spd,
        rate=rate,
        ramp_s=ramp,
        duration_s=duration,
        qos=qos,
        payload_size=payload_size,
        states=states,
        tag=run_tag,
        total_matches=matches,
    )
    options = LoadOptions(
        shape=shape,
        topics=topics,
        subscribers=my_subscribers,
        shared_group=shared_group,
        publishers=0 if probe_only else publishers,
        max_inflight=max_inflight,
        overrun_ms=overrun_ms,
        drain_idle_s=drain_idle,
        verify_state=verify_state,
        verify_timeout_s=verify_timeout,
        expect_consumers=tuple(expect_consumer or ()),
        shard=the_shard,
        start_at=start_at,
    )
    parameters = {
        "matches": my_matches,
        "total_matches": matches,
        "sources": [m.match_id for m in sources],
        "subscribers": my_subscribers,
        "shared_group": shared_group,
        "speed": speed,
        "rate": rate,
        "ramp_s": ramp,
        "duration_s": duration,
        "qos": qos,
        "payload_size": payload_size,
        "states": states,
        "publishers": publishers,
        "max_inflight": max_inflight,
        "overrun_ms": overrun_ms,
        "client": client.value,
        "root": topics.root,
        "tag": run_tag,
        "shard": shard,
        "start_at": start_at,
        "workers": workers,
        "argv": sys.argv[1:],
    }
    console = Console(stderr=True)
    with _spawned(spawn_mosquitto) as spawned_url:
        url = cli._connection_options(
            spawned_url or broker, ca_file, cert_file, key_file, tls_insecure
        )
        if url is None:
            msg = "matchcast load needs --broker URL (or $MATCHCAST_BROKER, or --spawn-mosquitto)"
            cli._fail(msg, 2)
        parameters["broker"] = str(url)
        if workers > 1 or probe_workers > 0:
            child = [
                *(specs or []),
                *("--broker", str(url), "--matches", str(matches)),
                *("--speed", speed, "--ramp", str(ramp)),
                *("--qos", str(qos), "--payload-size", str(payload_size)),
                "--states" if states else "--no-states",
                *("--publishers", str(publishers), "--max-inflight", str(max_inflight)),
                *("--overrun-ms", str(overrun_ms), "--drain-idle", str(drain_idle)),
                *("--client", client.value, "--root", topics.root, "--tag", run_tag),
                *("--verify-timeout", str(verify_timeout), "--no-progress"),
                *(("--rate", str(rate)) if rate is not None else ()),
                *(("--duration", str(duration)) if duration is not None else ()),
                *(("--shared-group", shared_group) if shared_group else ()),
                *(("--verify-state",) if verify_state else ()),
                *(a for c in expect_consumer or () for a in ("--expect-consumer", c)),
            ]
            # Every worker must be connected and subscribed before any sends: Python starts
            # in about a second here, more under load.
            processes = workers + probe_workers
            child += ["--start-at", repr(start_at or time.time() + 2.0 + 0.3 * processes)]
            result = _run_workers(_shards(workers, probe_workers, subscribers), child, console)
            result["parameters"].update(workers=workers, probe_workers=probe_workers)
        else:
            run = LoadRun(options, templates, make_factory(client, url))

            async def go() -> None:
                async with _live(run, console, progress and console.is_terminal):
                    await run.run()

            cli._run(go)
            result = build_report(run, parameters, streams=the_shard is not None)
    _output(result, report, csv_path, chart)


def _parse_shard(text: str) -> tuple[int, int]:
    from matchcast import cli  # noqa: PLC0415

    i, sep, n = text.partition("/")
    try:
        shard = (int(i), int(n))
    except ValueError:
        shard = (-1, 0)
    if not sep or not 0 <= shard[0] < shard[1]:
        cli._fail(f"--shard must be i/n with 0 <= i < n, e.g. 0/4, not {text!r}", 2)
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


def _run_workers(shards: list[list[str]], child: list[str], console: Any) -> dict[str, Any]:
    """Run one process of this machine per shard (``child`` + its own arguments); merge their
    reports."""
    import subprocess  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    from matchcast import cli  # noqa: PLC0415
    from matchcast.load import merge_reports  # noqa: PLC0415

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
                stdout=subprocess.DEVNULL,
            )
            for own, path in zip(shards, paths, strict=True)
        ]
        console.print(f"[dim]{len(shards)} workers running: pids {[p.pid for p in procs]}[/]")
        codes = [p.wait() for p in procs]
        bad = [(i, c) for i, c in enumerate(codes) if c not in (0, 3)]
        if bad:
            cli._fail(f"worker(s) failed: {', '.join(f'shard {i} exit {c}' for i, c in bad)}")
        return merge_reports([json.loads(p.read_text()) for p in paths])


def _merge(
    files: list[Path], report: Path | None, csv_path: Path | None, chart: Path | None
) -> None:
    from matchcast import cli  # noqa: PLC0415
    from matchcast.load import MergeError, merge_reports  # noqa: PLC0415

    if not files:
        cli._fail(
            "matchcast load merge needs report files: merge a.json b.json --report all.json", 2
        )
    try:
        reports = [json.loads(f.read_text()) for f in files]
        merged = merge_reports(reports)
    except (OSError, ValueError) as err:
        reason = str(err) if isinstance(err, MergeError | OSError) else f"not JSON: {err}"
        cli._fail(f"cannot merge: {reason}", 2)
    _output(merged, report, csv_path, chart)


def _output(
    result: dict[str, Any], report: Path | None, csv_path: Path | None, chart: Path | None
) -> None:
    from rich.console import Console  # noqa: PLC0415

    from matchcast import cli  # noqa: PLC0415
    from matchcast.load import render_table, write_chart  # noqa: PLC0415

    Console().print(render_table(result))
    if report is not None:
        report.write_text(json.dumps(result, indent=1))
    if csv_path is not None:
        write_csv(csv_path, result)
    if chart is not None:
        try:
            write_chart(result, chart)
        except RuntimeError as err:
            cli._fail(str(err), 2)
    verification = result.get("verification")
    if verification is not None and not verification["ok"]:
        Console(stderr=True).print(
            "[bold red]verify-state failed:[/] a consumer's final state is wrong or missing"
        )
        raise typer.Exit(3)


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
        str, typer.Option("--consumer-id", help="This consumer's name in reports and topics.")
    ] = "consumer-1",
    broker: _BrokerOpt = None,
    ca_file: CaFileOpt = None,
    cert_file: CertFileOpt = None,
    key_file: KeyFileOpt = None,
    tls_insecure: TlsInsecureOpt = False,
    root: Annotated[str, typer.Option("--root", help="Topic root.")] = "matchcast-load",
    shared_group: Annotated[
        str | None, typer.Option("--shared-group", help="Join $share/NAME/... (a consumer group).")
    ] = None,
    qos: Annotated[int, typer.Option("--qos", min=0, max=2, help="Subscription QoS.")] = 1,
    metrics_port: Annotated[
        int | None, typer.Option("--metrics-port", help="Serve Prometheus /metrics here.")
    ] = None,
    metrics_addr: Annotated[
        str, typer.Option("--metrics-addr", help="Address for the metrics server.")
    ] = "127.0.0.1",
    report_state: Annotated[
        bool,
        typer.Option("--report-state/--no-report-state", help="Publish final states, retained."),
    ] = True,
    idle_exit: Annotated[
        float | None,
        typer.Option("--idle-exit", min=0.1, help="Exit after this many idle seconds."),
    ] = None,
    client: Annotated[
        ClientKind, typer.Option("--client", help="fast or aiomqtt; both speak MQTT 5 and 3.1.1.")
    ] = ClientKind.fast,
    log_format: Annotated[str, typer.Option("--log-format", help="auto, console or json.")] = (
        "auto"
    ),
    verbose: Annotated[int, typer.Option("--verbose", "-v", count=True, help="More logs.")] = 0,
) -> None:
    """Run the consumer runner under load: metrics on HTTP, final state reported for checking."""
    from matchcast import cli  # noqa: PLC0415
    from matchcast.load import RunnerMetrics, run_consumer  # noqa: PLC0415

    cli._setup_logs(log_format, max(verbose, 1), quiet_default=True)
    topics = cli._topics(root)
    url = cli._connection_options(broker, ca_file, cert_file, key_file, tls_insecure)
    if url is None:
        cli._fail("matchcast load-consumer needs --broker URL (or $MATCHCAST_BROKER)", 2)
    metrics = RunnerMetrics()
    if metrics_port is not None:
        metrics.serve(metrics_port, metrics_addr)
    factory = make_factory(client, url)

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

    cli._run(go)


def register(app: typer.Typer) -> None:
    """Add the ``load`` and ``load-consumer`` commands to ``app``."""
    app.command("load")(load)
    app.command("load-consumer")(consume)
