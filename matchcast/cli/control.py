"""``matchcast control``: pause, resume, seek, speed, stop or ask the status of a running replayer.

Sends one command (:func:`matchcast.app.control.send_command`), waits for the reply and prints the
replayer's new state in one line, or one clear error and a non-zero exit. See docs/control.md.

The command line's side of control: the other modules named control are the wire form
(events/_control.py), the replayer's playhead (simulator/_control.py) and the sender this
command calls (matchcast/app/control.py).
"""

from __future__ import annotations

from typing import Annotated

import typer

from consumers.printable import printable
from events import DEFAULT_ROOT, ControlReply
from matchcast.app.control import ControlError, format_reply, send_command
from matchcast.cli.common import fail, run, setup_logs
from matchcast.cli.options import (
    CaFileOpt,
    CertFileOpt,
    ControlBrokerOpt,
    ControlMatchOpt,
    ControlReplayerOpt,
    HelpAllOpt,
    KeyFileOpt,
    LogFmtOpt,
    ProtocolOpt,
    RootOpt,
    TlsInsecureOpt,
    VerboseOpt,
    connection_options,
    match_filter,
    number,
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
            metavar="VALUE",
            help="seek: the minute (80, 90+2); speed: match seconds per wall second, or max.",
            show_default=False,
        ),
    ] = None,
    replayer: ControlReplayerOpt = None,
    match: ControlMatchOpt = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            parser=number(0.1),
            metavar="SECONDS",
            help="Seconds to wait for the answer.",
        ),
    ] = 5.0,
    broker: ControlBrokerOpt = None,
    ca_file: CaFileOpt = None,
    cert_file: CertFileOpt = None,
    key_file: KeyFileOpt = None,
    tls_insecure: TlsInsecureOpt = False,
    protocol: ProtocolOpt = "auto",
    root: RootOpt = DEFAULT_ROOT,
    verbose: VerboseOpt = 0,
    log_format: LogFmtOpt = "auto",
    help_all: HelpAllOpt = False,
) -> None:
    """``matchcast control``: one command to a running replayer, and its answer."""
    setup_logs(log_format, verbose, quiet_default=True)
    url = connection_options(broker, ca_file, cert_file, key_file, tls_insecure)
    if url is None:
        fail("control needs a broker: --broker mqtt://HOST:PORT or $MATCHCAST_BROKER", 2)
    topics = parse_topics(root)
    checked_protocol = parse_protocol(protocol)
    replayer = replayer_id(replayer)
    if match is not None:  # '+' is every match, as with no --match
        match = None if match_filter(match) == "+" else match

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
