"""``matchcast clear``: remove matchcast's retained topics from a broker.

Retained messages outlive their runs: an interrupted replay's state, the states every load run
leaves behind, consumer reports, offline replayer statuses. ``clear`` lists them, asks, and
removes them (see :mod:`matchcast.app.retained`).
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from events import DEFAULT_ROOT
from matchcast.cli.common import CommandExit, fail, run, setup_logs
from matchcast.cli.options import (
    DEFAULT_EMBEDDED_PORT,
    BrokerOpt,
    CaFileOpt,
    CertFileOpt,
    ClearMatchOpt,
    KeyFileOpt,
    LogFmtOpt,
    ReplayersOpt,
    RootOpt,
    TlsInsecureOpt,
    VerboseOpt,
    connection_options,
    match_filter,
    parse_topics,
    replayer_ids,
)
from matchcast.transport.broker import DEFAULT_HOST
from matchcast.transport.connection import BrokerURL

__all__ = ["HELP", "register"]

#: The command's help: paragraphs after the first keep their line breaks, so each is one line.
HELP = (
    "Remove matchcast's retained topics (match states, offline replayer statuses, consumer "
    "reports) under --root: lists them and asks first, unless --yes (without a terminal and "
    "without --yes it only lists them, and exits 2).\n\n"
    "A running replayer's online status is kept. On brokers that send no retained messages to "
    "wildcard subscriptions (RabbitMQ 3.10), it clears only the topics it can name: the state "
    "of --match, the statuses of the --replayer ids, and the states of the matches that those "
    "retained replayer statuses list."
)


def clear(
    broker: BrokerOpt = None,
    ca_file: CaFileOpt = None,
    cert_file: CertFileOpt = None,
    key_file: KeyFileOpt = None,
    tls_insecure: TlsInsecureOpt = False,
    root: RootOpt = DEFAULT_ROOT,
    match: ClearMatchOpt = None,
    replayer: ReplayersOpt = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Clear without asking (needed without a terminal).")
    ] = False,
    log_format: LogFmtOpt = "auto",
    verbose: VerboseOpt = 0,
) -> None:
    """Remove matchcast's retained topics: see :data:`HELP`."""
    setup_logs(log_format, verbose, quiet_default=True)
    from matchcast.app.retained import clear_retained, find_retained  # noqa: PLC0415

    url = connection_options(broker, ca_file, cert_file, key_file, tls_insecure) or BrokerURL(
        DEFAULT_HOST, DEFAULT_EMBEDDED_PORT
    )
    topics = parse_topics(root)
    match_id = None if match is None else match_filter(match)
    if match_id == "+":
        match_id = None
    named = replayer_ids(replayer)
    found = run(lambda: find_retained(url, topics, match_id=match_id, replayers=named))
    kept = [t for t in found if t.online]
    doomed = [t for t in found if not t.online]
    for item in found:
        mark = "keep " if item.online else "clear"
        typer.echo(f"{mark}  {item.topic}  ({item.summary})")
    where = f"{url} under {topics.root}/" + (f" for match {match_id}" if match_id else "")
    if not doomed:
        typer.echo(f"nothing to clear on {where}")
        return
    if kept:
        typer.echo(f"{len(kept)} online replayer status(es) kept: their replayers run")
    if not yes and not _interactive():
        fail("clear asks before it removes anything: pass --yes to clear without asking", 2)
    if not yes and not typer.confirm(f"Clear {len(doomed)} retained topic(s) on {where}?"):
        typer.echo("nothing cleared")
        raise CommandExit(1)
    cleared = run(lambda: clear_retained(url, doomed))
    typer.echo(f"cleared {cleared} retained topic(s) on {where}")


def register(app: typer.Typer) -> None:
    """Add the ``clear`` command to ``app``."""
    app.command("clear", help=HELP)(clear)


def _interactive() -> bool:
    """True when a person can answer the question (standard input is a terminal)."""
    return sys.stdin.isatty()
