"""``matchcast verify``: grade a consumer with seeded scenarios of faults (see
:mod:`matchcast.verify`): a scorecard, JUnit XML and a JSON report; exit 3 when one fails."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from events import VERIFY_ROOT, Topics, quote, replayer_id_problem
from matchcast.cli.common import CommandExit, fail, run, setup_logs
from matchcast.cli.options import (
    DEFAULT_EMBEDDED_PORT,
    OUTPUT_PANEL,
    BrokerOpt,
    CaFileOpt,
    CertFileOpt,
    HelpAllOpt,
    KeyFileOpt,
    LogFmtOpt,
    ProtocolOpt,
    RootOpt,
    TlsInsecureOpt,
    VerboseOpt,
    VerifySeedOpt,
    VerifySpeedOpt,
    connection_options,
    number,
    parse_protocol,
    parse_speed,
    parse_topics,
    rare,
)
from matchcast.transport.broker import DEFAULT_HOST
from matchcast.transport.connection import BrokerURL, describe
from matchcast.verify import (
    DEFAULT_SPEED,
    SCENARIOS,
    TIMEOUT_S,
    Verdict,
    VerifyOptions,
    junit_xml,
    report_json,
    scorecard,
    select_scenarios,
    summary,
)

__all__ = ["HELP", "register"]

#: Where a consumer reports, as the help writes it.
_REPORTS = Topics("ROOT").consumer_state("ID", "MATCH_ID")

HELP = (
    "Grade a running consumer: play seeded scenarios of faults (duplicates, a gap, a late "
    "join, a restart, ...) under --root, each on a match of its own, and compare what the "
    "consumer reports with the truth.\n\n"
    "The consumer publishes what it believes, retained, after every change, on "
    f"{_REPORTS}: a JSON object with score and status, or a match "
    "state (each field given is compared). See docs/verify.md.\n\n"
    "Exit 0 when all pass, 3 when one fails, 2 for bad input, 1 without a broker."
)

_SCENARIOS = "Scenarios"
_OUTPUT = OUTPUT_PANEL


def verify(
    consumer: Annotated[
        str | None,
        typer.Option(
            "--consumer",
            metavar="ID",
            help=f"The consumer's id: it reports on {_REPORTS}.",
            show_default=False,
            rich_help_panel=_SCENARIOS,
        ),
    ] = None,
    scenario: Annotated[
        list[str] | None,
        typer.Option(
            "--scenario",
            metavar="NAME",
            help="Run only this one (repeatable; --list names them). Default all.",
            show_default=False,
            rich_help_panel=_SCENARIOS,
        ),
    ] = None,
    list_scenarios: Annotated[
        bool,
        typer.Option(
            "--list",
            help="Name the scenarios and what each does, and exit.",
            rich_help_panel=_SCENARIOS,
        ),
    ] = False,
    seed: VerifySeedOpt = 0,
    speed: VerifySpeedOpt = f"{DEFAULT_SPEED:g}",
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            parser=number(0.1, 3600),
            metavar="SECONDS",
            help="Seconds to wait for the consumer after each scenario's stream.",
            **rare(_SCENARIOS),
        ),
    ] = TIMEOUT_S,
    junit: Annotated[
        Path | None,
        typer.Option(
            "--junit",
            metavar="FILE",
            help="Write JUnit XML here (a test per scenario).",
            rich_help_panel=_OUTPUT,
        ),
    ] = None,
    report: Annotated[
        Path | None,
        typer.Option(
            "--report",
            metavar="FILE",
            help="Write the results as JSON here.",
            rich_help_panel=_OUTPUT,
        ),
    ] = None,
    broker: BrokerOpt = None,
    root: RootOpt = VERIFY_ROOT,
    protocol: ProtocolOpt = "auto",
    ca_file: CaFileOpt = None,
    cert_file: CertFileOpt = None,
    key_file: KeyFileOpt = None,
    tls_insecure: TlsInsecureOpt = False,
    verbose: VerboseOpt = 0,
    log_format: LogFmtOpt = "auto",
    help_all: HelpAllOpt = False,
) -> None:
    """Grade a consumer: see :data:`HELP`."""
    setup_logs(log_format, verbose, quiet_default=True)
    if list_scenarios:
        width = max(len(s.name) for s in SCENARIOS)
        for s in SCENARIOS:
            typer.echo(f"{s.name:<{width}}  {s.description}")
        return
    if consumer is None:
        fail("matchcast verify needs --consumer ID: the id your consumer reports under", 2)
    problem = replayer_id_problem(consumer)
    if problem is not None:
        fail(f"--consumer {quote(consumer)} {problem.replace('a replayer id', 'a consumer id')}", 2)
    try:
        chosen = select_scenarios(scenario or [])
    except ValueError as err:
        fail(f"--scenario: {err}", 2)
    options = VerifyOptions(
        consumer_id=consumer,
        topics=parse_topics(root),
        scenarios=tuple(s.name for s in chosen),
        seed=seed,
        speed=parse_speed(speed),
        timeout_s=timeout,
    )
    for path, option in ((junit, "--junit"), (report, "--report")):
        if path is not None and not path.parent.is_dir():
            fail(f"{option} {path}: no directory {path.parent} to write it in", 2)
    given = connection_options(broker, ca_file, cert_file, key_file, tls_insecure)
    urls = given or (BrokerURL(DEFAULT_HOST, DEFAULT_EMBEDDED_PORT),)
    checked = parse_protocol(protocol)

    async def go() -> Verdict:
        from matchcast.transport.fastmqtt import FastClient  # noqa: PLC0415
        from matchcast.verify import run_verify  # noqa: PLC0415

        client_id = f"matchcast-verify-{uuid.uuid4().hex[:8]}"
        async with FastClient(urls, client_id=client_id, protocol=checked) as conn:
            return await run_verify(conn, options)

    verdict = run(go)
    Console(highlight=False, emoji=False).print(scorecard(verdict))
    typer.echo(summary(verdict))
    shown = describe(urls)
    if junit is not None:
        junit.write_bytes(junit_xml(verdict, shown))
    if report is not None:
        text = json.dumps(report_json(verdict, shown), indent=2, ensure_ascii=False)
        report.write_text(text + "\n", encoding="utf-8")
    if not verdict.ok:
        raise CommandExit(3)


def register(app: typer.Typer) -> None:
    """Add the ``verify`` command to ``app``."""
    app.command("verify", help=HELP)(verify)
