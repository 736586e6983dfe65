"""The ``matchcast`` command line: the typer app every command group adds its commands to.

Each command group is a module of this package with a ``register(app)`` (:data:`COMMAND_MODULES`);
the options they share, and their checks, are :mod:`matchcast.cli.options`; ending in one clear
line, running a coroutine and the logs are :mod:`matchcast.cli.common`. Bad arguments and
unreachable brokers end in one clear line on standard error and a non-zero exit (2 for bad input,
1 for a runtime failure), never a traceback.
"""

from __future__ import annotations

import importlib
import sys
from typing import Annotated, Any

import typer

from matchcast.cli.common import CommandExit, stderr

__all__ = ["EXAMPLES", "EXIT_CODES", "app", "command", "main"]

EXIT_CODES = (
    "Exit codes: 0 done; 1 a runtime failure (an unreachable broker); 2 bad input (arguments, "
    "match files); 3 a load test's --check or --verify-state failed, or nothing was delivered, "
    "or a verify scenario failed; "
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
    "verify": "matchcast verify --consumer my-app -b mqtt://127.0.0.1:1883 --junit verify.xml",
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
    except CommandExit as e:
        sys.exit(e.code)
    except typer.Abort:
        sys.exit(130)
    except typer.TyperException as err:
        if type(err).__name__ == "NoArgsIsHelpError":  # the help is already printed
            sys.exit(2)
        ctx = getattr(err, "ctx", None)
        where = f" (see {ctx.command_path} --help)" if ctx is not None else ""
        stderr.print(f"error: {err.format_message()}{where}", markup=False, soft_wrap=True)
        sys.exit(getattr(err, "exit_code", 2))
    sys.exit(code if isinstance(code, int) else 0)


#: The command groups, in the order their commands are listed; each module defines
#: ``register(app: typer.Typer)``. A command takes its options from
#: :mod:`matchcast.cli.options` and its helpers from :mod:`matchcast.cli.common`, never
#: another command module's private names.
COMMAND_MODULES: tuple[str, ...] = (
    "matchcast.cli.replay",
    "matchcast.cli.watch",
    "matchcast.cli.broker",
    "matchcast.cli.schema",
    "matchcast.cli.clear",
    "matchcast.cli.consume",
    "matchcast.cli.control",
    "matchcast.cli.load",
    "matchcast.cli.matches",
    "matchcast.cli.web",
    "matchcast.cli.verify",
)


def _register_commands() -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(app)


_register_commands()
