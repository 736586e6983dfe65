"""``matchcast web``: the live match page in a browser.

Serves the page and its server-sent event streams, fed by a bridge subscriber on the broker.
With ``--demo``, or with no broker given at all, it also starts the embedded broker and a replay
of the semi-final, so one command is the whole show.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import sys
import typing
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

import typer

from events import DEFAULT_ROOT, BrokerError, Topics
from matchcast.cli.common import (
    fail,
    reach_broker,
    replayer_hint,
    run_until_interrupted,
    setup_logs,
    stderr,
)
from matchcast.cli.options import (
    DEMO_SPEED,
    PORT,
    CaFileOpt,
    CertFileOpt,
    HelpAllOpt,
    KeyFileOpt,
    LogFmtOpt,
    ProtocolOpt,
    ReplayersOpt,
    RootOpt,
    TlsInsecureOpt,
    VerboseOpt,
    ViewClientOpt,
    WebBrokerOpt,
    WebDemoFeedOpt,
    WebDemoFromOpt,
    WebDemoSpeedOpt,
    check_start,
    connection_options,
    in_feeds,
    load_matches,
    parse_from,
    parse_protocol,
    parse_speed,
    parse_topics,
    rare,
    replayer_ids,
    whole,
)
from matchcast.transport.clients import ClientKind
from simulator import Feed

if TYPE_CHECKING:
    from matchcast.transport.connection import BrokerURL, Protocol
    from matchcast.web import ControlSender

__all__ = ["register"]


_PAGE = "Page"
_DEMO = "Demo replay"


def web(
    host: Annotated[
        str,
        typer.Option(
            "--host",
            metavar="ADDRESS",
            help="Address to bind; 127.0.0.1 keeps the page on this machine.",
            rich_help_panel=_PAGE,
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option(
            "--port",
            parser=PORT,
            metavar="PORT",
            help="HTTP port of the page.",
            rich_help_panel=_PAGE,
        ),
    ] = 8000,
    control: Annotated[
        bool,
        typer.Option(
            "--control",
            help="Let an operator ($MATCHCAST_USERNAME) play, pause, seek and change the "
            "speed from the page; read-only without.",
            rich_help_panel=_PAGE,
        ),
    ] = False,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            metavar="NAME",
            help="Another host name the page answers to, e.g. a reverse proxy's "
            "('.example.org': it and every name under it); repeatable. Others get 403.",
            **rare(_PAGE),
        ),
    ] = None,
    queue_size: Annotated[
        int,
        typer.Option(
            "--queue-size",
            parser=whole(1),
            metavar="N",
            help="Updates a browser may have waiting before it is dropped.",
            **rare(_PAGE),
        ),
    ] = 256,
    max_streams: Annotated[
        int | None,
        typer.Option(
            "--max-streams",
            parser=whole(1),
            metavar="N",
            help="Live streams (browser tabs) served at once; past it a new one gets 503. "
            "Default 1000, or half the open-file limit if that is lower.",
            **rare(_PAGE),
        ),
    ] = None,
    demo: Annotated[
        bool,
        typer.Option(
            "--demo",
            help="Also replay a match onto the broker; implied when no broker is given.",
            rich_help_panel=_DEMO,
        ),
    ] = False,
    match: Annotated[
        str | None,
        typer.Option(
            "--match",
            metavar="MATCH",
            help="The match --demo replays (a file, a bundled name; default semifinal).",
            rich_help_panel=_DEMO,
        ),
    ] = None,
    speed: WebDemoSpeedOpt = str(int(DEMO_SPEED)),
    start: WebDemoFromOpt = None,
    feed: WebDemoFeedOpt = Feed.full,
    broker: WebBrokerOpt = None,
    ca_file: CaFileOpt = None,
    cert_file: CertFileOpt = None,
    key_file: KeyFileOpt = None,
    tls_insecure: TlsInsecureOpt = False,
    protocol: ProtocolOpt = "auto",
    client: ViewClientOpt = ClientKind.fast,
    root: RootOpt = DEFAULT_ROOT,
    replayer: ReplayersOpt = None,
    verbose: VerboseOpt = 0,
    log_format: LogFmtOpt = "auto",
    help_all: HelpAllOpt = False,
) -> None:
    """``matchcast web``: serve the live match page (scoreboard, goals, ticker, possession),
    pushed to browsers over SSE."""
    setup_logs(log_format, verbose, quiet_default=True)
    from matchcast.transport.connection import BrokerURL  # noqa: PLC0415
    from simulator import ReplayOptions  # noqa: PLC0415

    checked_protocol = parse_protocol(protocol)
    allowed_hosts = _allowed_hosts(allowed_host or [])
    token = _control_token(host) if control else None
    url = connection_options(broker, ca_file, cert_file, key_file, tls_insecure)
    topics = parse_topics(root)
    replayers = replayer_ids(replayer)
    replay = demo or url is None
    matches = in_feeds(load_matches(match), feed) if replay else []
    # Ctrl-C is how the page ends: its replay's end is no warning.
    options = ReplayOptions(
        speed=parse_speed(speed), start=parse_from(start), topics=topics, cancel_is_stop=True
    )
    check_start(list(matches), options.start, start or "")

    async def go() -> None:
        from matchcast.transport.broker import embedded_broker  # noqa: PLC0415

        if url is not None:
            await _serve(url)
            return
        async with embedded_broker() as b:
            await _serve((BrokerURL(b.host, b.port),))

    async def _serve(broker_url: tuple[BrokerURL, ...]) -> None:
        from consumers import Runner  # noqa: PLC0415
        from matchcast.app import run_replay, run_watch  # noqa: PLC0415
        from matchcast.app.replayers import follow_replayers  # noqa: PLC0415
        from matchcast.web import Hub, WebServer, bridge  # noqa: PLC0415

        hub = Hub(queue_size=queue_size)
        runner = Runner(
            [bridge(hub)],
            topics=topics,
            replayers=replayers,
            on_replayer=replayer_hint(broker_url, topics),
        )
        await reach_broker(broker_url, checked_protocol)  # before the page's address is announced
        sender = _control_sender(broker_url, topics, checked_protocol) if control else None
        async with WebServer(
            hub,
            host,
            port,
            max_streams=max_streams,
            control=sender,
            allowed_hosts=allowed_hosts,
            token=token.value if token else None,
        ) as server:
            _announce(server.url, token)
            async with asyncio.TaskGroup() as tg:
                tg.create_task(
                    run_watch(
                        broker_url, [], runner=runner, protocol=checked_protocol, client=client
                    )
                )
                tg.create_task(
                    follow_replayers(broker_url, topics, hub.replayer_status, checked_protocol)
                )
                if matches:
                    await asyncio.wait_for(runner.subscribed.wait(), timeout=10)
                    await run_replay(
                        matches,
                        broker_url,
                        options,
                        replayer_id="web-demo",
                        protocol=checked_protocol,
                    )
                    task = asyncio.current_task()
                    if task is not None and task.cancelling():
                        # run_replay swallows a cancel (Ctrl-C, SIGTERM) that lands while it
                        # publishes its offline status; stop anyway instead of serving on.
                        raise asyncio.CancelledError
                    stderr.print("Replay finished; the page stays up (Ctrl-C to stop).")

    run_until_interrupted(go)  # Ctrl-C is how the page ends: exit 0


_TOKEN_ENV = "MATCHCAST_WEB_TOKEN"  # noqa: S105 (the variable's name)
_MIN_TOKEN = 16


class _Token(typing.NamedTuple):
    value: str
    generated: bool  # printed in the page's address; else the operator has it in the env


def _allowed_hosts(values: list[str]) -> list[str]:
    from matchcast.web import check_allowed_host  # noqa: PLC0415

    try:
        return [check_allowed_host(v) for v in values]
    except ValueError as err:
        fail(f"--allowed-host: {err}", 2)


def _control_token(host: str) -> _Token | None:
    """The secret ``--control`` asks for: $MATCHCAST_WEB_TOKEN if set; else, when the page is
    bound beyond loopback, a new one (printed once in the page's address, never logged)."""
    from matchcast.redact import remember  # noqa: PLC0415
    from matchcast.web import bound_to_loopback  # noqa: PLC0415

    given = os.environ.get(_TOKEN_ENV, "")
    if given:
        if len(given) < _MIN_TOKEN or not given.isascii() or not given.isprintable():
            fail(
                f"${_TOKEN_ENV}: at least {_MIN_TOKEN} printable ASCII characters "
                "(python -c 'import secrets; print(secrets.token_urlsafe())' makes one)",
                2,
            )
        remember(given)
        return _Token(given, generated=False)
    if bound_to_loopback(host):
        return None
    made = secrets.token_urlsafe(24)
    remember(made)
    return _Token(made, generated=True)


def _announce(url: str, token: _Token | None) -> None:
    """The page's address: on stderr; with a new token, once on stdout with it in the address."""
    if token is None:
        stderr.print(f"Match page: {url}  (Ctrl-C to stop)", markup=False)
    elif token.generated:
        stderr.print(
            "Match page with control: open the address on stdout (it holds the token; "
            "the page trades it for a cookie). Ctrl-C to stop.",
            markup=False,
        )
        sys.stdout.write(f"{url}?token={token.value}\n")
        sys.stdout.flush()
    else:
        stderr.print(
            f"Match page: {url}  (control: open {url}?token=${_TOKEN_ENV} once; Ctrl-C to stop)",
            markup=False,
        )


def _control_sender(
    url: BrokerURL | Sequence[BrokerURL], topics: Topics, protocol: Protocol = "auto"
) -> ControlSender:
    """What the page's commands go through: ``matchcast control``'s own path."""
    from events import encode_control  # noqa: PLC0415
    from matchcast.app.control import ControlError, send_command  # noqa: PLC0415

    async def send(
        action: str, argument: str | None, match: str | None
    ) -> tuple[int, dict[str, object]]:
        try:
            reply = await send_command(
                url, action, argument, match=match, topics=topics, protocol=protocol
            )
        except ControlError as err:
            return (400 if err.code == 2 else 409), {"error": str(err)}
        except BrokerError as err:
            return 502, {"error": str(err)}
        body: dict[str, object] = json.loads(encode_control(reply))
        return 200, body

    return send


def register(app: typer.Typer) -> None:
    """Add the ``web`` command to ``app``."""
    app.command("web")(web)
