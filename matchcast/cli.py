"""The ``matchcast`` command line.

Bad arguments and unreachable brokers end in one clear line on standard error and a non-zero
exit (2 for bad input, 1 for a runtime failure), never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import structlog
import typer
from rich.console import Console
from rich.markup import escape

from events import EventAdapter, MatchcastError, MatchClock, MatchFileError, MatchState, Topics
from matchcast.broker import DEFAULT_HOST, EmbeddedBroker, embedded_broker
from matchcast.logs import LogFormat, configure_logging
from matchcast.mqtt import (
    ENV_PASSWORD,
    BrokerURL,
    TLSOptions,
    broker_url_from,
)
from matchcast.options import (
    BrokerOpt,
    CaFileOpt,
    CertFileOpt,
    KeyFileOpt,
    LogFmtOpt,
    MatchFilterOpt,
    QosOpt,
    RootOpt,
    TlsInsecureOpt,
    VerboseOpt,
)
from simulator import (
    RESEND_WINDOW_S,
    Match,
    Recording,
    ReplayOptions,
    resolve_matches,
    resolve_sources,
)

__all__ = ["app", "main"]

T = TypeVar("T")

app = typer.Typer(
    name="matchcast",
    help="Replay football matches minute by minute onto an MQTT broker, and watch them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_err = Console(stderr=True, highlight=False)
_log = structlog.get_logger("matchcast.cli")

DEFAULT_EMBEDDED_PORT = 1883
DEMO_SPEED = 65.0  # the semi-final's 98 minutes of play in about 90 seconds


class _Exit(Exception):  # noqa: N818 - control flow, not an error
    def __init__(self, code: int) -> None:
        self.code = code


def _fail(message: str, code: int = 1) -> NoReturn:
    # Escaped: messages quote input ("matches[12]", "[/x]") that Rich would read as markup.
    _err.print(f"[bold red]error:[/] {escape(message)}", markup=True, soft_wrap=True)
    raise _Exit(code)


def _first_error(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _run(coro_fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine; Ctrl-C and SIGTERM cancel it cleanly; known errors become one line."""

    async def main() -> T:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, task.cancel)
        return await coro_fn()

    try:
        return asyncio.run(main())
    except asyncio.CancelledError:
        _err.print("interrupted")
        raise _Exit(130) from None
    except KeyboardInterrupt:
        raise _Exit(130) from None
    except BaseExceptionGroup as group:
        err = _first_error(group)
        if isinstance(err, MatchcastError | OSError):
            _fail(str(err), 2 if isinstance(err, MatchFileError) else 1)
        raise
    except MatchFileError as err:
        _fail(str(err), 2)
    except (MatchcastError, OSError) as err:
        _fail(str(err))


def _setup_logs(fmt: str, verbose: int, quiet_default: bool) -> None:
    if fmt not in ("auto", "console", "json"):
        _fail(f"--log-format must be auto, console or json, not {fmt!r}", 2)
    levels = ["WARNING" if quiet_default else "INFO", "INFO", "DEBUG"]
    lf: LogFormat = fmt  # type: ignore[assignment]
    configure_logging(lf, levels[min(verbose, 2)])


def _broker(option: str | None) -> BrokerURL | None:
    try:
        return broker_url_from(option)
    except ValueError as err:
        _fail(str(err), 2)


def _connection_options(
    broker: str | None,
    ca_file: Path | None = None,
    cert_file: Path | None = None,
    key_file: Path | None = None,
    tls_insecure: bool = False,
) -> BrokerURL | None:
    """The broker of ``--broker`` (else the environment) with its credentials and TLS options;
    None for the embedded broker. Unusable TLS files end the command with one line, exit 2."""
    url = _broker(broker)
    flags = TLSOptions(ca_file, cert_file, key_file, insecure=tls_insecure)
    if url is None:
        if flags.given:
            _fail("--ca-file, --cert-file, --key-file and --tls-insecure need --broker mqtts://", 2)
        return None
    try:
        url = url.with_tls(flags)
        url.context()  # bad files fail here, before anything connects
    except ValueError as err:
        _fail(str(err), 2)
    if broker and BrokerURL.parse(broker).password:
        _log.warning(
            "credentials.in_arguments",
            broker=str(url),
            hint=f"other users see --broker in ps; put the password in ${ENV_PASSWORD}",
        )
    if url.tls and url.tls_options.insecure:
        _log.warning("tls.insecure", broker=str(url))
        _err.print(
            f"warning: --tls-insecure: the certificate of {url} is not checked; anyone on the "
            "path can read and change the stream",
            soft_wrap=True,
            markup=False,
        )
    return url


def _topics(root: str) -> Topics:
    try:
        return Topics(root)
    except ValueError as err:
        _fail(f"--root: {err}", 2)


def _speed(value: str) -> float | None:
    if value.lower() == "max":
        return None
    try:
        speed = float(value)
    except ValueError:
        _fail(
            f"--speed must be a number (1 is real time, 60 a minute a second) or 'max', "
            f"not {value!r}",
            2,
        )
    if not 0 < speed <= 1_000_000:
        _fail(f"--speed must be above 0, not {value}", 2)
    return speed


def _from(value: str | None) -> MatchClock | None:
    if value is None:
        return None
    text = value.strip().rstrip("'")
    minute, _, added = text.partition("+")
    try:
        return MatchClock.at(int(minute), int(added or 0))
    except (ValueError, StopIteration):
        _fail(f"--from must be a minute such as 60 or 90+2, not {value!r}", 2)


def _matches(spec: str | None) -> list[Match]:
    try:
        return resolve_matches(spec)
    except MatchFileError as err:
        _fail(str(err), 2)


def _sources(spec: str | None) -> list[Match | Recording]:
    try:
        return resolve_sources(spec)
    except MatchFileError as err:
        _fail(str(err), 2)


async def _with_broker(
    url: BrokerURL | None, port: int, fn: Callable[[BrokerURL], Awaitable[T]]
) -> T:
    """Run ``fn`` against ``url``, or against an embedded broker on ``port`` when None."""
    if url is not None:
        return await fn(url)
    broker = EmbeddedBroker(DEFAULT_HOST, port)
    try:
        await broker.start()
    except OSError as err:
        raise OSError(
            f"{err}. Is a broker already listening there? Then pass --broker mqtt://{DEFAULT_HOST}:{port}"
        ) from None
    try:
        return await fn(BrokerURL(DEFAULT_HOST, broker.port))
    finally:
        await broker.stop()


# ---------------------------------------------------------------- commands


@app.command()
def demo(
    speed: Annotated[str, typer.Option(help="Match seconds per wall second, or 'max'.")] = str(
        int(DEMO_SPEED)
    ),
    start: Annotated[
        str | None, typer.Option("--from", help="Start at this minute, e.g. 60 or 90+2.")
    ] = None,
    log_format: LogFmtOpt = "auto",
    verbose: VerboseOpt = 0,
) -> None:
    """Embedded broker + replay of the 2026 semi-final + live scoreboard, in one process."""
    _setup_logs(log_format, verbose, quiet_default=True)
    options = ReplayOptions(speed=_speed(speed), start=_from(start))
    match = _matches(None)[0]
    console = Console()
    final = _run(lambda: _demo(match, options, console))
    console.print(
        f"[bold]Full time:[/] {final.scoreline}  ({match.venue.name if match.venue else ''})"
    )


async def _demo(match: Match, options: ReplayOptions, console: Console) -> MatchState:
    from consumers import Runner  # noqa: PLC0415
    from consumers.terminal import TerminalView  # noqa: PLC0415
    from matchcast.app import run_replay, run_watch  # noqa: PLC0415

    async with embedded_broker() as broker:
        url = BrokerURL(broker.host, broker.port)
        view = TerminalView(console)
        runner = Runner([view.subscriber], topics=options.topics, match_filter=match.match_id)
        with view:
            async with asyncio.TaskGroup() as tg:
                watch = tg.create_task(
                    run_watch(
                        url,
                        [],
                        runner=runner,
                        until_finished={match.match_id},
                        client_id="matchcast-demo-watch",
                    )
                )
                await asyncio.wait_for(runner.subscribed.wait(), timeout=10)
                await run_replay([match], url, options, replayer_id="demo")
                await asyncio.wait_for(asyncio.shield(watch), timeout=10)
        return watch.result()[match.match_id]


@app.command()
def replay(
    match: Annotated[
        list[str] | None,
        typer.Argument(
            help="A match file (.yaml/.json), a bundled match name, sim:SEED, "
            "worldcup:2022\\[/final|/ARG-FRA|...], or a recording (.jsonl) made by the "
            "recorder subscriber; several are played at once; default: semifinal."
        ),
    ] = None,
    broker: BrokerOpt = None,
    ca_file: CaFileOpt = None,
    cert_file: CertFileOpt = None,
    key_file: KeyFileOpt = None,
    tls_insecure: TlsInsecureOpt = False,
    speed: Annotated[
        str | None,
        typer.Option(
            help="Match seconds per wall second (1 real time, 60 a minute a second), or 'max'. "
            "Default 60; for a recording, times faster than recorded, default 1.",
            show_default=False,
        ),
    ] = None,
    start: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="Start at this minute (e.g. 60, 90+2), publishing the state at that point first.",
        ),
    ] = None,
    break_seconds: Annotated[
        float | None, typer.Option("--break-seconds", help="Wall seconds each break lasts.")
    ] = 2.0,
    full_breaks: Annotated[
        bool,
        typer.Option("--full-breaks", help="Breaks last their real length divided by --speed."),
    ] = False,
    qos: QosOpt = 1,
    root: RootOpt = "matchcast",
    replayer_id: Annotated[
        str | None, typer.Option("--replayer-id", help="Names the status topic; random by default.")
    ] = None,
    protocol: Annotated[
        str, typer.Option(help="MQTT protocol: auto (5, else 3.1.1), 5 or 3.1.1.")
    ] = "auto",
    port: Annotated[
        int, typer.Option(help="Port of the embedded broker when no --broker is given.")
    ] = DEFAULT_EMBEDDED_PORT,
    day: Annotated[
        str | None,
        typer.Option(
            "--day",
            help="Only the matches kicking off on this date (YYYY-MM-DD), concurrently, each "
            "starting on its real kickoff time (the gap divided by --speed).",
        ),
    ] = None,
    resend_window: Annotated[
        float,
        typer.Option(
            "--resend-window",
            min=0,
            help="After a reconnect, re-send the events of the last SECONDS: a broker killed "
            "loses what it took since its last save (mosquitto's autosave_interval, 1800 s by "
            "default). Consumers drop what they already had. 0: only what was not acknowledged.",
        ),
    ] = RESEND_WINDOW_S,
    one_after_another: Annotated[
        bool,
        typer.Option(
            "--one-after-another",
            help="Play the matches in sequence, not at once; `matchcast control` controls "
            "the queue as a whole (stop ends it).",
        ),
    ] = False,
    log_format: LogFmtOpt = "auto",
    verbose: VerboseOpt = 0,
) -> None:
    """Replay a match onto a broker on a timed schedule."""
    _setup_logs(log_format, verbose, quiet_default=False)
    if protocol not in ("auto", "5", "3.1.1"):
        _fail(f"--protocol must be auto, 5 or 3.1.1, not {protocol!r}", 2)
    url = _connection_options(broker, ca_file, cert_file, key_file, tls_insecure)
    specs: list[str | None] = list(match) if match else [None]
    matches = [m for spec in specs for m in _sources(spec)]
    recording = any(isinstance(m, Recording) for m in matches)
    options = ReplayOptions(
        speed=_speed(speed or ("1" if recording else "60")),
        start=_from(start),
        break_seconds=None if full_breaks else break_seconds,
        qos=qos,
        topics=_topics(root),
        resend_window=resend_window,
    )
    from matchcast.app import run_replay  # noqa: PLC0415

    delays = None
    if day is not None:
        from matchcast.cmd_matches import match_day  # noqa: PLC0415

        plain = [m for m in matches if isinstance(m, Match)]
        if len(plain) != len(matches):
            _fail("--day selects matches by kickoff; it does not apply to a recording", 2)
        day_matches, delays = match_day(plain, day, options.speed)
        matches = list(day_matches)
    reports = _run(
        lambda: _with_broker(
            url,
            port,
            lambda u: run_replay(
                matches,
                u,
                options,
                replayer_id=replayer_id,
                protocol=protocol,  # type: ignore[arg-type]
                delays=delays,
                one_after_another=one_after_another,
            ),
        )
    )
    for r in reports:
        if r.final_state is not None:
            seqs = f"seq {r.first_seq}-{r.last_seq}"
            typer.echo(f"{r.match_id}: {r.final_state.scoreline} ({r.published} events, {seqs})")


@app.command()
def watch(
    broker: BrokerOpt = None,
    ca_file: CaFileOpt = None,
    cert_file: CertFileOpt = None,
    key_file: KeyFileOpt = None,
    tls_insecure: TlsInsecureOpt = False,
    match: MatchFilterOpt = "+",
    root: RootOpt = "matchcast",
    qos: QosOpt = 1,
    exit_at_full_time: Annotated[
        bool, typer.Option("--exit-at-full-time", help="Exit once the match (--match) is over.")
    ] = False,
    log_format: LogFmtOpt = "auto",
    verbose: VerboseOpt = 0,
) -> None:
    """Live terminal scoreboard and ticker (broker default: the embedded one on 127.0.0.1:1883)."""
    _setup_logs(log_format, verbose, quiet_default=sys.stdout.isatty())
    url = _connection_options(broker, ca_file, cert_file, key_file, tls_insecure) or BrokerURL(
        DEFAULT_HOST, DEFAULT_EMBEDDED_PORT
    )
    topics = _topics(root)
    if exit_at_full_time and match == "+":
        _fail("--exit-at-full-time needs --match MATCH_ID", 2)
    from consumers.terminal import TerminalView  # noqa: PLC0415
    from matchcast.app import run_watch  # noqa: PLC0415

    view = TerminalView()

    async def go() -> dict[str, MatchState]:
        with view:
            return await run_watch(
                url,
                [view.subscriber],
                topics=topics,
                match_filter=match,
                qos=qos,
                until_finished={match} if exit_at_full_time else None,
            )

    try:
        _run(go)
    except _Exit as e:
        if e.code != 130:
            raise
        # Ctrl-C is how a watch ends: exit 0


@app.command("broker")
def broker_cmd(
    host: Annotated[
        str,
        typer.Option(
            help="Address to bind. The default, 127.0.0.1, keeps it private to this machine; "
            "the embedded broker has no passwords or TLS, so 0.0.0.0 lets anyone on the "
            "network publish."
        ),
    ] = DEFAULT_HOST,
    port: Annotated[int, typer.Option(help="TCP port.")] = DEFAULT_EMBEDDED_PORT,
    log_format: LogFmtOpt = "auto",
    verbose: VerboseOpt = 0,
) -> None:
    """Run the embedded broker (amqtt, MQTT 3.1.1, no auth) on 127.0.0.1 until Ctrl-C."""
    _setup_logs(log_format, verbose, quiet_default=False)
    if not _is_loopback(host):
        _log.warning("broker.exposed", host=host, hint="no authentication: anyone can publish")

    async def serve() -> None:
        b = EmbeddedBroker(host, port)
        await b.start()
        _err.print(f"embedded broker on mqtt://{host}:{port} (Ctrl-C to stop)")
        try:
            await asyncio.Event().wait()
        finally:
            await b.stop()

    try:
        _run(serve)
    except _Exit as e:
        if e.code != 130:
            raise


def _is_loopback(host: str) -> bool:
    import ipaddress  # noqa: PLC0415

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@app.command()
def schema(
    state: Annotated[
        bool, typer.Option("--state", help="The retained state snapshot instead of the events.")
    ] = False,
    match_file: Annotated[
        bool, typer.Option("--match-file", help="The match file format instead of the events.")
    ] = False,
) -> None:
    """Print the JSON Schema of the events on the wire (or of the state, or of match files)."""
    if match_file:
        doc = Match.model_json_schema()
    else:
        doc = MatchState.model_json_schema() if state else EventAdapter.json_schema()
    typer.echo(json.dumps(doc, indent=2, ensure_ascii=False))


def main() -> None:
    """Entry point of the ``matchcast`` console script."""
    try:
        app()
    except _Exit as e:
        sys.exit(e.code)


#: Modules that add commands of their own; each defines ``register(app: typer.Typer)``.
#: They may use this module's helpers (``_fail``, ``_run``, ``_broker``, ``_speed``, ...); a
#: command that connects to a broker takes ``BrokerOpt`` plus ``CaFileOpt``, ``CertFileOpt``,
#: ``KeyFileOpt`` and ``TlsInsecureOpt`` and gets its URL from ``_connection_options``.
COMMAND_MODULES: tuple[str, ...] = (
    "matchcast.cmd_asyncapi",
    "matchcast.cmd_consume",
    "matchcast.cmd_control",
    "matchcast.cmd_load",
    "matchcast.cmd_matches",
    "matchcast.cmd_web",
)


def _register_commands() -> None:
    import importlib  # noqa: PLC0415

    for name in COMMAND_MODULES:
        importlib.import_module(name).register(app)


_register_commands()
