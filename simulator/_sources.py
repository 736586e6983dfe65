"""Where matches come from: a file path, or a name for a match bundled with matchcast.

``resolve_matches(spec)`` turns what a user typed into matches:

- ``semifinal`` (also the default): the 2026 World Cup semi-final Argentina 2-1 England;
- any path to a match file (``.yaml``, ``.yml``, ``.json``);
- ``sim:SEED`` a simulated match, ``worldcup:2022/final`` bundled real results (see
  :mod:`simulator._schemes`);
- for :func:`resolve_sources` only, a recording (``.jsonl``, see :mod:`simulator._recording`).

More schemes plug in through :data:`RESOLVERS` (``prefix:rest`` specs).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from pathlib import Path

from events import MatchFileError
from simulator._matchfile import Match, load_match
from simulator._recording import Recording, is_recording, load_recording
from simulator._schemes import resolve_simulated, resolve_worldcup

__all__ = [
    "BUNDLED",
    "DEFAULT_MATCH",
    "RESOLVERS",
    "bundled_path",
    "resolve_matches",
    "resolve_sources",
]

DEFAULT_MATCH = "semifinal"
#: Bundled match names and their files under simulator/matches/.
BUNDLED = {"semifinal": "semifinal-2026-arg-eng.yaml"}

#: ``prefix`` of a ``prefix:rest`` spec -> function of ``rest`` returning matches.
RESOLVERS: dict[str, Callable[[str], list[Match]]] = {
    "sim": resolve_simulated,
    "worldcup": resolve_worldcup,
}


def bundled_path(name: str) -> Path:
    """The path of a bundled match file."""
    ref = resources.files("simulator") / "matches" / BUNDLED[name]
    return Path(str(ref))


def resolve_matches(spec: str | None) -> list[Match]:
    """The matches ``spec`` names (see the module docstring).

    Raises:
        MatchFileError: the spec names no match, or the file is invalid.
    """
    spec = spec or DEFAULT_MATCH
    if spec in BUNDLED:
        return [load_match(bundled_path(spec))]
    prefix, sep, rest = spec.partition(":")
    if sep and prefix in RESOLVERS and not Path(spec).exists():
        return RESOLVERS[prefix](rest)
    path = Path(spec)
    if not path.exists():
        known = ", ".join(sorted(BUNDLED) + [f"{p}:..." for p in sorted(RESOLVERS)])
        raise MatchFileError(path, [f"no such file, and not a bundled match ({known})"])
    return [load_match(path)]


def resolve_sources(spec: str | None) -> list[Match | Recording]:
    """What to replay: the matches ``spec`` names, or the matches of a ``.jsonl`` recording.

    Raises:
        MatchFileError: as :func:`resolve_matches`, or the recording is invalid.
    """
    if spec is not None and is_recording(spec):
        return list(load_recording(spec))
    return list(resolve_matches(spec))
