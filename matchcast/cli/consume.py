"""``matchcast consume``: run subscriber plug-ins against a broker.

::

    matchcast consume ./goal_alerts.py scoreboard --broker mqtt://127.0.0.1:1883
    matchcast consume recorder -o recorder.path=match.jsonl --match wc2026-sf-arg-eng
    matchcast consume --list

The first Ctrl-C (or SIGTERM) stops reading and lets the handlers finish what was received,
then runs the stop hooks and exits 0; a second one gives up at once (exit 130).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import Sequence
from typing import Annotated

import structlog
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from consumers import (
    MAX_MATCHES,
    PluginError,
    Runner,
    Subscriber,
    installed_plugins,
    load_plugin,
    split_options,
)
from events import DEFAULT_ROOT, MatchState
from matchcast.app import run_watch
from matchcast.cli.common import (
    fail,
    reach_broker,
    replayer_hint,
    run,
    say_when_absent,
    setup_logs,
)
from matchcast.cli.options import (
    DEFAULT_EMBEDDED_PORT,
    BrokerOpt,
    CaFileOpt,
    CertFileOpt,
    ClientOpt,
    ExitAtFullTimeOpt,
    HelpAllOpt,
    KeyFileOpt,
    LogFmtOpt,
    MatchFilterOpt,
    ProtocolOpt,
    ReplayersOpt,
    RootOpt,
    SubscriptionQosOpt,
    TlsInsecureOpt,
    VerboseOpt,
    connection_options,
    match_filter,
    number,
    parse_protocol,
    parse_topics,
    rare,
    replayer_ids,
    until_finished,
    whole,
)
from matchcast.transport.broker import DEFAULT_HOST
from matchcast.transport.clients import ClientKind
from matchcast.transport.connection import BrokerURL

__all__ = ["consume", "register"]

_log = structlog.get_logger("matchcast.consume")

#: A persistent session outlives a disconnect by this long unless told otherwise (MQTT 5).
DEFAULT_SESSION_EXPIRY = 3600


def register(app: typer.Typer) -> None:
    """Add the ``consume`` command to the CLI."""
    app.command("consume", no_args_is_help=True)(consume)


_RUNNER = "Runner"


def consume(
    plugins: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="PLUGIN",
            help="Subscribers to run: module:attribute, a .py file, or an installed one's name "
            "(see --list).",
            show_default=False,
        ),
    ] = None,
    list_: Annotated[
        bool, typer.Option("--list", help="Show the installed subscribers and exit.")
    ] = False,
    opt: Annotated[
        list[str] | None,
        typer.Option(
            "--opt",
            "-o",
            metavar="KEY=VALUE",
            help="A plug-in option, PLUGIN.KEY=VALUE (PLUGIN. may go with one plug-in; "
            "also $MATCHCAST_<PLUGIN>_<KEY>). Repeatable.",
            show_default=False,
        ),
    ] = None,
    match: MatchFilterOpt = "+",
    exit_at_full_time: ExitAtFullTimeOpt = False,
    broker: BrokerOpt = None,
    ca_file: CaFileOpt = None,
    cert_file: CertFileOpt = None,
    key_file: KeyFileOpt = None,
    tls_insecure: TlsInsecureOpt = False,
    protocol: ProtocolOpt = "auto",
    client: ClientOpt = ClientKind.fast,
    qos: SubscriptionQosOpt = 1,
    root: RootOpt = DEFAULT_ROOT,
    replayer: ReplayersOpt = None,
    session: Annotated[
        bool,
        typer.Option(
            "--session",
            help="Persistent session: the broker keeps what is published while this consumer "
            "is away; a restart with the same client id resumes there.",
            rich_help_panel=_RUNNER,
        ),
    ] = False,
    client_id: Annotated[
        str | None,
        typer.Option(
            "--client-id",
            metavar="ID",
            help="MQTT client id; random, or derived from the plug-ins with --session.",
            show_default=False,
            rich_help_panel=_RUNNER,
        ),
    ] = None,
    session_expiry: Annotated[
        int,
        typer.Option(
            "--session-expiry",
            parser=whole(1),
            metavar="SECONDS",
            help="How long the broker keeps a persistent session after a disconnect (MQTT 5).",
            **rare(_RUNNER),
        ),
    ] = DEFAULT_SESSION_EXPIRY,
    handler_timeout: Annotated[
        float,
        typer.Option(
            "--handler-timeout",
            parser=number(0.001),
            metavar="SECONDS",
            help="Seconds a handler may take.",
            **rare(_RUNNER),
        ),
    ] = 10.0,
    queue_size: Annotated[
        int,
        typer.Option(
            "--queue-size",
            parser=whole(2),
            metavar="N",
            help="Events buffered per match; past it a slow match skips ahead to its state.",
            **rare(_RUNNER),
        ),
    ] = 1000,
    drain_timeout: Annotated[
        float,
        typer.Option(
            "--drain-timeout",
            parser=number(0),
            metavar="SECONDS",
            help="Seconds handlers get to finish on the way out.",
            **rare(_RUNNER),
        ),
    ] = 30.0,
    max_matches: Annotated[
        int,
        typer.Option(
            "--max-matches",
            parser=whole(1),
            metavar="N",
            help="Matches tracked at once; past it the longest idle are forgotten (a "
            "finished one goes 5 minutes after full time anyway).",
            **rare(_RUNNER),
        ),
    ] = MAX_MATCHES,
    reorder_window: Annotated[
        int | None,
        typer.Option(
            "--reorder-window",
            parser=whole(0),
            metavar="N",
            help="Events held past a missing seq, waiting for it (default 16).",
            **rare(_RUNNER),
        ),
    ] = None,
    reorder_wait: Annotated[
        float | None,
        typer.Option(
            "--reorder-wait",
            parser=number(0),
            metavar="SECONDS",
            help="Seconds they wait for it, at most (default 0.5).",
            **rare(_RUNNER),
        ),
    ] = None,
    verbose: VerboseOpt = 0,
    log_format: LogFmtOpt = "auto",
    help_all: HelpAllOpt = False,
) -> None:
    """``matchcast consume``: run subscriber plug-ins on the live stream."""
    setup_logs(log_format, verbose, quiet_default=False)
    if list_:
        if plugins:
            fail("--list takes no plug-ins", 2)
        _print_installed()
        return
    if not plugins:
        fail("name at least one plug-in to run, or --list to see the installed ones", 2)
    checked_protocol = parse_protocol(protocol)
    match = match_filter(match)
    if session and qos == 0:
        fail("--session needs --qos 1 or 2: a broker queues no QoS 0 messages for later", 2)
    url = connection_options(broker, ca_file, cert_file, key_file, tls_insecure) or (
        BrokerURL(DEFAULT_HOST, DEFAULT_EMBEDDED_PORT),
    )
    topics = parse_topics(root)
    replayers = replayer_ids(replayer)
    subscribers = _load(plugins, opt or [], max_matches)
    if session and client_id is None:
        client_id = _session_client_id(subscribers)
    runner = Runner(
        subscribers,
        topics=topics,
        match_filter=match,
        queue_size=queue_size,
        handler_timeout=handler_timeout,
        drain_timeout=drain_timeout,
        max_matches=max_matches,
        replayers=replayers,
        on_replayer=replayer_hint(url, topics),
    )
    if reorder_window is not None:  # else the runner's defaults
        runner.reorder_window = reorder_window
    if reorder_wait is not None:
        runner.reorder_wait = reorder_wait

    async def go() -> dict[str, MatchState]:
        # Before anything prints: no stats line ahead of the error.
        await reach_broker(url, checked_protocol)
        _stop_on_signals(runner)
        if session:
            _log.info("consumer.session", client_id=client_id, expiry_s=session_expiry)
        watch = run_watch(
            url,
            [],
            runner=runner,
            match_filter=match,
            qos=qos,
            client_id=client_id,
            protocol=checked_protocol,
            until_finished=until_finished(exit_at_full_time, match),
            clean_start=not session,
            session_expiry=session_expiry if session else None,
            client=client,
        )
        if match == "+":
            return await watch
        async with asyncio.TaskGroup() as tg:
            hint = tg.create_task(
                say_when_absent(
                    url,
                    topics,
                    match,
                    lambda: runner.stats.received > 0,
                    5.0,
                    checked_protocol,
                )
            )
            try:
                return await watch
            finally:
                hint.cancel()

    run(go)


def _load(specs: Sequence[str], options: Sequence[str], max_matches: int) -> list[Subscriber]:
    # Like ``python -m``: modules in the current directory can be named as module:attribute.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        per_plugin = split_options(specs, options)
        subs = [
            # A plug-in with a max_matches parameter keeps as many matches as the runner.
            load_plugin(spec, opts, environ=os.environ, defaults={"max_matches": max_matches})
            for spec, opts in zip(specs, per_plugin, strict=True)
        ]
    except PluginError as err:
        fail(str(err), 2)
    names = [s.name for s in subs]
    if len(set(names)) != len(names):
        fail(f"two plug-ins share a name ({', '.join(names)}); each needs its own", 2)
    return subs


def _session_client_id(subscribers: Sequence[Subscriber]) -> str:
    names = "-".join(re.sub(r"[^A-Za-z0-9_.-]", "_", s.name) for s in subscribers)
    return f"matchcast-consume-{names}"[:128]


def _stop_on_signals(runner: Runner) -> None:
    """First Ctrl-C/SIGTERM: stop reading, let handlers finish. Second: cancel outright."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None

    def on_signal(sig: signal.Signals) -> None:
        if runner.stopping:
            _log.warning("consumer.interrupted", signal=sig.name)
            task.cancel()
            return
        _log.info("consumer.stopping", signal=sig.name, hint="again to stop at once")
        runner.stop()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)


def _print_installed() -> None:
    found = installed_plugins()
    console = Console(emoji=False)
    if not found:
        console.print("No subscribers installed in the group matchcast.subscribers.")
        return
    table = Table(title="Installed subscribers (matchcast consume NAME)", title_justify="left")
    table.add_column("name", no_wrap=True, style="bold")
    for column in ("what it does", "options", "from"):
        table.add_column(column, overflow="fold")
    for p in found:
        what = f"[red]cannot load: {escape(p.error)}[/]" if p.error else escape(p.summary)
        source = f"{escape(p.package)}\n[dim]{escape(p.target)}[/]"
        table.add_row(p.name, what, escape("\n".join(p.options)), source)
    console.print(table)
