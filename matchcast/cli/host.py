"""The ``matchcast`` command line: the typer app, its table of commands, and ``main``.

Each command group is a module of this package with a ``register(app)``; :data:`COMMANDS` says
which module holds each command, with its one-line summary, its example and its panel in
``matchcast --help``. A command's module is imported only when that command runs (or shows its
help): ``matchcast --version`` and ``matchcast --help`` import no command at all, so they
answer in the time Python and typer take to start (``benchmarks/startup_bench.py``), not in the
seconds pydantic, the MQTT clients and the rest take.

The options the commands share, and their checks, are :mod:`matchcast.cli.options`; ending in
one clear line, running a coroutine and the logs are :mod:`matchcast.cli.common`. Bad arguments
and unreachable brokers end in one clear line on standard error and a non-zero exit (2 for bad
input, 1 for a runtime failure), never a traceback.

This module imports nothing heavier than typer: keep it so (``tests/test_cli_startup.py``).
"""

from __future__ import annotations

import functools
import importlib
import sys
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from typer.core import TyperCommand, TyperGroup

__all__ = [
    "COMMANDS",
    "EXIT_CODES",
    "CommandExit",
    "CommandSpec",
    "app",
    "command",
    "load_command",
    "main",
]

EXIT_CODES = (
    "Exit codes: 0 done; 1 a runtime failure (an unreachable broker); 2 bad input (arguments, "
    "match files); 3 a load test's --check or --verify-state failed, or nothing was delivered, "
    "or a verify scenario failed; "
    "130 interrupted. Ctrl-C is how watch, web, consume and broker end (exit 0); it interrupts "
    "demo, replay and load (exit 130). clear exits 1 when its question is answered no."
)


class CommandExit(Exception):  # noqa: N818 - control flow, not an error
    """Ends a command with exit ``code`` once its message is out (:func:`main` exits with it)."""

    def __init__(self, code: int) -> None:
        self.code = code


@dataclass(frozen=True)
class CommandSpec:
    """One command: where it is defined and how ``matchcast --help`` lists it.

    Attributes:
        module: the command module whose ``register(app)`` adds it.
        summary: the first line of its help, and its line in ``matchcast --help``.
        example: a command line shown at the end of its help, that runs as written on a fresh
            machine (after ``pip install matchcast``) given what ``needs`` says
            (``tests/test_cli_help.py`` runs them, or parses those that need a live broker).
        panel: the group ``matchcast --help`` lists it under.
        needs: what must be there for the example to run, said before it ("with ``matchcast
            replay`` running"); empty when nothing is.
        hidden: left out of ``matchcast --help`` (``load merge``, reached as ``load merge``).
    """

    module: str
    summary: str
    example: str
    panel: str
    needs: str = ""
    hidden: bool = False


_WATCH = "Replay and watch"
_OPERATE = "Operate a broker"
_MATCHES = "Match files and the contract"
_LOAD = "Load testing"
_GRADE = "Grade a consumer"
_REPLAYING = "with `matchcast replay` running"

#: Every command, in the order ``matchcast --help`` lists them.
COMMANDS: dict[str, CommandSpec] = {
    "demo": CommandSpec(
        "matchcast.cli.replay",
        "Replay a match with its own broker and a live scoreboard.",
        "matchcast demo worldcup:2022/final --from 80",
        _WATCH,
    ),
    "replay": CommandSpec(
        "matchcast.cli.replay",
        "Replay matches onto a broker on a timed schedule.",
        "matchcast replay semifinal --speed 120",
        _WATCH,
    ),
    "watch": CommandSpec(
        "matchcast.cli.watch",
        "Follow a broker's matches on a live scoreboard and ticker.",
        "matchcast watch --match wc2026-sf-arg-eng --exit-at-full-time",
        _WATCH,
        needs=_REPLAYING,
    ),
    "web": CommandSpec(
        "matchcast.cli.web",
        "Serve a live match page (scoreboard, ticker) to browsers.",
        "matchcast web --match worldcup:2022/final --from 80 --port 8000",
        _WATCH,
    ),
    "control": CommandSpec(
        "matchcast.cli.control",
        "Pause, resume, seek, speed, stop or ask a running replay.",
        "matchcast control seek 85 --broker mqtt://127.0.0.1:1883",
        _WATCH,
        needs=_REPLAYING,
    ),
    "consume": CommandSpec(
        "matchcast.cli.consume",
        "Run subscriber plug-ins on the live stream.",
        "matchcast consume recorder -o recorder.path=match.jsonl --match wc2026-sf-arg-eng",
        _WATCH,
        needs=_REPLAYING,
    ),
    "broker": CommandSpec(
        "matchcast.cli.broker",
        "Run the embedded broker (MQTT 3.1.1, no auth) until Ctrl-C.",
        "matchcast broker --port 1884",
        _OPERATE,
    ),
    "clear": CommandSpec(
        "matchcast.cli.clear",
        "List and remove matchcast's retained topics on a broker.",
        "matchcast clear --match wc2026-sf-arg-eng --yes",
        _OPERATE,
        needs="with a broker on 127.0.0.1:1883 (or $MATCHCAST_BROKER)",
    ),
    "simulate": CommandSpec(
        "matchcast.cli.matches",
        "Generate simulated matches (Poisson goals, cards, subs).",
        "matchcast simulate --home BRA --away GER --seed 7 --knockout -o bra-ger.yaml",
        _MATCHES,
    ),
    "import": CommandSpec(
        "matchcast.cli.matches",
        "Import openfootball or StatsBomb data into match files.",
        "matchcast import openfootball worldcup.json --match final -o final.yaml",
        _MATCHES,
        needs="with openfootball's worldcup.json",
    ),
    "schema": CommandSpec(
        "matchcast.cli.schema",
        "Print the JSON Schema of the events, state or match files.",
        "matchcast schema --state > state.schema.json",
        _MATCHES,
    ),
    "asyncapi": CommandSpec(
        "matchcast.cli.schema",
        "Print the AsyncAPI 3.0 document of the topics and messages.",
        "matchcast asyncapi > asyncapi.yaml",
        _MATCHES,
    ),
    "load": CommandSpec(
        "matchcast.cli.load",
        "Drive many matches onto a broker and measure the delivery.",
        "matchcast load --spawn-mosquitto --matches 50 --duration 5 --check 'p99 < 250ms' "
        "--check 'lost == 0' --report r.json",
        _LOAD,
        needs="with mosquitto installed",
    ),
    "load merge": CommandSpec(
        "matchcast.cli.load",
        "Combine the reports of load shards into one, exactly.",
        "matchcast load merge shard-0.json shard-1.json --report all.json",
        _LOAD,
        needs="with the reports of `load --shard 0/2` and `--shard 1/2`",
        hidden=True,
    ),
    "load-consumer": CommandSpec(
        "matchcast.cli.load",
        "Run a consumer under load: metrics on HTTP, states reported.",
        "matchcast load-consumer --consumer-id c1 --broker mqtt://127.0.0.1:1883",
        _LOAD,
        needs="with a broker there",
    ),
    "verify": CommandSpec(
        "matchcast.cli.verify",
        "Grade a consumer against seeded faults: a scorecard, JUnit, exit 3 on a failure.",
        "matchcast verify --consumer my-app --broker mqtt://127.0.0.1:1883 --junit verify.xml",
        _GRADE,
        needs="with your consumer running and reporting its states (docs/verify.md)",
    ),
}


def _tidy(cmd: Any) -> None:
    """A help without typer's type labels where they say nothing: a flag shows no
    ``<bool>``, a counted ``-v`` no ``<int>`` nor default, an argument (named by its
    metavar) no ``<list[str]>``."""
    for param in cmd.get_params(typer.Context(cmd)):
        if getattr(param, "is_flag", False) or getattr(param, "count", False):
            param.metavar = ""
        if getattr(param, "count", False):
            param.show_default = False
        if param.param_type_name == "argument" and param.metavar:
            param.display_type_rich = lambda ctx: None


@functools.cache
def _module_commands(module: str) -> dict[str, Any]:
    """The click commands ``module`` registers, each with its summary and example."""
    sub = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    importlib.import_module(module).register(sub)
    group = typer.main.get_group(sub)
    more = {
        info.name or info.callback.__name__.replace("_", "-"): info.help
        for info in sub.registered_commands
        if info.callback is not None
    }
    for name, cmd in group.commands.items():
        spec = COMMANDS[name]
        # The summary is said once, here; a command's own help= adds its paragraphs.
        cmd.help = spec.summary + (f"\n\n{more[name]}" if more.get(name) else "")
        cmd.epilog = f"Example{', ' + spec.needs if spec.needs else ''}: {spec.example}"
        _tidy(cmd)
    return dict(group.commands)


def load_command(name: str) -> Any:
    """The click command ``name``, its module imported now."""
    return _module_commands(COMMANDS[name].module)[name]


class _LazyGroup(TyperGroup):
    """The root group: lists :data:`COMMANDS` without importing them, and imports a
    command's module only once it is the command to run."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        for name, spec in COMMANDS.items():
            # A stand-in that only lists: its summary, its panel.
            self.commands[name] = TyperCommand(
                name, help=spec.summary, hidden=spec.hidden, rich_help_panel=spec.panel
            )

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The commands, a section per panel (plain text: see :data:`app`)."""
        shown = {name: spec for name, spec in COMMANDS.items() if not spec.hidden}
        width = max(map(len, shown))
        panels: dict[str, list[tuple[str, str]]] = {}
        for name, spec in shown.items():  # one column width for all: the panels line up
            panels.setdefault(spec.panel, []).append((name.ljust(width), spec.summary))
        for panel, rows in panels.items():
            with formatter.section(panel):
                formatter.write_dl(rows)

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        name, cmd, rest = super().resolve_command(ctx, args)
        return name, (load_command(name) if name is not None else cmd), rest


#: ``rich_markup_mode=None``: ``matchcast --help`` is plain text, as click writes it. Rendered by
#: rich (as each command's own help is), it took 0.45 s of CPU, two thirds of it importing
#: what typer's rich help imports (rich.markdown, rich.traceback and pygments, attrs).
app = typer.Typer(
    cls=_LazyGroup,
    rich_markup_mode=None,
    name="matchcast",
    help="Replay football matches minute by minute onto an MQTT broker, and watch them.\n\n"
    "matchcast COMMAND --help shows a command's usual options; --help-all shows them all.",
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


def command() -> Any:
    """The click group of :data:`app`, as ``main`` runs it."""
    cmd = typer.main.get_command(app)
    _tidy(cmd)
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
    except typer.Abort:  # click's word for a Ctrl-C it caught
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    except typer.TyperException as err:
        if type(err).__name__ == "NoArgsIsHelpError":  # the help is already printed
            sys.exit(2)
        ctx = getattr(err, "ctx", None)
        where = f" (see {ctx.command_path} --help)" if ctx is not None else ""
        sys.stderr.write(f"error: {err.format_message()}{where}\n")
        sys.exit(getattr(err, "exit_code", 2))
    if code == 130:  # typer's word for a Ctrl-C it caught (before a command's loop ran)
        sys.stderr.write("interrupted\n")
    sys.exit(code if isinstance(code, int) else 0)
