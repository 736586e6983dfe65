"""``matchcast replay`` and ``matchcast demo``: a match onto a broker on a timed schedule.

``demo`` is the same replay onto an embedded broker of its own, with the terminal scoreboard
watching it in the same process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from events import DEFAULT_ROOT, MatchState
from matchcast.app import run_replay, run_watch
from matchcast.cli.chaos import parse_chaos, write_chaos_log, write_truth
from matchcast.cli.common import fail, run, setup_logs, stderr
from matchcast.cli.matches import match_day
from matchcast.cli.options import (
    BROKER_PANEL,
    DEFAULT_EMBEDDED_PORT,
    DEMO_SPEED,
    PORT,
    CaFileOpt,
    CertFileOpt,
    ChaosLogOpt,
    ChaosOpt,
    DemoSpeedOpt,
    FeedOpt,
    FromOpt,
    HelpAllOpt,
    KeyFileOpt,
    LogFmtOpt,
    ProtocolOpt,
    ReplayBrokerOpt,
    ReplayerIdOpt,
    ReplayQosOpt,
    ReplaySpeedOpt,
    RootOpt,
    SeedOpt,
    TlsInsecureOpt,
    TruthOpt,
    VerboseOpt,
    check_start,
    connection_options,
    in_feeds,
    load_matches,
    load_sources,
    number,
    parse_from,
    parse_protocol,
    parse_speed,
    parse_topics,
    rare,
    replayer_id,
)
from matchcast.transport.broker import DEFAULT_HOST, EmbeddedBroker, embedded_broker
from matchcast.transport.connection import BrokerURL
from simulator import (
    MAX_BREAK_SECONDS,
    MAX_RESEND_WINDOW_S,
    RESEND_WINDOW_S,
    ChaosSpecError,
    Feed,
    Match,
    Recording,
    ReplayOptions,
)

__all__ = ["demo", "recorded_delays", "register", "replay"]

T = TypeVar("T")

_MATCH_HELP = (
    "A match file (.yaml/.json), a bundled match name, sim:SEED, "
    "worldcup:2022\\[/final|/ARG-FRA|...], or a recording (.jsonl) made by the "
    "recorder subscriber; default: semifinal."
)


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
    speed: DemoSpeedOpt = str(int(DEMO_SPEED)),
    start: FromOpt = None,
    feed: FeedOpt = Feed.full,
    verbose: VerboseOpt = 0,
    log_format: LogFmtOpt = "auto",
    help_all: HelpAllOpt = False,
) -> None:
    """``matchcast demo``: an embedded broker, a replay of one match onto it and the live
    scoreboard watching it, in one process."""
    setup_logs(log_format, verbose, quiet_default=True)
    options = ReplayOptions(speed=parse_speed(speed), start=parse_from(start))
    found = in_feeds(load_matches(match_spec), feed)
    if len(found) != 1:
        fail(
            f"demo plays one match; {match_spec} is {len(found)} matches "
            f"({', '.join(m.match_id for m in found[:3])}, ...): name one, or use replay",
            2,
        )
    match = found[0]
    check_start([match], options.start, start or "")
    console = Console(emoji=False)
    final = run(lambda: _demo(match, options, console))
    venue = f"  ({match.venue.name})" if match.venue else ""
    console.print(f"[bold]Full time:[/] {escape(final.scoreline + venue)}")


async def _demo(match: Match, options: ReplayOptions, console: Console) -> MatchState:
    from consumers import Runner  # noqa: PLC0415
    from consumers.terminal import TerminalView  # noqa: PLC0415

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


_WHAT = "What to replay"
_TIMING = "Timing"


def replay(
    match: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="MATCH",
            help=_MATCH_HELP.replace("; default", "; several play at once; default"),
            show_default=False,
        ),
    ] = None,
    day: Annotated[
        str | None,
        typer.Option(
            "--day",
            metavar="YYYY-MM-DD",
            help="Only the matches kicking off that day, each at its kickoff time (the gaps "
            "divided by --speed).",
            rich_help_panel=_WHAT,
        ),
    ] = None,
    one_after_another: Annotated[
        bool,
        typer.Option(
            "--one-after-another",
            help="Play the matches in sequence, not at once (control stop ends the queue).",
            rich_help_panel=_WHAT,
        ),
    ] = False,
    replayer: ReplayerIdOpt = None,
    replayer_id: Annotated[
        str | None, typer.Option("--replayer-id", hidden=True, help="Old name of --replayer.")
    ] = None,
    speed: ReplaySpeedOpt = None,
    start: FromOpt = None,
    feed: FeedOpt = Feed.full,
    break_seconds: Annotated[
        float | None,
        typer.Option(
            "--break-seconds",
            parser=number(0, MAX_BREAK_SECONDS),
            metavar="SECONDS",
            help="Wall seconds each break lasts.",
            **rare(_TIMING),
        ),
    ] = 2.0,
    full_breaks: Annotated[
        bool,
        typer.Option(
            "--full-breaks",
            help="Breaks last their real length divided by --speed.",
            **rare(_TIMING),
        ),
    ] = False,
    broker: ReplayBrokerOpt = None,
    port: Annotated[
        int,
        typer.Option(
            "--port",
            parser=PORT,
            metavar="PORT",
            help="Port of the embedded broker started when no --broker is given.",
            rich_help_panel=BROKER_PANEL,
        ),
    ] = DEFAULT_EMBEDDED_PORT,
    qos: ReplayQosOpt = 1,
    ca_file: CaFileOpt = None,
    cert_file: CertFileOpt = None,
    key_file: KeyFileOpt = None,
    tls_insecure: TlsInsecureOpt = False,
    protocol: ProtocolOpt = "auto",
    root: RootOpt = DEFAULT_ROOT,
    resend_window: Annotated[
        float,
        typer.Option(
            "--resend-window",
            parser=number(0, MAX_RESEND_WINDOW_S),
            metavar="SECONDS",
            help="After a reconnect, re-send the events of the last SECONDS (what a killed "
            "broker lost since its last save; consumers drop what they had). 0: only what "
            "was not acknowledged.",
            **rare(BROKER_PANEL),
        ),
    ] = RESEND_WINDOW_S,
    chaos: ChaosOpt = None,
    seed: SeedOpt = 0,
    chaos_log: ChaosLogOpt = None,
    truth: TruthOpt = None,
    verbose: VerboseOpt = 0,
    log_format: LogFmtOpt = "auto",
    help_all: HelpAllOpt = False,
) -> None:
    """``matchcast replay``: replay matches onto a broker on a timed schedule."""
    setup_logs(log_format, verbose, quiet_default=False)
    try:
        chaos_spec = parse_chaos(chaos)
    except ChaosSpecError as err:
        fail(str(err), 2)
    checked_protocol = parse_protocol(protocol)
    replayer = _replayer(replayer, replayer_id)
    url = connection_options(broker, ca_file, cert_file, key_file, tls_insecure)
    specs: list[str | None] = list(match) if match else [None]
    matches = in_feeds([m for spec in specs for m in load_sources(spec)], feed)
    recording = any(isinstance(m, Recording) for m in matches)
    options = ReplayOptions(
        speed=parse_speed(speed or ("1" if recording else "60")),
        start=parse_from(start),
        break_seconds=None if full_breaks else break_seconds,
        qos=qos,
        topics=parse_topics(root),
        chaos=chaos_spec,
        seed=seed,
        resend_window=resend_window,
    )
    check_start(matches, options.start, start or "")
    delays = recorded_delays(matches, options)
    if day is not None:
        plain = [m for m in matches if isinstance(m, Match)]
        if len(plain) != len(matches):
            fail("--day selects matches by kickoff; it does not apply to a recording", 2)
        day_matches, delays = match_day(plain, day, options.speed)
        matches = list(day_matches)
    reports = run(
        lambda: _with_broker(
            url,
            port,
            lambda u: run_replay(
                matches,
                u,
                options,
                replayer_id=replayer,
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


def _replayer(replayer: str | None, old_name: str | None) -> str | None:
    """``--replayer``, or its old name ``--replayer-id`` (kept for one release), checked."""
    if old_name is None:
        return replayer_id(replayer)
    if replayer is not None and replayer != old_name:
        fail("--replayer and --replayer-id name the same thing: give one", 2)
    checked = replayer_id(old_name, "--replayer-id")
    stderr.print(
        "warning: --replayer-id is now --replayer; the old name goes in the next release",
        markup=False,
    )
    return checked


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


def register(app: typer.Typer) -> None:
    """Add ``demo`` and ``replay`` to ``app``."""
    app.command()(demo)
    app.command()(replay)
