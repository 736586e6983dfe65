"""The typer options several commands share, in a module of their own.

``matchcast.cli`` and the ``cmd_*`` modules import them from here, so a command module can be
imported on its own (by a benchmark, say) without importing the CLI first.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from matchcast.mqtt import ENV_CA_FILE, ENV_CERT_FILE, ENV_KEY_FILE

__all__ = [
    "CLIENT_HELP",
    "BrokerOpt",
    "CaFileOpt",
    "CertFileOpt",
    "ClientKind",
    "KeyFileOpt",
    "LogFmtOpt",
    "MatchFilterOpt",
    "ProtocolOpt",
    "QosOpt",
    "RootOpt",
    "TlsInsecureOpt",
    "VerboseOpt",
]


class ClientKind(StrEnum):
    """Which MQTT client a command uses (``--client``)."""

    aiomqtt = "aiomqtt"
    fast = "fast"


#: The help of every command's ``--client``.
CLIENT_HELP = (
    "MQTT client: fast (matchcast.fastmqtt, several times aiomqtt's rate) or aiomqtt "
    "(on paho). Both speak MQTT 5 and 3.1.1."
)

BrokerOpt = Annotated[
    str | None,
    typer.Option(
        "--broker",
        "-b",
        help="mqtt://\\[user:pass@]host:port or mqtts://...; a comma-separated list names the "
        "nodes of a cluster (the first that answers is used, the others on failover). "
        "Default $MATCHCAST_BROKER, else the embedded broker. A password here shows in ps: "
        "prefer $MATCHCAST_USERNAME and $MATCHCAST_PASSWORD.",
        show_default=False,
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
RootOpt = Annotated[str, typer.Option("--root", help="Topic root.")]
MatchFilterOpt = Annotated[str, typer.Option("--match", help="Only this match id; '+' for all.")]
LogFmtOpt = Annotated[
    str,
    typer.Option(
        "--log-format", help="auto (console on a terminal, JSON otherwise), console or json."
    ),
]
VerboseOpt = Annotated[
    int, typer.Option("--verbose", "-v", count=True, help="More logs (-v info, -vv debug).")
]
QosOpt = Annotated[int, typer.Option("--qos", min=0, max=2, help="MQTT QoS of every message.")]
ProtocolOpt = Annotated[
    str,
    typer.Option(
        "--protocol",
        help="MQTT protocol: auto (5, else 3.1.1 if the broker refuses or ignores 5), 5 or 3.1.1.",
    ),
]
