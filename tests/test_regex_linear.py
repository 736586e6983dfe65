"""Every regular expression that can see outside input runs in time linear in it.

``matchcast/redact.py``'s URL pattern once took 8 s on 20,000 letters (quadratic: it could
start at every letter and ran to the end from each), and every log line went through it. The
table below holds every pattern in events/, simulator/, consumers/ and matchcast/ (a test reads
the source and fails on one that is not in it), each with the call the code makes. A property
test feeds each one 1 MB of adversarial text: long runs of letters, digits, spaces and of the
pattern's own special characters, and near-matches repeated. A linear pattern takes
milliseconds on it; the bound is two seconds, or a hundred times what a linear reference
pattern takes on the same text in the same run, whichever is larger, so machine load cannot
break it and only a super-linear pattern does. A timer stops a runaway match at the bound
(``re`` checks for signals as it goes), so a regression fails instead of hanging.
"""

from __future__ import annotations

import ast
import re
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import Field, TypeAdapter, ValidationError

from consumers import _deadletter, _plugins
from matchcast import redact
from matchcast.load import _checks, _merge, _stages
from matchcast.web import _server
from simulator import _problems, _schemes
from simulator.importers import openfootball

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("events", "simulator", "consumers", "matchcast")
SIZE = 1_000_000
_RE_CALLS = {
    "compile",
    "match",
    "search",
    "sub",
    "subn",
    "fullmatch",
    "findall",
    "finditer",
    "split",
}


@dataclass(frozen=True)
class Case:
    """A pattern of the code, and the call the code makes with it on a text."""

    pattern: str
    call: Callable[[str], Any]
    near: tuple[str, ...] = ()  # near-matches: repeated, each is no match


def _pydantic(pattern: str) -> Callable[[str], Any]:
    """Validation against ``Field(pattern=...)``, with the engine pydantic uses for it."""
    adapter: TypeAdapter[str] = TypeAdapter(Annotated[str, Field(pattern=pattern)])

    def call(text: str) -> Any:
        try:
            return adapter.validate_python(text)
        except ValidationError:
            return None

    return call


def _re(pattern: str, method: str, *args: Any) -> Callable[[str], Any]:
    compiled = re.compile(pattern)
    return lambda text: getattr(compiled, method)(*args, text)


def _compiled(compiled: re.Pattern[str], method: str, *args: Any) -> Case:
    return Case(compiled.pattern, lambda text: getattr(compiled, method)(*args, text))


CASES: dict[str, Case] = {
    # events/ and the state: pydantic's patterns (Field(pattern=...))
    "match id": Case(r"^[a-z0-9][a-z0-9_.-]*$", _pydantic(r"^[a-z0-9][a-z0-9_.-]*$"), ("a-",)),
    "team code": Case(r"^[A-Z0-9]{2,5}$", _pydantic(r"^[A-Z0-9]{2,5}$"), ("ARGEN",)),
    "schema version": Case(r"^\d+\.\d+$", _pydantic(r"^\d+\.\d+$"), ("1.", "1.3.")),
    "request id": Case(r"^[A-Za-z0-9_.-]+$", _pydantic(r"^[A-Za-z0-9_.-]+$"), ("a_!",)),
    "kickoff utc offset": Case(
        r"^[+-](0[0-9]|1[0-4]):[0-5][0-9]$",
        _pydantic(r"^[+-](0[0-9]|1[0-4]):[0-5][0-9]$"),
        ("+03:", "+03:0"),
    ),
    # simulator/
    "openfootball time": Case(
        openfootball._TIME.pattern, _pydantic(openfootball._TIME.pattern), ("18:00 UTC+",)
    ),
    "openfootball time (re)": _compiled(openfootball._TIME, "match"),
    "openfootball utc offset": Case(
        r"[+-](0[0-9]|1[0-4]):[0-5][0-9]",
        _re(r"[+-](0[0-9]|1[0-4]):[0-5][0-9]", "fullmatch"),
        ("+03:",),
    ),
    "openfootball digit runs": Case(r"([0-9]+)", _re(r"([0-9]+)", "split")),
    "openfootball world cup": Case(
        r"world\s*cup",
        openfootball._world_cup_year,
        ("worldcup ", "world cup 202", "world  "),
    ),
    "slug words": Case(r"[a-z0-9]+", _re(r"[a-z0-9]+", "findall")),
    "team name plain": Case(r"[^a-z0-9 ]", _re(r"[^a-z0-9 ]", "sub", "")),
    "sim spec": Case(_schemes._SIM.pattern, _re(_schemes._SIM.pattern, "match"), ("1-2:AB-",)),
    "generated team code": Case(r"[A-Z0-9]{2,5}", _re(r"[A-Z0-9]{2,5}", "fullmatch")),
    "match day": Case(r"\d{4}-\d{2}-\d{2}", _re(r"\d{4}-\d{2}-\d{2}", "fullmatch")),
    "match file error field": _compiled(_problems._NAMED, "match"),
    "match pair": Case(
        r"[a-z0-9]{2,5}-[a-z0-9]{2,5}", _re(r"[a-z0-9]{2,5}-[a-z0-9]{2,5}", "fullmatch")
    ),
    # consumers/
    "dead-letter name": _compiled(_deadletter._UNSAFE, "sub", "-"),
    "plugin attribute name": _compiled(_plugins._NAME, "fullmatch"),
    "plugin option variable": Case(r"\W", _re(r"\W", "sub", "_")),
    "plugin docstring roles": Case(
        r":\w+:`~?([^`]+)`", _re(r":\w+:`~?([^`]+)`", "sub", r"\1"), (":a:`", ":ref:")
    ),
    "subscriber name": Case(r"(?<=[a-z0-9])(?=[A-Z])", _re(r"(?<=[a-z0-9])(?=[A-Z])", "sub", "-")),
    # matchcast/
    "load check": Case(
        _checks._PATTERN.pattern,
        lambda text: _checks._PATTERN.fullmatch(text.lower().strip()),
        ("p99 <", "p99 < 5 ms !", "lost =="),
    ),
    "load merge path": _compiled(_merge._STEP, "findall"),
    "load stage duration": Case(
        _stages._PART.pattern, lambda text: list(_stages._PART.finditer(text)), ("1.", "1.5x")
    ),
    "load stage number": Case(
        r"[0-9]+(?:\.[0-9]+)?", _re(r"[0-9]+(?:\.[0-9]+)?", "fullmatch"), ("1.", "1.2.")
    ),
    "load merge word": Case(r"[\w-]+", _re(r"[\w-]+", "fullmatch")),
    "web match id": _compiled(_server._MATCH_ID, "fullmatch"),
    "web event id": _compiled(_server._EVENT_ID, "fullmatch"),
    "consume client id": Case(r"[^A-Za-z0-9_.-]", _re(r"[^A-Za-z0-9_.-]", "sub", "_")),
    "--match": Case(r"[a-z0-9][a-z0-9_.-]{0,63}", _re(r"[a-z0-9][a-z0-9_.-]{0,63}", "fullmatch")),
    "--match hint": Case(r"[a-z0-9][a-z0-9_.-]*", _re(r"[a-z0-9][a-z0-9_.-]*", "fullmatch")),
    "URL password": Case(
        redact._URL_PASSWORD.pattern,
        redact.redact,
        ("a://b:c", "mqtt://u:", "://:", "://u:p…[", "mqtt://u:p/@"),
    ),
    "option name": Case(
        redact._FLAG_NAME.pattern,
        lambda text: redact.redact_argv([text, "x"]),
        ("--password-", "---token", "--secret!"),
    ),
}

#: A pattern linear by construction: one character class, tried once at each position.
_REFERENCE = re.compile(r"[\x00-\x08]")


def _patterns_in_source() -> set[str]:
    """Every literal pattern the packages pass to ``re`` or to pydantic's ``pattern=``."""
    found: set[str] = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            source = path.read_text()
            if "re." not in source and "pattern=" not in source:
                continue
            for node in ast.walk(ast.parse(source, str(path))):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                if (
                    isinstance(func, ast.Attribute)
                    and isinstance(func.value, ast.Name)
                    and func.value.id == "re"
                    and func.attr in _RE_CALLS
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                ):
                    found.add(node.args[0].value)
                for keyword in node.keywords:
                    if (
                        keyword.arg == "pattern"
                        and isinstance(keyword.value, ast.Constant)
                        and isinstance(keyword.value.value, str)
                    ):
                        found.add(keyword.value.value)
    return found


def test_every_pattern_in_the_packages_is_in_the_table() -> None:
    """A new pattern gets a line in CASES (and its 1 MB of adversarial text) or this fails."""
    listed = {case.pattern for case in CASES.values()}
    in_source = _patterns_in_source()
    assert in_source - listed == set(), "patterns with no linear-time test"
    assert listed - in_source == set(), "patterns the code no longer has"


class _TooSlowError(Exception):
    pass


@contextmanager
def _alarm(seconds: float) -> Iterator[None]:
    """Stop what runs past ``seconds`` (``re`` looks at signals while it matches)."""

    def stop(_signum: int, _frame: object) -> None:
        raise _TooSlowError

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _timed(call: Callable[[str], Any], text: str) -> float:
    start = time.perf_counter()
    call(text)
    return time.perf_counter() - start


def _check_linear(case: Case, text: str) -> None:
    text = (text * (SIZE // max(1, len(text)) + 1))[:SIZE]
    reference = _timed(_REFERENCE.search, text)
    bound = max(2.0, 100 * reference)
    try:
        with _alarm(bound * 2):
            took = _timed(case.call, text)
    except _TooSlowError:
        pytest.fail(f"{case.pattern!r} ran past {bound * 2:.1f} s on {text[:40]!r}...")
    assert took < bound, f"{case.pattern!r}: {took:.2f} s on {text[:40]!r}... (bound {bound:.2f})"


def _specials(pattern: str) -> list[str]:
    """The characters a pattern names, as runs an attacker would repeat."""
    return sorted({c for c in pattern if c.isprintable() and not c.isalnum()} | {"a", "7", " "})


def _pieces(case: Case) -> st.SearchStrategy[str]:
    piece = st.sampled_from([*_specials(case.pattern), *case.near, "A", "Z", "_", "\u0664"])
    return st.lists(st.tuples(piece, st.integers(1, 40)), min_size=1, max_size=6).map(
        lambda parts: "".join(p * n for p, n in parts)
    )


@pytest.mark.parametrize("name", list(CASES))
def test_runs_of_letters_of_its_characters_and_near_matches_take_linear_time(name: str) -> None:
    """A run of letters, a run of the pattern's own characters, each near-match repeated."""
    case = CASES[name]
    for text in ["a", "".join(_specials(case.pattern)), *case.near]:
        _check_linear(case, text)


@pytest.mark.parametrize("name", list(CASES))
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_megabyte_of_adversarial_text_takes_linear_time(name: str, data: st.DataObject) -> None:
    case = CASES[name]
    _check_linear(case, data.draw(_pieces(case), label="repeated unit"))
