"""The ``matchcast`` command line.

Bad arguments and unreachable brokers end in one clear line on standard error and a non-zero
exit (2 for bad input, 1 for a runtime failure), never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import sys
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import structlog
import typer
from rich.console import Console
from rich.markup import escape

from events import (
    EventAdapter,
    MatchcastError,
    MatchClock,
    MatchFileError,
    MatchState,
    Period,
    Topics,
)
from matchcast.broker import DEFAULT_HOST, EmbeddedBroker, embedded_broker
from matchcast.chaos import (
    ChaosLogOpt,
    ChaosOpt,
    SeedOpt,
    TruthOpt,
    parse_chaos,
    write_chaos_log,
    write_truth,
)
from matchcast.logs import LogFormat, configure_logging
from matchcast.mqtt import (
    ENV_PASSWORD,
    BrokerURL,
    Protocol,
    TLSOptions,
    broker_url_from,
    describe,
)
from matchcast.options import (
    CLIENT_HELP,
    BrokerOpt,
    CaFileOpt,
    CertFileOpt,
    ClientKind,
    KeyFileOpt,
    LogFmtOpt,
    MatchFilterOpt,
    ProtocolOpt,
    QosOpt,
    RootOpt,
    TlsInsecureOpt,
    VerboseOpt,
)
from matchcast.redact import redact
from simulator import (
    RESEND_WINDOW_S,
    ChaosSpecError,
    Match,
    Recording,
    ReplayOptions,
    resolve_matches,
    resolve_sources,
)

__all__ = ["app", "main"]

T = TypeVar("T")

EXIT_CODES = (
    "Exit codes: 0 done; 1 a runtime failure (an unreachable broker); 2 bad input (arguments, "
    "match files); 3 a load test's --check or --verify-state failed, or nothing was delivered; "
    "130 interrupted. Ctrl-C is how watch, web, consume and broker end (exit 0); it interrupts "
    "demo, replay and load (exit 130). clear exits 1 when its question is answered no."
)

app = typer.Typer(
    name="matchcast",
    help="Replay football matches minute by minute onto an MQTT broker, and watch them.",
    epilog=EXIT_CODES,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# No emoji codes: user text such as ``sim:abc`` must print as typed, not as ``sim🔤``.
_err = Console(stderr=True, highlight=False, emoji=False)
_log = structlog.get_logger("matchcast.cli")

DEFAULT_EMBEDDED_PORT = 1883
DEMO_SPEED = 65.0  # the semi-final's 98 minutes of play in about 90 seconds


class _Exit(Exception):  # noqa: N818 - control flow, not an error
    def __init__(self, code: int) -> None:
        self.code = code


def _fail(message: str, code: int = 1) -> NoReturn:
    # Escaped: messages quote input ("matches[12]", "[/x]") that Rich would read as markup;
    # redacted: no secret in an error message.
    _err.print(f"[bold red]error:[/] {escape(redact(message))}", markup=True, soft_wrap=True)
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
        _err.print("interrupted", markup=False)
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


def _broker(option: str | None) -> tuple[BrokerURL, ...] | None:
    try:
        return broker_url_from(option)
    except ValueError as err:
        _fail(str(err), 2)


def _protocol(value: str) -> Protocol:
    """The ``--protocol`` value, checked."""
    if value not in ("auto", "5", "3.1.1"):
        _fail(f"--protocol must be auto, 5 or 3.1.1, not {value!r}", 2)
    return value  # type: ignore[return-value]


def _connection_options(
    broker: str | None,
    ca_file: Path | None = None,
    cert_file: Path | None = None,
    key_file: Path | None = None,
    tls_insecure: bool = False,
) -> tuple[BrokerURL, ...] | None:
    """The brokers of ``--broker`` (else the environment; one URL or a comma-separated list)
    with their credentials and TLS options; None for the embedded broker. Unusable TLS files
    end the command with one line, exit 2."""
    given = _broker(broker)
    flags = TLSOptions(ca_file, cert_file, key_file, insecure=tls_insecure)
    if given is None:
        if flags.given:
            _fail("--ca-file, --cert-file, --key-file and --tls-insecure need --broker mqtts://", 2)
        return None
    try:
        urls = tuple(u.with_tls(flags) for u in given)
        for u in urls:
            u.context()  # bad files fail here, before anything connects
    except ValueError as err:
        _fail(str(err), 2)
    shown = describe(urls)
    if broker and any(BrokerURL.parse(p.strip()).password for p in broker.split(",")):
        _log.warning(
            "credentials.in_arguments",
            broker=shown,
            hint=f"other users see --broker in ps; put the password in ${ENV_PASSWORD}",
        )
    if urls[0].tls and urls[0].tls_options.insecure:
        _log.warning("tls.insecure", broker=shown)
        _err.print(
            f"warning: --tls-insecure: the certificate of {shown} is not checked; anyone on "
            "the path can read and change the stream",
            soft_wrap=True,
            markup=False,
        )
    return urls


def _topics(root: str) -> Topics:
    try:
        return Topics(root)
    except ValueError as err:
        _fail(f"--root: {err}", 2)


def match_filter(value: str) -> str:
    """``--match``: '+' or a match id; a wrong case is refused at once (ids are lower case),
    rather than waited for forever."""
    if value == "+" or re.fullmatch(r"[a-z0-9][a-z0-9_.-]{0,63}", value):
        return value
    lower = value.lower()
    hint = f": try --match {lower}" if re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", lower) else ""
    _fail(f"--match {value!r}: match ids are lower case letters, digits, _ . and -{hint}", 2)


def _where(url: BrokerURL | Sequence[BrokerURL]) -> str:
    return str(url) if isinstance(url, BrokerURL) else describe(url)


async def reach_broker(url: BrokerURL | Sequence[BrokerURL]) -> None:
    """Connect once and leave, so an unreachable broker ends a command before it prints
    anything (a page's address, a stats line)."""
    from matchcast.mqtt import MqttClient  # noqa: PLC0415

    async with MqttClient(url, client_id=f"matchcast-check-{uuid.uuid4().hex[:8]}"):
        pass


async def live_matches(
    url: BrokerURL | Sequence[BrokerURL], topics: Topics, wait_s: float = 1.0
) -> list[str]:
    """The ids of the matches with a retained state on the broker (read for ``wait_s``)."""
    from matchcast.mqtt import MqttClient  # noqa: PLC0415

    found: set[str] = set()
    async with MqttClient(url, client_id=f"matchcast-list-{uuid.uuid4().hex[:8]}") as client:
        await client.subscribe(topics.state(), qos=0)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(wait_s):
                async for message in client.messages():
                    parsed = topics.parse(message.topic)
                    if parsed is not None and message.payload:
                        found.add(parsed[1])
    return sorted(found)


async def say_when_absent(
    url: BrokerURL | Sequence[BrokerURL],
    topics: Topics,
    match_id: str,
    seen: Callable[[], bool],
    after_s: float,
) -> None:
    """If nothing of ``match_id`` has arrived after ``after_s`` seconds, say on standard error
    which matches the broker has, instead of waiting in silence."""
    await asyncio.sleep(after_s)
    if seen():
        return
    others = await live_matches(url, topics)
    listed = ", ".join(others[:10]) + (f" and {len(others) - 10} more" if len(others) > 10 else "")
    near = [m for m in others if match_id in m or m in match_id]
    _err.print(
        f"waiting for match {match_id}: nothing of it on {_where(url)} under {topics.root}/ yet. "
        + (f"Matches there: {listed}." if others else "No match there yet.")
        + (f" Did you mean --match {near[0]}?" if near else ""),
        markup=False,
        soft_wrap=True,
    )


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


def _check_start(matches: list[Match | Recording], start: MatchClock | None, value: str) -> None:
    """Refuse a ``--from`` past the end of a match: it would publish nothing and exit 0."""
    if start is None:
        return
    from simulator import expand  # noqa: PLC0415

    names = {
        Period.FIRST_HALF: "first half",
        Period.SECOND_HALF: "second half",
        Period.EXTRA_TIME_FIRST: "first half of extra time",
        Period.EXTRA_TIME_SECOND: "second half of extra time",
    }
    for m in matches:
        events = list(m.events) if isinstance(m, Recording) else [s.event for s in expand(m)]
        # A shoot-out has no minutes: the last minute is the last one played before it.
        played = [e.clock for e in events if e.clock.period is not Period.PENALTIES]
        if not played:
            continue
        last = max(played, key=lambda c: c.sort_key)
        valid = f"give a minute from 1 to {last.label.rstrip(chr(39))}"
        if start.sort_key > last.sort_key:
            where = f"the last minute played in {m.match_id} is {last.label}"
            _fail(f"--from {value}: {where}; {valid}", 2)
        ends = [c for c in played if c.period is start.period]
        if ends and start.sort_key > max(c.sort_key for c in ends):
            end = max(ends, key=lambda c: c.sort_key).label
            _fail(
                f"--from {value}: in {m.match_id} the {names.get(start.period, 'period')} "
                f"ends at {end}; {valid}",
                2,
            )


def recorded_delays(sources: list[Match | Recording], options: ReplayOptions) -> list[float] | None:
    """Wall seconds to wait before each source so that the matches of a recording keep their
    recorded offsets from one another; None when there is no recording."""
    leads = [s.lead(options.speed, options.start) for s in sources if isinstance(s, Recording)]
    if not leads:
        return None
    first = min(leads)
    return [
        s.lead(options.speed, options.start) - first if isinstance(s, Recording) else 0.0
        for s in sources
    ]


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
    url: tuple[BrokerURL, ...] | None,
    port: int,
    fn: Callable[[tuple[BrokerURL, ...]], Awaitable[T]],
) -> T:
    """Run ``fn`` against the brokers ``url``, or an embedded broker on ``port`` when None."""
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
        return await fn((BrokerURL(DEFAULT_HOST, broker.port),))
    finally:
        await broker.stop()


def _show_version(value: bool) -> None:
    if value:
        from matchcast import __version__  # noqa: PLC0415

        typer.echo(f"matchcast {__version__}")
        raise typer.Exit


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_show_version, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Replay football matches minute by minute onto an MQTT broker, and watch them."""


# ---------------------------------------------------------------- commands


_MATCH_HELP = (
    "A match file (.yaml/.json), a bundled match name, sim:SEED, "
    "worldcup:2022\\[/final|/ARG-FRA|...], or a recording (.jsonl) made by the "
    "recorder subscriber; default: semifinal."
)


@app.command()
def demo(
    match_spec: Annotated[
        str | None,
        typer.Argument(
            metavar="MATCH",
            help="One match, as for replay (a file, a bundled name, sim:SEED, "
            "worldcup:2022/final); default: semifinal.",
            show_default=False,
        ),
    ] = None,
    speed: Annotated[str, typer.Option(help="Match seconds per wall second, or 'max'.")] = str(
        int(DEMO_SPEED)
    ),
    start: Annotated[
        str | None, typer.Option("--from", help="Start at this minute, e.g. 60 or 90+2.")
    ] = None,
    log_format: LogFmtOpt = "auto",
    verbose: VerboseOpt = 0,
) -> None:
    """Embedded broker + replay of a match (the semi-final) + live scoreboard, in one process."""
    _setup_logs(log_format, verbose, quiet_default=True)
    options = ReplayOptions(speed=_speed(speed), start=_from(start))
    found = _matches(match_spec)
    if len(found) != 1:
        _fail(
            f"demo plays one match; {match_spec} is {len(found)} matches "
            f"({', '.join(m.match_id for m in found[:3])}, ...): name one, or use replay",
            2,
        )
    match = found[0]
    _check_start([match], options.start, start or "")
    console = Console(emoji=False)
    final = _run(lambda: _demo(match, options, console))
    venue = f"  ({match.venue.name})" if match.venue else ""
    console.print(f"[bold]Full time:[/] {escape(final.scoreline + venue)}")


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
            help=_MATCH_HELP.replace("; default", "; several are played at once; default")
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
    protocol: ProtocolOpt = "auto",
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
    chaos: ChaosOpt = None,
    seed: SeedOpt = 0,
    chaos_log: ChaosLogOpt = None,
    truth: TruthOpt = None,
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
    try:
        chaos_spec = parse_chaos(chaos)
    except ChaosSpecError as err:
        _fail(str(err), 2)
    checked_protocol = _protocol(protocol)
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
        chaos=chaos_spec,
        seed=seed,
        resend_window=resend_window,
    )
    _check_start(matches, options.start, start or "")
    from matchcast.app import run_replay  # noqa: PLC0415

    delays = recorded_delays(matches, options)
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
                protocol=checked_protocol,
                delays=delays,
                one_after_another=one_after_another,
            ),
        )
    )
    for r in reports:
        if r.truth is not None:  # under chaos: what was sent, and the truth
            typer.echo(
                f"{r.match_id}: {r.truth.scoreline} ({r.published} events sent, "
                f"{len(r.faults)} faults, true last seq {r.truth.last_seq})"
            )
        elif r.final_state is not None:
            seqs = f"seq {r.first_seq}-{r.last_seq}"
            typer.echo(f"{r.match_id}: {r.final_state.scoreline} ({r.published} events, {seqs})")
    if chaos_log is not None:
        write_chaos_log(chaos_log, [f for r in reports for f in r.faults])
    if truth is not None:
        states = {r.match_id: r.truth or r.final_state for r in reports}
        write_truth(truth, {m: s for m, s in states.items() if s is not None}, chaos_spec, seed)


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
        bool,
        typer.Option(
            "--exit-at-full-time",
            help="Exit at the full time of the match (--match) in a run that is live when the "
            "watch joins or starts after; a finished state retained by an earlier run, or a "
            "replay stopped before full time, does not end it.",
        ),
    ] = False,
    protocol: ProtocolOpt = "auto",
    client: Annotated[ClientKind, typer.Option("--client", help=CLIENT_HELP)] = ClientKind.aiomqtt,
    log_format: LogFmtOpt = "auto",
    verbose: VerboseOpt = 0,
) -> None:
    """Live terminal scoreboard and ticker (broker default: the embedded one on 127.0.0.1:1883)."""
    _setup_logs(log_format, verbose, quiet_default=sys.stdout.isatty())
    checked_protocol = _protocol(protocol)
    url = _connection_options(broker, ca_file, cert_file, key_file, tls_insecure) or (
        BrokerURL(DEFAULT_HOST, DEFAULT_EMBEDDED_PORT),
    )
    topics = _topics(root)
    match = match_filter(match)
    if exit_at_full_time and match == "+":
        _fail("--exit-at-full-time needs --match MATCH_ID", 2)
    from consumers.terminal import TerminalView  # noqa: PLC0415
    from matchcast.app import run_watch  # noqa: PLC0415
    from matchcast.replayers import follow_replayers  # noqa: PLC0415

    view = TerminalView()

    async def go() -> dict[str, MatchState]:
        await reach_broker(url)
        with view:
            async with asyncio.TaskGroup() as tg:
                if match != "+":
                    hint = tg.create_task(
                        say_when_absent(url, topics, match, lambda: bool(view.board.states), 5.0)
                    )
                replayers = tg.create_task(follow_replayers(url, topics, view.replayer_status))
                try:
                    return await run_watch(
                        url,
                        [view.subscriber],
                        topics=topics,
                        match_filter=match,
                        qos=qos,
                        protocol=checked_protocol,
                        client=client,
                        until_finished={match} if exit_at_full_time else None,
                    )
                finally:
                    replayers.cancel()
                    if match != "+":
                        hint.cancel()

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
        _err.print(f"embedded broker on mqtt://{host}:{port} (Ctrl-C to stop)", markup=False)
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


#: One example per command, shown at the end of its ``--help``.
EXAMPLES: dict[str, str] = {
    "demo": "matchcast demo worldcup:2022/final --from 80",
    "replay": "matchcast replay semifinal --speed 120 --broker mqtt://127.0.0.1:1883",
    "watch": "matchcast watch --match wc2026-sf-arg-eng --exit-at-full-time",
    "broker": "matchcast broker --port 1884",
    "schema": "matchcast schema --state > state.schema.json",
    "asyncapi": "matchcast asyncapi > asyncapi.yaml",
    "consume": "matchcast consume ./alerts.py scoreboard --broker mqtt://127.0.0.1:1883",
    "load": "matchcast load --spawn-mosquitto --matches 50 --check 'p99 < 50ms' "
    "--check 'lost == 0' --report r.json",
    "load merge": "matchcast load merge shard-0.json shard-1.json --report all.json",
    "load-consumer": "matchcast load-consumer --consumer-id c1 --broker mqtt://127.0.0.1:1883",
    "simulate": "matchcast simulate --home BRA --away GER --seed 7 --knockout -o bra-ger.yaml",
    "import": "matchcast import openfootball worldcup.json --match final -o final.yaml",
    "web": "matchcast web --broker mqtt://127.0.0.1:1883 --port 8000",
    "clear": "matchcast clear --broker mqtt://127.0.0.1:1883 --match wc2026-sf-arg-eng --yes",
    "control": "MATCHCAST_USERNAME=operator matchcast control seek 85 --broker mqtt://127.0.0.1:1883",
}


def command() -> Any:
    """The click command of :data:`app`, as ``main`` runs it: each command's help ends with
    its example, and flags show no ``<bool>``/``<int>`` value they do not take."""
    cmd = typer.main.get_command(app)
    commands: dict[str, Any] = getattr(cmd, "commands", {})
    for c in [cmd, *commands.values()]:
        for param in c.get_params(typer.Context(c)):
            if getattr(param, "is_flag", False) or getattr(param, "count", False):
                param.metavar = ""
    for name, c in commands.items():
        example = EXAMPLES.get(name)
        if example is not None:
            c.epilog = f"Example: {example}"
    return cmd


def main() -> None:
    """Entry point of the ``matchcast`` console script.

    Usage errors (an unknown option, a missing value) end in one ``error:`` line, exit 2.
    """
    args = sys.argv[1:]
    if args[:2] == ["load", "merge"]:  # ``load merge`` has help and options of its own
        args = ["load merge", *args[2:]]
    try:
        code = command().main(args, prog_name="matchcast", standalone_mode=False)
    except _Exit as e:
        sys.exit(e.code)
    except typer.Abort:
        sys.exit(130)
    except typer.TyperException as err:
        if type(err).__name__ == "NoArgsIsHelpError":  # the help is already printed
            sys.exit(2)
        ctx = getattr(err, "ctx", None)
        where = f" (see {ctx.command_path} --help)" if ctx is not None else ""
        _err.print(f"error: {err.format_message()}{where}", markup=False, soft_wrap=True)
        sys.exit(getattr(err, "exit_code", 2))
    sys.exit(code if isinstance(code, int) else 0)


#: Modules that add commands of their own; each defines ``register(app: typer.Typer)``.
#: They may use this module's helpers (``_fail``, ``_run``, ``_broker``, ``_speed``, ...); a
#: command that connects to a broker takes ``BrokerOpt`` plus ``CaFileOpt``, ``CertFileOpt``,
#: ``KeyFileOpt`` and ``TlsInsecureOpt`` and gets its URL from ``_connection_options``.
COMMAND_MODULES: tuple[str, ...] = (
    "matchcast.cmd_asyncapi",
    "matchcast.cmd_clear",
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
