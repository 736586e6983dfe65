"""The one place for a command-line option: the typer options several commands share, and
the checks that turn their text into matchcast's values.

Each ``...Opt`` is an annotated type a command takes as a parameter (``broker: BrokerOpt =
None``); each ``parse_...`` checks a value and ends the command with one line, exit 2, when it
is wrong. A command that connects to a broker takes ``BrokerOpt`` plus ``CaFileOpt``,
``CertFileOpt``, ``KeyFileOpt`` and ``TlsInsecureOpt`` and gets its brokers from
:func:`connection_options`. Every default topic root is :data:`events.DEFAULT_ROOT` (``load``'s
is :data:`events.LOAD_ROOT`).
"""

from __future__ import annotations

import copy
import re
import typing
from pathlib import Path
from typing import Annotated, Any

import typer

from events import MatchClock, MatchFileError, Period, Topics, parse_minute, replayer_id_problem
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
from simulator import Match, Recording, resolve_matches, resolve_sources

__all__ = [
    "CLIENT_HELP",
    "DEFAULT_EMBEDDED_PORT",
    "DEMO_SPEED",
    "BrokerOpt",
    "CaFileOpt",
    "CertFileOpt",
    "ChaosLogOpt",
    "ChaosOpt",
    "ClearMatchOpt",
    "ClientOpt",
    "ControlMatchOpt",
    "DemoSpeedOpt",
    "ExitAtFullTimeOpt",
    "FromOpt",
    "KeyFileOpt",
    "LoadBrokerOpt",
    "LoadSpeedOpt",
    "LogFmtOpt",
    "MatchFilterOpt",
    "ProtocolOpt",
    "QosOpt",
    "ReplaySpeedOpt",
    "ReplayersOpt",
    "RootOpt",
    "SeedOpt",
    "SubscriptionQosOpt",
    "TlsInsecureOpt",
    "TruthOpt",
    "VerboseOpt",
    "VerifySeedOpt",
    "VerifySpeedOpt",
    "WebDemoFromOpt",
    "WebDemoSpeedOpt",
    "check_start",
    "connection_options",
    "in_panel",
    "load_matches",
    "load_sources",
    "match_filter",
    "parse_from",
    "parse_protocol",
    "parse_speed",
    "parse_topics",
    "replayer_id",
    "replayer_ids",
]

#: The port of the embedded broker, and where commands look for a broker when none is given.
DEFAULT_EMBEDDED_PORT = 1883
#: ``demo`` and ``web --demo``: the semi-final's 98 minutes of play in about 90 seconds.
DEMO_SPEED = 65.0

#: The help of ``--client`` (its default is each command's: aiomqtt where speed does not
#: matter, the fast client where it does).
CLIENT_HELP = (
    "MQTT client: fast (matchcast.fastmqtt, several times aiomqtt's rate) or aiomqtt "
    "(on paho). Both speak MQTT 5 and 3.1.1."
)

# Where one option reads differently in different commands (what it changes is not the same),
# a private factory declares it once and each variant below words its help.


ClientOpt = Annotated[ClientKind, typer.Option("--client", help=CLIENT_HELP)]


def _broker_option(help_text: str) -> Any:
    return typer.Option("--broker", "-b", help=help_text, show_default=False)


BrokerOpt = Annotated[
    str | None,
    _broker_option(
        "mqtt://\\[user:pass@]host:port or mqtts://...; a comma-separated list names the "
        "nodes of a cluster (the first that answers is used, the others on failover). "
        "Default $MATCHCAST_BROKER, else the embedded broker. A password here shows in ps: "
        "prefer $MATCHCAST_USERNAME and $MATCHCAST_PASSWORD."
    ),
]
#: ``load`` and ``load-consumer``: unlike the other commands, a load test never falls back to
#: the embedded broker, and it spreads its connections over a broker list.
LoadBrokerOpt = Annotated[
    str | None,
    _broker_option(
        "mqtt://\\[user:pass@]host:port or mqtts://...; a comma-separated list spreads "
        "the connections over the nodes round-robin. Default $MATCHCAST_BROKER."
    ),
]
CaFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--ca-file",
        help=f"PEM file of the CA that signed an mqtts:// broker's certificate "
        f"(default ${ENV_CA_FILE}, else the system's CAs).",
        show_default=False,
    ),
]
CertFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--cert-file",
        help=f"PEM client certificate for an mqtts:// broker (default ${ENV_CERT_FILE}).",
        show_default=False,
    ),
]
KeyFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--key-file",
        help=f"PEM key of --cert-file (default ${ENV_KEY_FILE}).",
        show_default=False,
    ),
]
TlsInsecureOpt = Annotated[
    bool,
    typer.Option(
        "--tls-insecure",
        help="Do not check the broker's certificate or name: anyone on the path can read and "
        "change the stream. For test brokers only.",
    ),
]
ProtocolOpt = Annotated[
    str,
    typer.Option(
        "--protocol",
        help="MQTT protocol: auto (5, else 3.1.1 if the broker refuses or ignores 5), 5 or 3.1.1.",
    ),
]
RootOpt = Annotated[str, typer.Option("--root", help="Topic root.")]
LogFmtOpt = Annotated[
    str,
    typer.Option(
        "--log-format", help="auto (console on a terminal, JSON otherwise), console or json."
    ),
]
VerboseOpt = Annotated[
    int, typer.Option("--verbose", "-v", count=True, help="More logs (-v info, -vv debug).")
]


def _qos_option(help_text: str) -> Any:
    return typer.Option("--qos", min=0, max=2, help=help_text)


#: replay and load: the QoS they publish (and load's probes subscribe) with.
QosOpt = Annotated[int, _qos_option("MQTT QoS of every message.")]
#: watch, consume and load-consumer: the QoS they subscribe with.
SubscriptionQosOpt = Annotated[int, _qos_option("Subscription QoS.")]


def _match_option(help_text: str) -> Any:
    return typer.Option("--match", help=help_text)


#: watch and consume: the matches to follow.
MatchFilterOpt = Annotated[str, _match_option("Only this match id; '+' for all.")]
#: clear: whose retained topics.
ClearMatchOpt = Annotated[
    str | None, _match_option("Only this match's state and consumer reports.")
]
#: control: which of the replayer's matches a command is for.
ControlMatchOpt = Annotated[str | None, _match_option("Only this match; all of the replayer's.")]
#: consume, watch, web and clear: replayers whose status names their matches.
ReplayersOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--replayer",
        metavar="ID",
        help="A replayer whose retained status is read by its exact topic, and the matches "
        "it lists with it (repeatable; `replay --replayer-id`): for brokers whose wildcard "
        "subscriptions get no retained messages (RabbitMQ 3.10).",
    ),
]

ExitAtFullTimeOpt = Annotated[
    bool,
    typer.Option(
        "--exit-at-full-time",
        help="Exit at the full time of the match (--match) in a run that is live when it "
        "joins or starts after; a finished state retained by an earlier run, or a replay "
        "stopped before full time, does not end it.",
    ),
]


def _speed_option(help_text: str, *, show_default: bool = True) -> Any:
    return typer.Option("--speed", help=help_text, show_default=show_default)


#: replay: its default depends on what it plays, so the help says it.
ReplaySpeedOpt = Annotated[
    str | None,
    _speed_option(
        "Match seconds per wall second (1 real time, 60 a minute a second), or 'max'. "
        "Default 60; for a recording, times faster than recorded, default 1.",
        show_default=False,
    ),
]
DemoSpeedOpt = Annotated[str, _speed_option("Match seconds per wall second, or 'max'.")]
#: web: only its --demo replay has a speed.
WebDemoSpeedOpt = Annotated[
    str, _speed_option("With --demo: match seconds per wall second, or 'max'.")
]
LoadSpeedOpt = Annotated[str, _speed_option("Match seconds per wall second per match, or max.")]
VerifySpeedOpt = Annotated[
    str, _speed_option("Match seconds per wall second of each scenario, or 'max'.")
]


def _from_option(help_text: str) -> Any:
    return typer.Option("--from", help=help_text)


#: replay and demo: where the replay starts; checked by :func:`parse_from` and
#: :func:`check_start`.
FromOpt = Annotated[
    str | None,
    _from_option("Start at this minute (e.g. 60, 90+2), publishing the state at that point first."),
]
#: web: only its --demo replay has a start.
WebDemoFromOpt = Annotated[str | None, _from_option("With --demo: start at this minute, e.g. 60.")]

# replay and load: seeded faults (:mod:`matchcast.cli.chaos` writes their files).
ChaosOpt = Annotated[
    str | None,
    typer.Option(
        "--chaos",
        help="Inject faults into each match's stream: a comma-separated SPEC of duplicate=P, "
        "reorder=P[:WINDOW], drop=P, delay=P:MS, stale-state=P, restart=MINUTE, correction=P, "
        "burst=MINUTE:SECONDS (docs/chaos.md).",
        show_default=False,
    ),
]


def _seed_option(help_text: str) -> Any:
    return typer.Option("--seed", help=help_text)


SeedOpt = Annotated[int, _seed_option("Seed of --chaos: the same seed, the same faults.")]
VerifySeedOpt = Annotated[
    int, _seed_option("Seed of the scenarios' faults: the same seed, the same battery.")
]
ChaosLogOpt = Annotated[
    Path | None,
    typer.Option("--chaos-log", help="Write every fault injected to this JSON Lines file."),
]
TruthOpt = Annotated[
    Path | None,
    typer.Option("--truth", help="Write the true final state of each match to this JSON file."),
]


def in_panel(option: Any, panel: str) -> Any:
    """The typer option of ``option`` (an ``...Opt`` above), listed under ``panel`` in one
    command's help (typer's ``rich_help_panel``); the declaration stays the one above::

        broker: Annotated[str | None, in_panel(BrokerOpt, "Connection")] = None
    """
    info = copy.copy(typing.get_args(option)[1])
    info.rich_help_panel = panel
    return info


# ---------------------------------------------------------------- checks


def _brokers(option: str | None) -> tuple[BrokerURL, ...] | None:
    try:
        return broker_url_from(option)
    except ValueError as err:
        fail(str(err), 2)


def parse_protocol(value: str) -> Protocol:
    """The ``--protocol`` value, checked."""
    if value not in ("auto", "5", "3.1.1"):
        fail(f"--protocol must be auto, 5 or 3.1.1, not {value!r}", 2)
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
            fail(f"{option} {rid!r} {problem}", 2)
    return tuple(dict.fromkeys(values or ()))


def replayer_id(value: str | None, option: str = "--replayer") -> str | None:
    """One replayer id (``control --replayer``, ``replay --replayer-id``), checked as
    :func:`replayer_ids` checks each."""
    return None if value is None else replayer_ids([value], option)[0]


def match_filter(value: str) -> str:
    """``--match``: '+' or a match id; a wrong case is refused at once (ids are lower case),
    rather than waited for forever."""
    if value != "+" and not re.fullmatch(r"[a-z0-9][a-z0-9_.-]{0,63}", value):
        lower = value.lower()
        hint = f": try --match {lower}" if re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", lower) else ""
        fail(f"--match {value!r}: match ids are lower case letters, digits, _ . and -{hint}", 2)
    return value


def parse_speed(value: str) -> float | None:
    if value.lower() == "max":
        return None
    try:
        speed = float(value)
    except ValueError:
        fail(
            f"--speed must be a number (1 is real time, 60 a minute a second) or 'max', "
            f"not {value!r}",
            2,
        )
    if not 0 < speed <= 1_000_000:
        fail(f"--speed must be above 0, not {value}", 2)
    return speed


def parse_from(value: str | None) -> MatchClock | None:
    """``--from``: a minute label in :func:`events.parse_minute`'s vocabulary, or a usage error."""
    if value is None:
        return None
    try:
        return parse_minute(value)
    except ValueError:
        fail(f"--from must be a minute such as 60 or 90+2, not {value!r}", 2)


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
