"""The ``sim:`` and ``worldcup:`` match specs (registered in :data:`simulator.RESOLVERS`).

- ``sim:SEED`` is a simulated match, Argentina v England; ``sim:FIRST-LAST`` one per seed
  (``sim:1-50`` for a load test); add ``:HOME-AWAY`` for other teams and ``:knockout`` for
  extra time and penalties when level: ``sim:7:BRA-GER:knockout``.
- ``worldcup:2022`` is every match of the bundled 2022 World Cup results (openfootball, public
  domain); ``worldcup:2022/SELECTOR`` some of them: ``final``, ``third-place``,
  ``semi-finals``, ``group-c``, ``ARG-FRA``, ``2022-11-21``, or a match id (see
  :func:`~simulator._selection.select_matches`).
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from pathlib import Path

from events import MatchFileError
from simulator._generate import simulate_match
from simulator._matchfile import Match
from simulator._selection import select_matches
from simulator.importers.openfootball import import_openfootball

__all__ = ["MAX_SIMULATED", "WORLD_CUPS", "resolve_simulated", "resolve_worldcup", "worldcup_path"]

#: Bundled World Cup results: year -> file under simulator/data/.
WORLD_CUPS = {"2022": "openfootball/worldcup_2022.json"}
#: Most matches one ``sim:`` spec may name.
MAX_SIMULATED = 10_000

#: ``[0-9]``, not ``\d``: Python's ``\d`` and ``int()`` take every Unicode digit set.
_SIM = re.compile(
    r"^(?P<first>[0-9]{1,18})(?:-(?P<last>[0-9]{1,18}))?"
    r"(?::(?P<home>[A-Za-z0-9]{2,5})-(?P<away>[A-Za-z0-9]{2,5}))?"
    r"(?P<knockout>:knockout)?$"
)


def resolve_simulated(rest: str) -> list[Match]:
    """The matches of ``sim:{rest}``.

    Raises:
        MatchFileError: the spec is malformed or names too many matches.
    """
    spec = f"sim:{rest}"
    found = _SIM.match(rest)
    if found is None:
        raise MatchFileError(
            spec,
            [
                "expected sim:SEED or sim:FIRST-LAST, then :HOME-AWAY and :knockout if wanted "
                "(sim:7, sim:1-50, sim:7:BRA-GER:knockout)"
            ],
        )
    first = int(found["first"])
    last = int(found["last"] or first)
    if last < first or last - first >= MAX_SIMULATED:
        raise MatchFileError(
            spec, [f"seeds {first}-{last}: give FIRST <= LAST, at most {MAX_SIMULATED} matches"]
        )
    home, away = (found["home"] or "ARG").upper(), (found["away"] or "ENG").upper()
    if home == away:
        raise MatchFileError(spec, [f"a team cannot play itself ({home})"])
    knockout = found["knockout"] is not None
    return [simulate_match(s, home, away, knockout=knockout) for s in range(first, last + 1)]


def worldcup_path(year: str) -> Path:
    """The bundled openfootball file of a World Cup."""
    return Path(str(resources.files("simulator") / "data" / WORLD_CUPS[year]))


@functools.cache
def _worldcup(year: str) -> tuple[Match, ...]:
    return tuple(import_openfootball(worldcup_path(year)))


def resolve_worldcup(rest: str) -> list[Match]:
    """The matches of ``worldcup:{rest}`` (``2022``, ``2022/final``, ...).

    Raises:
        MatchFileError: an unknown year or a selector that names no match.
    """
    year, _, selector = rest.partition("/")
    if year not in WORLD_CUPS:
        known = ", ".join(f"worldcup:{y}" for y in sorted(WORLD_CUPS))
        raise MatchFileError(f"worldcup:{rest}", [f"no bundled World Cup {year!r}; try {known}"])
    return select_matches(_worldcup(year), selector, where=f"worldcup:{rest}")
