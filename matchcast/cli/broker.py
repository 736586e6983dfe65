"""``matchcast broker``: the embedded broker on its own, until Ctrl-C."""

from __future__ import annotations

import asyncio
import ipaddress
from typing import Annotated

import typer

from matchcast.cli.common import log, run_until_interrupted, setup_logs, stderr
from matchcast.cli.options import DEFAULT_EMBEDDED_PORT, PORT, HelpAllOpt, LogFmtOpt, VerboseOpt
from matchcast.transport.broker import DEFAULT_HOST, EmbeddedBroker

__all__ = ["register"]


def broker_cmd(
    host: Annotated[
        str,
        typer.Option(
            metavar="ADDRESS",
            help="Address to bind. 127.0.0.1 keeps it private to this machine; with no passwords "
            "or TLS, 0.0.0.0 lets anyone on the network publish.",
        ),
    ] = DEFAULT_HOST,
    port: Annotated[int, typer.Option(parser=PORT, metavar="PORT", help="TCP port.")] = (
        DEFAULT_EMBEDDED_PORT
    ),
    verbose: VerboseOpt = 0,
    log_format: LogFmtOpt = "auto",
    help_all: HelpAllOpt = False,
) -> None:
    """``matchcast broker``: the embedded broker (amqtt, MQTT 3.1.1, no auth) until Ctrl-C."""
    setup_logs(log_format, verbose, quiet_default=False)
    if not _is_loopback(host):
        log.warning("broker.exposed", host=host, hint="no authentication: anyone can publish")

    async def serve() -> None:
        b = EmbeddedBroker(host, port)
        await b.start()
        stderr.print(f"embedded broker on mqtt://{host}:{port} (Ctrl-C to stop)", markup=False)
        try:
            await asyncio.Event().wait()
        finally:
            await b.stop()

    run_until_interrupted(serve)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def register(app: typer.Typer) -> None:
    """Add ``broker`` to ``app``."""
    app.command("broker")(broker_cmd)
