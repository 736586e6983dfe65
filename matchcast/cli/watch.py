"""``matchcast watch``: the live terminal scoreboard and ticker of a broker's matches."""

from __future__ import annotations

import asyncio
import sys

import typer

from consumers import Runner
from consumers.terminal import TerminalView
from events import DEFAULT_ROOT, MatchState
from matchcast.app import run_watch
from matchcast.app.replayers import follow_replayers
from matchcast.cli.common import (
    reach_broker,
    replayer_hint,
    run_until_interrupted,
    say_when_absent,
    setup_logs,
)
from matchcast.cli.options import (
    DEFAULT_EMBEDDED_PORT,
    BrokerOpt,
    CaFileOpt,
    CertFileOpt,
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
    ViewClientOpt,
    connection_options,
    match_filter,
    parse_protocol,
    parse_topics,
    replayer_ids,
    until_finished,
)
from matchcast.transport.broker import DEFAULT_HOST
from matchcast.transport.clients import ClientKind
from matchcast.transport.connection import BrokerURL

__all__ = ["register", "watch"]


def watch(
    match: MatchFilterOpt = "+",
    exit_at_full_time: ExitAtFullTimeOpt = False,
    broker: BrokerOpt = None,
    ca_file: CaFileOpt = None,
    cert_file: CertFileOpt = None,
    key_file: KeyFileOpt = None,
    tls_insecure: TlsInsecureOpt = False,
    protocol: ProtocolOpt = "auto",
    client: ViewClientOpt = ClientKind.fast,
    qos: SubscriptionQosOpt = 1,
    root: RootOpt = DEFAULT_ROOT,
    replayer: ReplayersOpt = None,
    verbose: VerboseOpt = 0,
    log_format: LogFmtOpt = "auto",
    help_all: HelpAllOpt = False,
) -> None:
    """``matchcast watch``: the live terminal scoreboard and ticker."""
    setup_logs(log_format, verbose, quiet_default=sys.stdout.isatty())
    checked_protocol = parse_protocol(protocol)
    url = connection_options(broker, ca_file, cert_file, key_file, tls_insecure) or (
        BrokerURL(DEFAULT_HOST, DEFAULT_EMBEDDED_PORT),
    )
    topics = parse_topics(root)
    named_replayers = replayer_ids(replayer)
    match = match_filter(match)
    view = TerminalView()
    runner = Runner(
        [view.subscriber],
        topics=topics,
        match_filter=match,
        replayers=named_replayers,
        on_replayer=replayer_hint(url, topics),
    )

    async def go() -> dict[str, MatchState]:
        await reach_broker(url, checked_protocol)
        with view:
            async with asyncio.TaskGroup() as tg:
                if match != "+":
                    hint = tg.create_task(
                        say_when_absent(
                            url,
                            topics,
                            match,
                            lambda: bool(view.board.states),
                            5.0,
                            checked_protocol,
                        )
                    )
                replayers = tg.create_task(
                    follow_replayers(url, topics, view.replayer_status, checked_protocol)
                )
                try:
                    return await run_watch(
                        url,
                        [],
                        runner=runner,
                        qos=qos,
                        protocol=checked_protocol,
                        client=client,
                        until_finished=until_finished(exit_at_full_time, match),
                    )
                finally:
                    replayers.cancel()
                    if match != "+":
                        hint.cancel()

    run_until_interrupted(go)  # Ctrl-C is how a watch ends: exit 0


def register(app: typer.Typer) -> None:
    """Add ``watch`` to ``app``."""
    app.command()(watch)
