"""The one place for a command-line option: the typer options several commands share, the
checks that turn their text into matchcast's values, and how a command's help shows them.

Each ``...Opt`` is an annotated type a command takes as a parameter (``broker: BrokerOpt =
None``); each ``parse_...`` checks a value and ends the command with one line, exit 2, when it
is wrong. A command that connects to a broker takes a ``...BrokerOpt`` plus ``CaFileOpt``,
``CertFileOpt``, ``KeyFileOpt`` and ``TlsInsecureOpt`` and gets its brokers from
:func:`connection_options`. Every default topic root is :data:`events.DEFAULT_ROOT` (``load``'s
is :data:`events.LOAD_ROOT`).

How a help shows them: each option sits in a panel (typer's ``rich_help_panel``: the
``..._PANEL`` names). A rare one is declared with :func:`rare`: ``--help`` leaves it out and
``--help-all`` (:data:`HelpAllOpt`, which every command takes) shows it in its panel. An option
hidden without a panel is internal and never shown (``load --probe-only``, an old name kept
for a release). A number or a choice is read by :func:`whole`, :func:`number` or
:func:`choice`, so a wrong one is refused with a line that names the option and what it takes,
never with the validation library's wording.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import typer

import events
from events import (
    END_OF_PLAY,
    MatchClock,
    MatchFileError,
    MinutePastPlayError,
    Period,
    Topics,
    parse_minute,
    quote,
    replayer_id_problem,
)
from matchcast.cli.common import fail, log, stderr
from matchcast.transport.clients import ClientKind
from matchcast.transport.connection import (
    ENV_CA_FILE,
    ENV_CERT_FILE,
    ENV_KEY_FILE,
    ENV_PASSWORD,
    BrokerURL,
    Protocol,
    TLSOptions,
    broker_url_from,
    describe,
)
from simulator import Feed, Match, Recording, in_feed, resolve_matches, resolve_sources

__all__ = [
    "BROKER_PANEL",
    "CHAOS_PANEL",
    "DEFAULT_EMBEDDED_PORT",
    "DEMO_SPEED",
    "OUTPUT_PANEL",
    "PORT",
    "BrokerOpt",
    "CaFileOpt",
    "CertFileOpt",
    "ChaosLogOpt",
    "ChaosOpt",
    "ClearMatchOpt",
    "ClientOpt",
    "ControlBrokerOpt",
    "ControlMatchOpt",
    "ControlReplayerOpt",
    "DemoSpeedOpt",
    "ExitAtFullTimeOpt",
    "FeedOpt",
    "FromOpt",
    "HelpAllOpt",
    "KeyFileOpt",
    "LoadBrokerOpt",
    "LoadFeedOpt",
    "LoadQosOpt",
    "LoadSpeedOpt",
    "LogFmtOpt",
    "MatchFilterOpt",
    "ProtocolOpt",
    "ReplayBrokerOpt",
    "ReplayQosOpt",
    "ReplaySpeedOpt",
    "ReplayerIdOpt",
    "ReplayersOpt",
    "RootOpt",
    "SeedOpt",
    "SubscriptionQosOpt",
    "TlsInsecureOpt",
    "TruthOpt",
    "VerboseOpt",
    "ViewClientOpt",
    "WebBrokerOpt",
    "WebDemoFeedOpt",
    "WebDemoFromOpt",
    "WebDemoSpeedOpt",
    "check_start",
    "choice",
    "connection_options",
    "in_feeds",
    "load_matches",
    "load_sources",
    "match_filter",
    "number",
    "parse_from",
    "parse_number",
    "parse_protocol",
    "parse_speed",
    "parse_topics",
    "rare",
    "replayer_id",
    "replayer_ids",
    "until_finished",
    "whole",
]

E = TypeVar("E", bound=Enum)
S = TypeVar("S", Match, Match | Recording)

#: The port of the embedded broker, and where commands look for a broker when none is given.
DEFAULT_EMBEDDED_PORT = 1883
#: ``demo`` and ``web --demo``: the semi-final's 98 minutes of play in about 90 seconds.
DEMO_SPEED = 65.0

#: The panels every command shares; a command names its own (``"Timing"``) where it declares
#: its options. Options with no panel are listed first, under "Options".
BROKER_PANEL = "Broker"
OUTPUT_PANEL = "Output"
CHAOS_PANEL = "Chaos"


def rare(panel: str) -> dict[str, Any]:
    """The ``typer.Option`` arguments of a rare option: left out of ``--help``, shown in
    ``panel`` by ``--help-all``."""
    return {"rich_help_panel": panel, "hidden": True}


def _show_all_help(ctx: typer.Context, value: bool) -> None:
    """``--help-all``: the help with the rare options in it."""
    if not value or ctx.resilient_parsing:
        return
    rare_ones = [
        p
        for p in ctx.command.params
        if getattr(p, "hidden", False) and getattr(p, "rich_help_panel", None)
    ]
    for p in rare_ones:
        setattr(p, "hidden", False)  # noqa: B010 - click's Parameter does not declare it
    try:
        typer.echo(ctx.get_help())
    finally:
        for p in rare_ones:
            setattr(p, "hidden", True)  # noqa: B010
    raise typer.Exit


HelpAllOpt = Annotated[
    bool,
    typer.Option(
        "--help-all",
        is_eager=True,
        expose_value=False,
        callback=_show_all_help,
        help="Show every option, the rare ones too.",
    ),
]


# ---------------------------------------------------------------- values


def _range_words(low: float | None, high: float | None, kind: str) -> str:
    if low is not None and high is not None:
        return f"{kind} from {low:g} to {high:g}"
    if low is not None:
        return f"{kind} of {low:g} or more"
    if high is not None:
        return f"{kind} of {high:g} or less"
    return kind


def whole(low: int | None = None, high: int | None = None) -> Callable[[Any], int]:
    """A ``parser=`` for a whole number in ``[low, high]``."""
    words = _range_words(low, high, "a whole number")

    def parse(value: Any) -> int:
        if isinstance(value, int):
            return value
        try:  # ASCII digits only: int() takes fullwidth digits (events.whole_number says why)
            n = events.whole_number(str(value).strip())
        except ValueError:
            raise typer.BadParameter(f"must be {words}, not {quote(str(value))}") from None
        if (low is not None and n < low) or (high is not None and n > high):
            raise typer.BadParameter(f"must be {words}, not {quote(str(value))}")
        return n

    return parse


def number(low: float | None = None, high: float | None = None) -> Callable[[Any], float]:
    """A ``parser=`` for a finite number in ``[low, high]``."""
    words = _range_words(low, high, "a number")

    def parse(value: Any) -> float:
        if isinstance(value, int | float):
            return float(value)
        try:  # ASCII digits, finite: float() takes fullwidth digits, "nan" and "inf"
            x = events.decimal_number(str(value).strip())
        except ValueError:
            raise typer.BadParameter(f"must be {words}, not {quote(str(value))}") from None
        if (low is not None and x < low) or (high is not None and x > high):
            raise typer.BadParameter(f"must be {words}, not {quote(str(value))}")
        return x

    return parse


def choice(kind: type[E]) -> Callable[[Any], E]:
    """A ``parser=`` for one of the values of the enum ``kind``."""
    names = [str(m.value) for m in kind]
    words = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else names[0]

    def parse(value: Any) -> E:
        if isinstance(value, kind):
            return value
        for member in kind:
            if str(member.value) == str(value).lower():
                return member
        raise typer.BadParameter(f"must be {words}, not {quote(str(value))}")

    return parse


#: A TCP port: 0 lets the system choose a free one.
PORT = whole(0, 65535)


# ---------------------------------------------------------------- connection

_URL = "mqtt://\\[user:pass@]host:port or mqtts://..."


def _broker_option(list_means: str, default: str) -> Any:
    return typer.Option(
        "--broker",
        "-b",
        metavar="URL",
        help=f"{_URL}, or a comma-separated list {list_means}. Default $MATCHCAST_BROKER"
        f"{default}. A password here shows in ps: use ${ENV_PASSWORD}.",
        show_default=False,
        rich_help_panel=BROKER_PANEL,
    )


_FAILOVER = "of a cluster's nodes, for failover"
#: watch, consume and clear: they look for a broker where ``matchcast broker`` listens.
BrokerOpt = Annotated[
    str | None, _broker_option(_FAILOVER, f", else mqtt://127.0.0.1:{DEFAULT_EMBEDDED_PORT}")
]
#: replay: with no broker given it starts one of its own.
ReplayBrokerOpt = Annotated[
    str | None, _broker_option(_FAILOVER, ", else an embedded broker of its own on --port")
]
#: web: with no broker given it starts one of its own and replays a match on it.
WebBrokerOpt = Annotated[
    str | None, _broker_option(_FAILOVER, ", else its own broker, replaying a match (--demo)")
]
#: control: a replay to control is on a broker someone names.
ControlBrokerOpt = Annotated[str | None, _broker_option(_FAILOVER, "; one is needed")]
#: ``load`` and ``load-consumer``: a load test never falls back to an embedded broker, and
#: spreads its connections over a broker list.
LoadBrokerOpt = Annotated[str | None, _broker_option("to spread the connections over", "")]
CaFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--ca-file",
        metavar="FILE",
        help=f"PEM file of the CA of an mqtts:// broker (default ${ENV_CA_FILE}, else the "
        "system's CAs).",
        show_default=False,
        **rare(BROKER_PANEL),
    ),
]
CertFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--cert-file",
        metavar="FILE",
        help=f"PEM client certificate for an mqtts:// broker (default ${ENV_CERT_FILE}).",
        show_default=False,
        **rare(BROKER_PANEL),
    ),
]
KeyFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--key-file",
        metavar="FILE",
        help=f"PEM key of --cert-file (default ${ENV_KEY_FILE}).",
        show_default=False,
        **rare(BROKER_PANEL),
    ),
]
TlsInsecureOpt = Annotated[
    bool,
    typer.Option(
        "--tls-insecure",
        help="Do not check the broker's certificate: for test brokers only.",
        **rare(BROKER_PANEL),
    ),
]
ProtocolOpt = Annotated[
    str,
    typer.Option(
        "--protocol",
        metavar="auto|5|3.1.1",
        help="MQTT version; auto: 5, else 3.1.1 if the broker refuses or ignores 5.",
        **rare(BROKER_PANEL),
    ),
]
RootOpt = Annotated[
    str, typer.Option("--root", metavar="TOPIC", help="Topic root.", **rare(BROKER_PANEL))
]


def _client_option(help_text: str, panel: dict[str, Any]) -> Any:
    return typer.Option(
        "--client",
        parser=choice(ClientKind),
        metavar="fast|aiomqtt",
        help=help_text,
        show_default=False,
        **panel,
    )


#: consume, load and load-consumer, where the rate matters.
ClientOpt = Annotated[
    ClientKind,
    _client_option(
        "MQTT client: fast (the default here: measured at 6 to 20 times aiomqtt's rate, "
        "docs/architecture.md) or aiomqtt.",
        {"rich_help_panel": BROKER_PANEL},
    ),
]
#: watch and web: a view must keep up with a flood it does not show.
ViewClientOpt = Annotated[
    ClientKind,
    _client_option(
        "MQTT client: fast (the default here: under a flood it keeps no backlog of unread "
        "messages, 7 KB a tracked match against 14.6 on aiomqtt, docs/architecture.md) or "
        "aiomqtt.",
        rare(BROKER_PANEL),
    ),
]


def _qos_option(help_text: str, panel: dict[str, Any]) -> Any:
    return typer.Option("--qos", parser=whole(0, 2), metavar="0|1|2", help=help_text, **panel)


#: replay: consumers must see every event.
ReplayQosOpt = Annotated[
    int,
    _qos_option(
        "MQTT QoS of every message. 1: delivered at least once (consumers drop the "
        "duplicates by seq).",
        {"rich_help_panel": BROKER_PANEL},
    ),
]
#: load: its publishes, and its probes' subscriptions.
LoadQosOpt = Annotated[
    int,
    _qos_option(
        "MQTT QoS of every message. 0, the broker's top rate (as mosquitto_pub's default); "
        "1 as replay publishes.",
        {"rich_help_panel": BROKER_PANEL},
    ),
]
#: watch, consume and load-consumer: the QoS they subscribe with.
SubscriptionQosOpt = Annotated[int, _qos_option("Subscription QoS.", rare(BROKER_PANEL))]

LogFmtOpt = Annotated[
    str,
    typer.Option(
        "--log-format",
        metavar="auto|console|json",
        help="auto: console on a terminal, JSON otherwise.",
        **rare(OUTPUT_PANEL),
    ),
]
VerboseOpt = Annotated[
    int,
    typer.Option(
        "--verbose",
        "-v",
        count=True,
        help="More logs (-v info, -vv debug).",
        rich_help_panel=OUTPUT_PANEL,
    ),
]


# ---------------------------------------------------------------- matches and replayers


def _match_option(help_text: str) -> Any:
    return typer.Option("--match", metavar="ID", help=help_text)


#: watch and consume: the matches to follow.
MatchFilterOpt = Annotated[str, _match_option("Only this match id; '+' for all.")]
#: clear: whose retained topics.
ClearMatchOpt = Annotated[
    str | None, _match_option("Only this match's state and consumer reports.")
]
#: control: which of the replayer's matches a command is for.
ControlMatchOpt = Annotated[
    str | None, _match_option("Only this match (default: every match of the replayer).")
]


def _replayer_option(help_text: str) -> Any:
    return typer.Option("--replayer", metavar="ID", help=help_text, show_default=False)


#: replay: the id it publishes its status and takes commands under.
ReplayerIdOpt = Annotated[
    str | None, _replayer_option("This replayer's id, for control and status (default random).")
]
#: control: the replayer a command goes to.
ControlReplayerOpt = Annotated[
    str | None,
    _replayer_option(
        "The replayer to control (replay --replayer); optional with one online. Its status "
        "is read by its exact topic too (RabbitMQ 3.10 gives wildcards none)."
    ),
]
#: consume, watch, web and clear: replayers whose status names their matches.
ReplayersOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--replayer",
        metavar="ID",
        help="Also read this replayer's status, and its matches, by exact topic "
        "(repeatable): for brokers whose wildcards get no retained messages (RabbitMQ 3.10).",
        **rare(BROKER_PANEL),
    ),
]

ExitAtFullTimeOpt = Annotated[
    bool,
    typer.Option(
        "--exit-at-full-time",
        help="Exit when --match reaches full time in the run it follows (not on an "
        "earlier run's retained result, nor a replay stopped early); without --match, "
        "when every match it saw live has ended.",
    ),
]


def until_finished(exit_at_full_time: bool, match: str) -> set[str] | Literal["live"] | None:
    """What ``--exit-at-full-time`` waits for (``run_watch``'s ``until_finished``): the
    ``--match`` match, or, without one, every match seen live."""
    if not exit_at_full_time:
        return None
    return "live" if match == "+" else {match}


# ---------------------------------------------------------------- timing


def _speed_option(help_text: str, *, show_default: bool = True, panel: str | None = None) -> Any:
    return typer.Option(
        "--speed",
        metavar="N|max",
        # The range once, here: events.SPEED_RANGE is what parse_speed checks.
        help=help_text.replace(", or max", ", 0.01 to 1,000,000, or max", 1),
        show_default=show_default,
        rich_help_panel=panel,
    )


#: replay: its default depends on what it plays, so the help says it.
ReplaySpeedOpt = Annotated[
    str | None,
    _speed_option(
        "Match seconds per wall second, or max. Default 60 (a minute a second); for a "
        "recording, times as fast as recorded, default 1.",
        show_default=False,
    ),
]
#: demo: :data:`DEMO_SPEED` by default, the semi-final's 98 minutes in about 90 seconds.
DemoSpeedOpt = Annotated[
    str,
    _speed_option(
        "Match seconds per wall second (1 real time), or max; the default plays the "
        "semi-final in 90 s."
    ),
]
#: web: only its --demo replay has a speed.
WebDemoSpeedOpt = Annotated[
    str, _speed_option("Match seconds per wall second, or max.", panel="Demo replay")
]
#: load: None where not given (see matchcast.load.LoadArgs.honest).
LoadSpeedOpt = Annotated[
    str | None,
    _speed_option(
        "Match seconds per wall second per match (default 60), or max: a throughput test, "
        "its latency includes the sender's backlog.",
        show_default=False,
    ),
]
VerifySpeedOpt = Annotated[
    str,
    _speed_option("Match seconds per wall second of each scenario, or max.", panel="Scenarios"),
]


def _from_option(help_text: str, panel: str | None = None) -> Any:
    return typer.Option("--from", metavar="MINUTE", help=help_text, rich_help_panel=panel)


#: replay and demo: where the replay starts; checked by :func:`parse_from` and
#: :func:`check_start`.
FromOpt = Annotated[
    str | None, _from_option("Start at this minute (60, 90+2), with the state at that point.")
]
#: web: only its --demo replay has a start.
WebDemoFromOpt = Annotated[
    str | None, _from_option("Start at this minute, e.g. 60.", panel="Demo replay")
]


def _feed_option(panel: str | None = None, *, hidden: bool = False) -> Any:
    return typer.Option(
        "--feed",
        parser=choice(Feed),
        metavar="full|lean",
        help="full: every event, shots, saves, corners, fouls and offsides included (wire "
        "1.4); lean: the events of wire 1.3 (goals, cards, substitutions, ...).",
        rich_help_panel=panel,
        hidden=hidden,
    )


#: replay and demo: which events the replay sends (:func:`in_feeds`).
FeedOpt = Annotated[Feed, _feed_option()]
#: web: only its --demo replay has a feed.
WebDemoFeedOpt = Annotated[Feed, _feed_option("Demo replay")]
#: load: the feed of every match it plays, a rare option (its --help is full).
LoadFeedOpt = Annotated[Feed, _feed_option("Load shape", hidden=True)]


def in_feeds(sources: list[S], feed: Feed) -> list[S]:
    """The matches as ``feed`` carries them (:func:`simulator.in_feed`); a recording replays
    what it recorded, so the lean feed refuses one (exit 2)."""
    if feed is Feed.full:
        return sources
    if any(isinstance(s, Recording) for s in sources):
        fail("--feed lean applies to matches; a recording replays the events it recorded", 2)
    return [in_feed(s, feed) if isinstance(s, Match) else s for s in sources]


# ---------------------------------------------------------------- chaos

# replay and load: seeded faults (:mod:`matchcast.cli.chaos` writes their files).
ChaosOpt = Annotated[
    str | None,
    typer.Option(
        "--chaos",
        metavar="SPEC",
        help="Inject faults, e.g. duplicate=0.1,drop=0.05,reorder=0.1:4 (docs/chaos.md).",
        show_default=False,
        rich_help_panel=CHAOS_PANEL,
    ),
]
SeedOpt = Annotated[
    int,
    typer.Option(
        "--seed",
        parser=whole(),
        metavar="N",
        help="Seed of --chaos: the same seed, the same faults.",
        **rare(CHAOS_PANEL),
    ),
]
#: verify: the seed of its scenarios' faults.
VerifySeedOpt = Annotated[
    int,
    typer.Option(
        "--seed",
        parser=whole(),
        metavar="N",
        help="Seed of the scenarios' faults: the same seed, the same battery.",
        rich_help_panel="Scenarios",
    ),
]
ChaosLogOpt = Annotated[
    Path | None,
    typer.Option(
        "--chaos-log",
        metavar="FILE",
        help="Write every fault injected to this JSON Lines file.",
        **rare(CHAOS_PANEL),
    ),
]
TruthOpt = Annotated[
    Path | None,
    typer.Option(
        "--truth",
        metavar="FILE",
        help="Write the true final state of each match to this JSON file.",
        **rare(CHAOS_PANEL),
    ),
]


# ---------------------------------------------------------------- checks


def _brokers(option: str | None) -> tuple[BrokerURL, ...] | None:
    try:
        return broker_url_from(option)
    except ValueError as err:
        fail(str(err), 2)


def parse_protocol(value: str) -> Protocol:
    """The ``--protocol`` value, checked."""
    if value not in ("auto", "5", "3.1.1"):
        fail(f"--protocol must be auto, 5 or 3.1.1, not {quote(value)}", 2)
    return value  # type: ignore[return-value]


def connection_options(
    broker: str | None,
    ca_file: Path | None = None,
    cert_file: Path | None = None,
    key_file: Path | None = None,
    tls_insecure: bool = False,
) -> tuple[BrokerURL, ...] | None:
    """The brokers of ``--broker`` (else the environment; one URL or a comma-separated list)
    with their credentials and TLS options; None for the embedded broker. Unusable TLS files
    end the command with one line, exit 2."""
    given = _brokers(broker)
    flags = TLSOptions(ca_file, cert_file, key_file, insecure=tls_insecure)
    if given is None:
        if flags.given:
            fail("--ca-file, --cert-file, --key-file and --tls-insecure need --broker mqtts://", 2)
        return None
    try:
        urls = tuple(u.with_tls(flags) for u in given)
        for u in urls:
            u.context()  # bad files fail here, before anything connects
    except ValueError as err:
        fail(str(err), 2)
    shown = describe(urls)
    if broker and any(BrokerURL.parse(p.strip()).password for p in broker.split(",")):
        log.warning(
            "credentials.in_arguments",
            broker=shown,
            hint=f"other users see --broker in ps; put the password in ${ENV_PASSWORD}",
        )
    if urls[0].tls and urls[0].tls_options.insecure:
        log.warning("tls.insecure", broker=shown)
        stderr.print(
            f"warning: --tls-insecure: the certificate of {shown} is not checked; anyone on "
            "the path can read and change the stream",
            soft_wrap=True,
            markup=False,
        )
    return urls


def parse_topics(root: str) -> Topics:
    try:
        return Topics(root)
    except ValueError as err:
        fail(f"--root: {err}", 2)


def replayer_ids(values: list[str] | None, option: str = "--replayer") -> tuple[str, ...]:
    """The ``--replayer`` ids, each one topic level; a bad one ends the command (exit 2)."""
    for rid in values or ():
        problem = replayer_id_problem(rid)
        if problem is not None:
            fail(f"{option} {quote(rid)} {problem}", 2)
    return tuple(dict.fromkeys(values or ()))


def replayer_id(value: str | None, option: str = "--replayer") -> str | None:
    """One replayer id (``control --replayer``, ``replay --replayer``), checked as
    :func:`replayer_ids` checks each."""
    return None if value is None else replayer_ids([value], option)[0]


def match_filter(value: str) -> str:
    """``--match``: '+' or a match id; a wrong case is refused at once (ids are lower case),
    rather than waited for forever."""
    if value != "+" and not re.fullmatch(r"[a-z0-9][a-z0-9_.-]{0,63}", value):
        lower = value.lower()
        fits = len(lower) <= 64 and re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", lower)
        hint = f": try --match {lower}" if fits else ""
        fail(
            f"--match {quote(value)}: match ids are lower case letters, digits, _ . and -{hint}", 2
        )
    return value


def parse_speed(value: str, option: str = "--speed") -> float | None:
    """``--speed``: ``max`` (None) or a number in :data:`events.SPEED_RANGE` (1 is real time,
    60 a minute a second); anything else ends the command (exit 2) naming the range."""
    try:
        return events.parse_speed(value)
    except ValueError as err:
        said = str(err).removeprefix("speed ")
        fail(f"{option} {said} (1 is real time, 60 a minute a second)", 2)


def parse_number(value: str, option: str, low: float, high: float) -> float:
    """A number option given as text: ASCII digits (:func:`events.decimal_number`), finite,
    from ``low`` to ``high``; anything else ends the command (exit 2) naming the range."""
    try:
        return events.in_range(events.decimal_number(value.strip()), low, high, option)
    except ValueError:
        fail(
            f"{option} must be a number from {events.shown(low)} to {events.shown(high)}, "
            f"not {quote(value)}",
            2,
        )


def parse_from(value: str | None) -> MatchClock | None:
    """``--from``: a minute label in :func:`events.parse_minute`'s vocabulary, or a usage error.

    A minute past any match's end is :data:`events.END_OF_PLAY`, which :func:`check_start`
    refuses naming the last minute each match played."""
    if value is None:
        return None
    try:
        return parse_minute(value)
    except MinutePastPlayError:
        return END_OF_PLAY
    except ValueError:
        fail(f"--from must be a minute such as 60 or 90+2 in the digits 0-9, not {quote(value)}", 2)


def check_start(matches: list[Match | Recording], start: MatchClock | None, value: str) -> None:
    """Refuse a ``--from`` past the end of a match: it would publish nothing and exit 0."""
    if start is None:
        return
    from simulator import expand  # noqa: PLC0415

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
            fail(f"--from {value}: {where}; {valid}", 2)
        ends = [c for c in played if c.period is start.period]
        if ends and start.sort_key > max(c.sort_key for c in ends):
            end = max(ends, key=lambda c: c.sort_key).label
            fail(
                f"--from {value}: in {m.match_id} the {start.period.long_name} "
                f"ends at {end}; {valid}",
                2,
            )


def load_matches(spec: str | None) -> list[Match]:
    try:
        return resolve_matches(spec)
    except MatchFileError as err:
        fail(str(err), 2)


def load_sources(spec: str | None) -> list[Match | Recording]:
    try:
        return resolve_sources(spec)
    except MatchFileError as err:
        fail(str(err), 2)
