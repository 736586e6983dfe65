"""The one place for a command-line option: each option is declared by one ``typer.Option(``
call, and an option several command modules take is declared in ``matchcast/cli/options.py``."""

from __future__ import annotations

import ast
import shlex
from collections import defaultdict
from pathlib import Path

import pytest

from matchcast.cli.host import COMMANDS, load_command
from tests._cli import run_cli

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
    "--seed": (
        3,
        "the chaos seed of replay and load, the seed of a simulated match, the seed of "
        "verify's scenarios",
    ),
    "--format": (2, "the AsyncAPI document's format, the format of simulated match files"),
    "--queue-size": (2, "events buffered per match by a consumer, updates buffered per browser"),
    "--shared-group": (2, "the group load's probes share, the group a load-consumer joins"),
    "--replayer": (
        2,
        "replayers whose statuses are read by name (repeatable: consume, watch, web, clear), "
        "one replayer's id (the one control commands go to, the one replay takes); both in "
        "options.py",
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
    modules: dict[str, set[str]] = defaultdict(set)
    for name, spec in COMMANDS.items():
        for param in load_command(name).params:
            for opt in [*param.opts, *param.secondary_opts]:
                if opt.startswith("--") and opt not in ("--help", "--help-all"):
                    modules[opt].add(spec.module)
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


def _example_args(name: str) -> list[str]:
    """The arguments of ``name``'s help example after the command name (the required ones)."""
    words = shlex.split(COMMANDS[name].example.split(" > ")[0])
    return words[words.index("matchcast") + 1 + len(name.split()) :]


def test_a_wrong_number_or_choice_is_refused_in_matchcast_s_words() -> None:
    """Every option that takes a value, given one no number or choice can be: refused with a
    line that says what it takes (``must be ...``), never the validation library's wording
    ("Input should be ...", "Value error, ...")."""
    import typer

    seen: set[str] = set()
    for name in COMMANDS:
        cmd = load_command(name)
        for param in cmd.params:
            takes_value = not (getattr(param, "is_flag", False) or getattr(param, "count", False))
            if param.param_type_name != "option" or not takes_value:
                continue
            try:
                cmd.make_context(name, [*_example_args(name), param.opts[0], "nan%"])
            except typer.BadParameter as err:
                message = err.format_message()
                assert message.startswith(f"Invalid value for '{param.opts[0]}'"), message
                assert ": must be " in message, (name, message)
                assert "Input should" not in message and "Value error" not in message
                seen.add(param.opts[0])
    assert {"--qos", "--port", "--matches", "--timeout", "--client", "--seed"} <= seen


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["replay", "--qos", "3"], "--qos': must be a whole number from 0 to 2, not '3'"),
        (["watch", "--qos", "-1"], "--qos': must be a whole number from 0 to 2, not '-1'"),
        (["load", "--qos", "3"], "--qos': must be a whole number from 0 to 2"),
        (["web", "--port", "70000"], "--port': must be a whole number from 0 to 65535"),
        (["broker", "--port", "-1"], "--port': must be a whole number from 0 to 65535"),
        (["load", "--matches", "0"], "--matches' / '-k': must be a whole number of 1 or more"),
        (["control", "status", "--timeout", "0"], "--timeout': must be a number of 0.1 or more"),
        (["replay", "--break-seconds", "nan"], "--break-seconds': must be a number from 0 to 3600"),
        (["watch", "--client", "nope"], "--client': must be aiomqtt or fast, not 'nope'"),
        (["asyncapi", "--format", "x"], "--format' / '-f': must be yaml or json, not 'x'"),
        (["simulate", "--count", "20000"], "--count': must be a whole number from 1 to 10000"),
    ],
)
def test_an_out_of_range_value_names_the_option_and_what_it_takes(
    args: list[str], says: str
) -> None:
    """What ``main`` prints after ``error:`` (exit 2), from the command's own parsing."""
    import typer

    name, *rest = args
    with pytest.raises(typer.BadParameter) as info:
        load_command(name).make_context(name, rest)
    assert info.value.exit_code == 2
    assert info.value.format_message().startswith(f"Invalid value for '{says}")


def test_replay_takes_its_id_as_replayer_and_as_the_old_replayer_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--replayer`` is the one name; ``--replayer-id`` still works for one release, hidden,
    with a line saying so."""
    import matchcast.cli.replay as replay_cli

    given: list[str | None] = []

    async def fake_replay(*_args: object, replayer_id: str | None, **_kw: object) -> list[object]:
        given.append(replayer_id)
        return []

    monkeypatch.setattr(replay_cli, "run_replay", fake_replay)
    broker = "mqtt://127.0.0.1:9"  # never reached: the replay is a fake
    new = run_cli("replay", "--broker", broker, "--replayer", "tv")
    old = run_cli("replay", "--broker", broker, "--replayer-id", "tv2")
    assert (new.code, old.code) == (0, 0), (new.stderr, old.stderr)
    assert given == ["tv", "tv2"]
    assert "warning: --replayer-id is now --replayer" in old.stderr
    assert "--replayer-id" not in new.stderr
    both = run_cli("replay", "--broker", broker, "--replayer", "a", "--replayer-id", "b")
    assert both.code == 2
    assert "--replayer and --replayer-id name the same thing" in both.stderr
