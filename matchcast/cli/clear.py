"""``matchcast clear``: remove matchcast's retained topics from a broker.

Retained messages outlive their runs: an interrupted replay's state, the states every load run
leaves behind, consumer reports, offline replayer statuses. ``clear`` lists them, asks, and
removes them (see :mod:`matchcast.app.retained`).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from consumers.printable import printable
from events import DEFAULT_ROOT
from matchcast.cli.common import CommandExit, fail, run, setup_logs
from matchcast.cli.options import (
    DEFAULT_EMBEDDED_PORT,
    BrokerOpt,
    CaFileOpt,
    CertFileOpt,
    ClearMatchOpt,
    HelpAllOpt,
    KeyFileOpt,
    LogFmtOpt,
    ProtocolOpt,
    ReplayersOpt,
    RootOpt,
    TlsInsecureOpt,
    VerboseOpt,
    connection_options,
    match_filter,
    parse_protocol,
    parse_topics,
    replayer_ids,
)
from matchcast.transport.broker import DEFAULT_HOST
from matchcast.transport.connection import BrokerURL, describe

if TYPE_CHECKING:
    from matchcast.app.retained import RetainedTopic

__all__ = ["HELP", "register"]

#: The command's help after its summary: paragraphs keep their line breaks, so each is one line.
HELP = (
    "Match states, offline replayer statuses and consumer reports under --root: it lists them "
    "and asks first, unless --yes (with no terminal and no --yes it only lists them, exit 2). "
    "A running replayer's online status is kept.\n\n"
    "Where wildcard subscriptions get no retained messages (RabbitMQ 3.10), it clears only "
    "the topics it can name: the state of --match, the statuses of the --replayer ids and the "
    "states of the matches those statuses list (the first 1,000 of each).\n\n"
    "Given a cluster's nodes (a --broker list), it searches and clears each node on its own "
    "(RabbitMQ keeps retained messages per node) and says which held what; a node that does "
    "not answer is named, the others are cleared, and it exits 1."
)


def clear(
    match: ClearMatchOpt = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Clear without asking (needed without a terminal).")
    ] = False,
    broker: BrokerOpt = None,
    ca_file: CaFileOpt = None,
    cert_file: CertFileOpt = None,
    key_file: KeyFileOpt = None,
    tls_insecure: TlsInsecureOpt = False,
    protocol: ProtocolOpt = "auto",
    root: RootOpt = DEFAULT_ROOT,
    replayer: ReplayersOpt = None,
    verbose: VerboseOpt = 0,
    log_format: LogFmtOpt = "auto",
    help_all: HelpAllOpt = False,
) -> None:
    """``matchcast clear``: remove matchcast's retained topics (see :data:`HELP`)."""
    setup_logs(log_format, verbose, quiet_default=True)
    from matchcast.app.retained import clear_retained, scan_retained  # noqa: PLC0415

    given = connection_options(broker, ca_file, cert_file, key_file, tls_insecure)
    url = given or BrokerURL(DEFAULT_HOST, DEFAULT_EMBEDDED_PORT)
    topics = parse_topics(root)
    match_id = None if match is None else match_filter(match)
    if match_id == "+":
        match_id = None
    named = replayer_ids(replayer)
    nodes = (url,) if isinstance(url, BrokerURL) else url
    checked_protocol = parse_protocol(protocol)
    where = f"{describe(nodes)} under {topics.root}/" + (
        f" for match {match_id}" if match_id else ""
    )
    # Clearing the wrong broker is destructive: say which one first (passwords masked),
    # and when it is only the default.
    default = "" if given else " (the default broker: no --broker or $MATCHCAST_BROKER)"
    _say(f"searching {where} for retained topics{default}")
    scan = run(
        lambda: scan_retained(
            url, topics, match_id=match_id, replayers=named, protocol=checked_protocol
        )
    )
    kept = [t for t in scan.found if t.online]
    doomed = [t for t in scan.found if not t.online]
    for (topic, summary, online), on in _by_topic(scan.found).items():
        # Listed before anything is cleared (and before the question): what it would do.
        mark = "keep" if online else "would clear"
        where_found = f"  on {', '.join(on)}" if len(nodes) > 1 else ""
        _say(f"{mark:<11}  {topic}  ({summary}){where_found}")
    for node, reason in scan.unreachable.items():
        _say(f"not searched: {node} ({reason})")
    for topic, (listed, read) in _too_long(scan.found).items():
        _say(
            f"{topic} lists {listed} matches: only the first {read} were looked for "
            "(a replay day is 64); clear the rest with --match"
        )
    if not doomed:
        _say(f"nothing to clear on {where}")
        _fail_if_unreachable(scan.unreachable)
        return
    if kept:
        _say(f"{len({t.topic for t in kept})} online replayer status(es) kept: their replayers run")
    topics_doomed = len({t.topic for t in doomed})
    if not yes and not _interactive():
        fail("clear asks before it removes anything: pass --yes to clear without asking", 2)
    if not yes and not typer.confirm(f"Clear {topics_doomed} retained topic(s) on {where}?"):
        _say("nothing cleared")
        raise CommandExit(1)
    cleared = run(lambda: clear_retained(url, doomed, protocol=checked_protocol))
    copies = f" ({cleared} copies, each on its node)" if cleared != topics_doomed else ""
    _say(f"cleared {topics_doomed} retained topic(s){copies} on {where}")
    _fail_if_unreachable(scan.unreachable)


def _say(line: str) -> None:
    """Print ``line``: topics, ids, summaries and reasons come from the broker, so through
    :func:`printable` (a terminal control in them is shown, never obeyed)."""
    typer.echo(printable(line))


def _by_topic(found: list[RetainedTopic]) -> dict[tuple[str, str, bool], list[str]]:
    """The nodes each topic was found on, with the same content (in the order found)."""
    grouped: dict[tuple[str, str, bool], list[str]] = {}
    for item in found:
        grouped.setdefault((item.topic, item.summary, item.online), []).append(str(item.node))
    return grouped


def _too_long(found: list[RetainedTopic]) -> dict[str, tuple[int, int]]:
    """The statuses that list more matches than were looked for: how many they list, and how
    many were looked for."""
    return {t.topic: (t.listed, len(t.matches)) for t in found if t.listed > len(t.matches)}


def _fail_if_unreachable(unreachable: dict[BrokerURL, str]) -> None:
    if unreachable:
        names = ", ".join(str(node) for node in unreachable)
        fail(
            f"{names} did not answer: what they hold is neither listed nor cleared; "
            "run clear again when they are back"
        )


def register(app: typer.Typer) -> None:
    """Add the ``clear`` command to ``app``."""
    app.command("clear", help=HELP)(clear)


def _interactive() -> bool:
    """True when a person can answer the question (standard input is a terminal)."""
    return sys.stdin.isatty()
