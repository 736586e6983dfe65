"""National teams: FIFA codes, the names data sources use for them, and club codes.

Covers the 32 teams of the 2022 World Cup. A team missing here can still be imported from a
source that gives its code, and a club gets a code made from its name (:func:`club_code`).
"""

from __future__ import annotations

import re
import unicodedata

__all__ = [
    "FIFA_NAMES",
    "club_code",
    "code_for_name",
    "team_name",
    "worldcup_2022_record",
]

#: FIFA code -> the name used in match files.
FIFA_NAMES: dict[str, str] = {
    "ARG": "Argentina",
    "AUS": "Australia",
    "BEL": "Belgium",
    "BRA": "Brazil",
    "CAN": "Canada",
    "CMR": "Cameroon",
    "CRC": "Costa Rica",
    "CRO": "Croatia",
    "DEN": "Denmark",
    "ECU": "Ecuador",
    "ENG": "England",
    "ESP": "Spain",
    "FRA": "France",
    "GER": "Germany",
    "GHA": "Ghana",
    "IRN": "Iran",
    "JPN": "Japan",
    "KOR": "South Korea",
    "KSA": "Saudi Arabia",
    "MAR": "Morocco",
    "MEX": "Mexico",
    "NED": "Netherlands",
    "POL": "Poland",
    "POR": "Portugal",
    "QAT": "Qatar",
    "SEN": "Senegal",
    "SRB": "Serbia",
    "SUI": "Switzerland",
    "TUN": "Tunisia",
    "URU": "Uruguay",
    "USA": "United States",
    "WAL": "Wales",
}

#: 2022 World Cup per team: (matches, goals scored, goals conceded), extra time included and
#: shoot-outs not, as the bundled openfootball results give them (a test checks they agree).
_RECORD_2022: dict[str, tuple[int, int, int]] = {
    "ARG": (7, 15, 8),
    "AUS": (4, 4, 6),
    "BEL": (3, 1, 2),
    "BRA": (5, 8, 3),
    "CAN": (3, 2, 7),
    "CMR": (3, 4, 4),
    "CRC": (3, 3, 11),
    "CRO": (7, 8, 7),
    "DEN": (3, 1, 3),
    "ECU": (3, 4, 3),
    "ENG": (5, 13, 4),
    "ESP": (4, 9, 3),
    "FRA": (7, 16, 8),
    "GER": (3, 6, 5),
    "GHA": (3, 5, 7),
    "IRN": (3, 4, 7),
    "JPN": (4, 5, 4),
    "KOR": (4, 5, 8),
    "KSA": (3, 3, 5),
    "MAR": (7, 6, 5),
    "MEX": (3, 2, 3),
    "NED": (5, 10, 4),
    "POL": (4, 3, 5),
    "POR": (5, 12, 6),
    "QAT": (3, 1, 7),
    "SEN": (4, 5, 7),
    "SRB": (3, 5, 8),
    "SUI": (4, 5, 9),
    "TUN": (3, 1, 1),
    "URU": (3, 2, 2),
    "USA": (4, 3, 4),
    "WAL": (3, 1, 6),
}

#: Other spellings found in data sources (openfootball, FIFA's official names).
_ALIASES: dict[str, str] = {
    "usa": "USA",
    "korea republic": "KOR",
    "republic of korea": "KOR",
    "ir iran": "IRN",
    "holland": "NED",
}


def _fold(name: str) -> str:
    """Lower case, accents and punctuation dropped: ``Côte d'Ivoire`` -> ``cote divoire``."""
    plain = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    return " ".join(re.sub(r"[^a-z0-9 ]", "", plain.lower()).split())


_BY_NAME = {_fold(name): code for code, name in FIFA_NAMES.items()} | _ALIASES


def code_for_name(name: str) -> str | None:
    """The FIFA code of a national team's name (``South Korea`` -> ``KOR``), None if unknown."""
    return _BY_NAME.get(_fold(name))


def team_name(code: str) -> str:
    """The name of the team with FIFA code ``code``; the code itself when unknown."""
    return FIFA_NAMES.get(code, code)


def club_code(name: str, taken: str | None = None) -> str:
    """A short code for a club without one: ``Barcelona`` -> ``BAR``.

    The first three letters of the name's longest word; when that equals ``taken`` (the other
    team's code), the initial of the first word and two letters of the second
    (``Manchester City`` -> ``MCI`` beside ``MAN``), and failing that a digit.
    """
    national = code_for_name(name)
    if national is not None and national != taken:
        return national
    words = [w for w in _fold(name).upper().split() if w.isalnum()] or ["TEAM"]
    code = max(words, key=len)[:3].ljust(2, "X")
    if code != taken:
        return code
    if len(words) >= 2:
        alt = (words[0][:1] + words[1][:2]).ljust(2, "X")
        if alt != taken:
            return alt
    return code[:2] + "2"


def worldcup_2022_record() -> dict[str, tuple[int, int, int]]:
    """Per FIFA code: (matches played, goals scored, goals conceded) at the 2022 World Cup."""
    return dict(_RECORD_2022)
