"""Finding and building plug-ins: module:attribute, .py files, entry points, options."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from consumers import (
    PluginError,
    Recorder,
    Scoreboard,
    Subscriber,
    installed_plugins,
    load_plugin,
    plugin_label,
    split_options,
)

ALERTS = '''
"""Goal alerts."""
from consumers import Subscriber
from events import Goal, MatchState

sub = Subscriber("goal-alerts")

@sub.on(Goal)
async def alert(event: Goal, state: MatchState) -> None:
    print(f"{event.clock.label} {event.scorer} - now {state.score}")
'''

CLASSES = '''
from pathlib import Path
from consumers import Subscriber, on
from events import Goal, MatchState

class Counter(Subscriber):
    """Counts goals above a threshold."""

    def __init__(self, threshold: int, loud: bool = False, out: Path = Path("x")) -> None:
        super().__init__()
        self.threshold, self.loud, self.out = threshold, loud, out

    @on(Goal)
    def count(self, event: Goal, state: MatchState) -> None: ...

def make(name: str = "made") -> Subscriber:
    return Subscriber(name)

class Wrapper:
    def __init__(self) -> None:
        self.subscriber = Subscriber("wrapped")

wrapped = Wrapper()
not_a_subscriber = 42
'''


def write(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


@pytest.fixture
def modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory on sys.path holding alerts_mod.py and classes_mod.py."""
    write(tmp_path, "alerts_mod.py", ALERTS)
    write(tmp_path, "classes_mod.py", CLASSES)
    write(
        tmp_path,
        "two_subs.py",
        "from consumers import Subscriber\na = Subscriber('a')\nb = Subscriber('b')\n",
    )
    write(tmp_path, "no_subs.py", "x = 1\n")
    write(tmp_path, "broken.py", "import events\n\nundefined_name + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_module_attribute_names_a_subscriber(modules: Path) -> None:
    sub = load_plugin("alerts_mod:sub")
    assert sub.name == "goal-alerts"
    assert [r.name for r in sub.registrations] == ["alert"]


def test_a_module_without_attribute_gives_its_one_subscriber(modules: Path) -> None:
    assert load_plugin("alerts_mod").name == "goal-alerts"


def test_a_py_file_path_loads_without_being_on_sys_path(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    path = write(tmp_path / "elsewhere", "my_alerts.py", ALERTS)
    assert load_plugin(str(path)).name == "goal-alerts"
    assert load_plugin(f"{path}:sub").name == "goal-alerts"
    assert load_plugin(str(path)) is not load_plugin(str(path)), "each load is a fresh module"


def test_a_class_or_function_is_built_with_options_converted_to_its_types(modules: Path) -> None:
    sub = load_plugin("classes_mod:Counter", {"threshold": "3", "loud": "yes", "out": "a/b.jsonl"})
    assert isinstance(sub, Subscriber)
    assert (sub.threshold, sub.loud, sub.out) == (3, True, Path("a/b.jsonl"))  # type: ignore[attr-defined]
    assert sub.name == "counter"
    assert load_plugin("classes_mod:make", {"name": "x"}).name == "x"
    assert load_plugin("classes_mod:wrapped").name == "wrapped"


def test_options_also_come_from_the_environment(modules: Path) -> None:
    env = {"MATCHCAST_COUNTER_THRESHOLD": "7", "MATCHCAST_COUNTER_LOUD": "1"}
    sub = load_plugin("classes_mod:Counter", {"loud": "false"}, environ=env)
    assert (sub.threshold, sub.loud) == (7, False)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("spec", "options", "message"),
    [
        (
            "classes_mod:Counter",
            {},
            r"needs option threshold \(--opt Counter.threshold=VALUE"
            r" or \$MATCHCAST_COUNTER_THRESHOLD\)",
        ),
        ("classes_mod:Counter", {"threshold": "many"}, "option threshold='many': .*integer"),
        (
            "classes_mod:Counter",
            {"threshold": "1", "colour": "red"},
            r"no option colour \(its options: threshold, loud, out\)",
        ),
        ("alerts_mod:sub", {"x": "1"}, "takes no options .* ready-made subscriber"),
        ("classes_mod:not_a_subscriber", {}, "is not a Subscriber"),
        ("classes_mod:missing", {}, "has no attribute 'missing'"),
        ("two_subs", {}, r"several subscribers \(a, b\): add :NAME"),
        ("no_subs", {}, "defines no Subscriber"),
        (
            "broken",
            {},
            r"importing it failed: NameError: name 'undefined_name' is not defined"
            r" \(broken.py, line 3\)",
        ),
        ("nowhere_mod:sub", {}, "no module named 'nowhere_mod'"),
        ("no-such-plugin", {}, r"no installed subscriber of that name \(installed: .*recorder.*\)"),
        ("./missing.py", {}, "no such file"),
    ],
)
def test_a_plugin_that_cannot_be_used_says_why(
    modules: Path, spec: str, options: dict[str, str], message: str
) -> None:
    with pytest.raises(PluginError, match=message) as info:
        load_plugin(spec, options)
    assert info.value.plugin == spec


def test_the_built_ins_are_installed_entry_points(tmp_path: Path) -> None:
    installed = {p.name: p for p in installed_plugins()}
    assert {"scoreboard", "ticker", "recorder", "stats"} <= set(installed)
    assert installed["recorder"].target == "consumers.recorder:Recorder"
    assert installed["recorder"].package.startswith("matchcast ")
    assert "path=matchcast-recording.jsonl" in installed["recorder"].options
    assert installed["scoreboard"].summary.startswith("Keeps the latest MatchState")
    assert all(p.error is None for p in installed.values())
    rec = load_plugin("recorder", {"path": str(tmp_path / "r.jsonl")})
    assert isinstance(rec, Recorder)
    assert rec.path == tmp_path / "r.jsonl"
    assert isinstance(load_plugin("scoreboard"), Scoreboard)


def test_labels_and_option_scopes() -> None:
    assert plugin_label("recorder") == "recorder"
    assert plugin_label("pkg.alerts:sub") == "sub"
    assert plugin_label("./x/alerts.py") == "alerts"
    assert plugin_label("pkg.alerts") == "alerts"
    specs = ["recorder", "pkg.mod:Thing"]
    assert split_options(specs, ["recorder.path=a=b.jsonl", "Thing.n=1", "pkg.mod:Thing.m=2"]) == [
        {"path": "a=b.jsonl"},
        {"n": "1", "m": "2"},
    ]
    assert split_options(["recorder"], ["path=x"]) == [{"path": "x"}]
    with pytest.raises(PluginError, match="say which plug-in"):
        split_options(specs, ["path=x"])
    with pytest.raises(PluginError, match="not one of the plug-ins given"):
        split_options(specs, ["ticker.x=1"])
    with pytest.raises(PluginError, match=r"PLUGIN\.KEY=VALUE"):
        split_options(specs, ["recorder.path"])


def test_a_syntax_error_names_its_place_once(tmp_path: Path) -> None:
    path = write(tmp_path, "typo.py", "def alert(:\n    pass\n")
    with pytest.raises(PluginError) as info:
        load_plugin(str(path), {})
    message = str(info.value)
    assert message.endswith("importing it failed: SyntaxError: invalid syntax (typo.py, line 1)")
    assert message.count("line 1") == 1
