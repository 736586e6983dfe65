"""The one place for a command-line option: each option is declared by one ``typer.Option(``
call, and an option several command modules take is declared in ``matchcast/cli/options.py``."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from matchcast.cli.host import app, command

ROOT = Path(__file__).parent.parent
OPTIONS_PY = "matchcast/cli/options.py"

#: Names that mean something else in different commands, so each meaning is declared where its
#: command is: how many declarations each has, and why they are not one.
HOMONYMS: dict[str, tuple[int, str]] = {
    "--match": (
        3,
        "a match id to follow (options.py), the match web --demo replays, the "
        "matches an openfootball import selects",
    ),
    "--host": (2, "the address the embedded broker binds, the address the page binds"),
    "--port": (
        3,
        "the embedded broker's port (broker), the one replay starts with no --broker, "
        "the page's port (web)",
    ),
    "--seed": (2, "the chaos seed of replay and load, the seed of a simulated match"),
    "--format": (2, "the AsyncAPI document's format, the format of simulated match files"),
    "--queue-size": (2, "events buffered per match by a consumer, updates buffered per browser"),
    "--shared-group": (2, "the group load's probes share, the group a load-consumer joins"),
    "--replayer": (
        2,
        "replayers whose statuses are read by name (repeatable: consume, watch, web, clear), "
        "the one replayer control commands go to",
    ),
    "--home": (
        2,
        "a simulated match's home team (a FIFA code), a StatsBomb import's home team name",
    ),
    "--list": (2, "the subscribers consume can run, the scenarios of verify"),
    "--report": (
        2,
        "the load test's report (load, load merge: one factory), verify's results: JSON files "
        "of two kinds",
    ),
    "--timeout": (
        2,
        "how long control waits for the replayer's answer, how long verify waits for the "
        "consumer after each scenario",
    ),
    "--date": (
        2,
        "the kickoff date written into a simulated match, a StatsBomb match's date "
        "when its files lack one",
    ),
}


def _is_option_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    return (isinstance(f, ast.Attribute) and f.attr == "Option") or (
        isinstance(f, ast.Name) and f.id == "Option"
    )


def _long_name(call: ast.Call, param: str | None) -> str:
    for arg in call.args:
        if isinstance(arg, ast.Constant) and str(arg.value).startswith("--"):
            return str(arg.value).split("/")[0]
    assert param is not None, f"a typer.Option( at line {call.lineno} names no option"
    return "--" + param.replace("_", "-")


def option_declarations() -> dict[str, list[str]]:
    """Each option's long name: the places (``file:line``) that declare it."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted((ROOT / "matchcast").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        param_of: dict[int, str] = {}  # an Option( call inside a parameter's annotation
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                for arg in [*fn.args.args, *fn.args.kwonlyargs]:
                    for node in ast.walk(arg.annotation) if arg.annotation else ():
                        if _is_option_call(node):
                            param_of[id(node)] = arg.arg
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _is_option_call(node):
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                found[_long_name(node, param_of.get(id(node)))].append(where)
    return found


def test_every_option_is_declared_in_one_place() -> None:
    """A second ``typer.Option("--broker", ...)`` (as ``load`` once had) fails here: take the
    option from ``cli/options.py``, or, if the name means something else in your command, add
    it to :data:`HOMONYMS` with the reason."""
    declared = option_declarations()
    wrong = {
        name: places
        for name, places in declared.items()
        if len(places) != HOMONYMS.get(name, (1, ""))[0]
    }
    assert wrong == {}
    assert set(HOMONYMS) <= set(declared)


def _command_modules() -> dict[str, set[str]]:
    """Each long option name: the command modules whose commands take it."""
    commands = getattr(command(), "commands", {})
    modules: dict[str, set[str]] = defaultdict(set)
    for info in app.registered_commands:
        assert info.callback is not None
        name = info.name or info.callback.__name__.replace("_", "-")
        for param in commands[name].params:
            for opt in [*param.opts, *param.secondary_opts]:
                if opt.startswith("--") and opt != "--help":
                    modules[opt].add(info.callback.__module__)
    return modules


def test_an_option_several_command_modules_take_is_declared_in_options_py() -> None:
    declared = option_declarations()
    shared = {n for n, mods in _command_modules().items() if len(mods) > 1 and n not in HOMONYMS}
    assert shared >= {"--broker", "--root", "--qos", "--log-format", "--client", "--from"}
    elsewhere = {n: declared[n] for n in shared if not declared[n][0].startswith(OPTIONS_PY)}
    assert elsewhere == {}


def test_the_scan_sees_options_named_by_their_parameter() -> None:
    """``typer.Option(help=...)`` takes its name from the parameter: the scan counts it too."""
    declared = option_declarations()
    assert any(p.startswith("matchcast/cli/web.py:") for p in declared["--port"])
    assert any(p.startswith("matchcast/cli/broker.py:") for p in declared["--host"])
