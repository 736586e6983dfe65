"""``matchcast control``: pause, resume, seek, speed, stop or ask the status of a running replayer.

Sends one command (:func:`matchcast.app.control.send_command`), waits for the reply and prints the
replayer's new state in one line, or one clear error and a non-zero exit. See docs/control.md.
"""

from __future__ import annotations

from typing import Annotated

import typer

from consumers.printable import printable
from events import DEFAULT_ROOT, ControlReply
from matchcast.app.control import ControlError, format_reply, send_command
from matchcast.cli.common import fail, run, setup_logs
from matchcast.cli.options import (
    BrokerOpt,
    CaFileOpt,
    CertFileOpt,
    ControlMatchOpt,
    KeyFileOpt,
    LogFmtOpt,
    ProtocolOpt,
    RootOpt,
    TlsInsecureOpt,
    VerboseOpt,
    connection_options,
    parse_protocol,
    parse_topics,
    replayer_id,
)

__all__ = ["register"]


def control(
    action: Annotated[
        str,
        typer.Argument(
            metavar="COMMAND",
            help="pause, resume, seek MINUTE, speed N|max, stop or status.",
            show_default=False,
        ),
    ],
    value: Annotated[
        str | None,
        typer.Argument(
            help="seek: the minute (80, 90+2); speed: match seconds per wall second, or max."
        ),
    ] = None,
    replayer: Annotated[
        str | None,
        typer.Option(
            "--replayer",
            metavar="ID",
            help="The replayer's id (`replay --replayer-id`); optional with one online. Its "
            "status is read by its exact topic too (RabbitMQ 3.10 gives wildcards none).",
        ),
    ] = None,
    match: ControlMatchOpt = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.1, help="Seconds to wait for the answer.")
    ] = 5.0,
    broker: BrokerOpt = None,
    ca_file: CaFileOpt = None,
    cert_file: CertFileOpt = None,
    key_file: KeyFileOpt = None,
    tls_insecure: TlsInsecureOpt = False,
    root: RootOpt = DEFAULT_ROOT,
    protocol: ProtocolOpt = "auto",
    log_format: LogFmtOpt = "auto",
    verbose: VerboseOpt = 0,
) -> None:
    """Control a running replay: pause, resume, seek MINUTE, speed N|max, stop, status."""
    setup_logs(log_format, verbose, quiet_default=True)
    url = connection_options(broker, ca_file, cert_file, key_file, tls_insecure)
    if url is None:
        fail("control needs a broker: --broker mqtt://HOST:PORT or $MATCHCAST_BROKER", 2)
    topics = parse_topics(root)
    checked_protocol = parse_protocol(protocol)
    replayer = replayer_id(replayer)

    async def go() -> ControlReply | ControlError:
        try:
            return await send_command(
                url,
                action.lower(),
                value,
                replayer_id=replayer,
                match=match,
                topics=topics,
                reply_timeout=timeout,
                protocol=checked_protocol,
            )
        except ControlError as err:
            return err

    result = run(go)
    if isinstance(result, ControlError):
        fail(str(result), result.code)  # fail() shows controls in it (ids, the error) escaped
    typer.echo(printable(format_reply(result)))  # the reply is whatever its sender wrote


def register(app: typer.Typer) -> None:
    """Add the ``control`` command to ``app``."""
    app.command("control")(control)
