"""Importers: real match data to match files.

- :func:`import_openfootball`: openfootball ``worldcup.json`` results (public domain);
- :func:`import_statsbomb`: StatsBomb Open Data events and lineups (attribution required).

Each returns validated :class:`~simulator.Match` objects and refuses input that is not what it
claims to be with a :class:`~events.MatchFileError` naming the file and the record.
"""

from simulator.importers.openfootball import KNOWN_UTC_OFFSETS, import_openfootball
from simulator.importers.statsbomb import ATTRIBUTION, import_statsbomb

__all__ = ["ATTRIBUTION", "KNOWN_UTC_OFFSETS", "import_openfootball", "import_statsbomb"]
