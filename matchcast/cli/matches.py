"""Commands that make match files: ``matchcast simulate`` and ``matchcast import``.

Also the match-day helper behind ``matchcast replay ... --day``. Bad input ends in one line on
standard error and exit 2, like every other command (see :mod:`matchcast.cli.common`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from events import MatchFileError, quote
from matchcast.cli.common import fail
from matchcast.cli.options import HelpAllOpt, choice, whole
from simulator import (
    Match,
    MatchFormat,
    dump_match,
    kickoff_delays,
    matches_on,
    select_matches,
    simulate_match,
    write_match,
)
from simulator.importers import ATTRIBUTION, import_openfootball, import_statsbomb

__all__ = ["match_day", "register", "result_line"]

#: Most matches one ``simulate --count`` writes.
MAX_COUNT = 10_000


class ImportFormat(StrEnum):
    """The data formats ``matchcast import`` reads."""

    openfootball = "openfootball"
    statsbomb = "statsbomb"


def _fail(message: str) -> NoReturn:
    """One line on standard error, exit 2 (bad input)."""
    fail(message, 2)


def _one_line(err: MatchFileError) -> str:
    """``FILE: problem; problem`` - a match file error on one line."""
    return f"{err.path}: {'; '.join(err.problems)}"


def result_line(match: Match) -> str:
    """``ARG 3-3 FRA (4-2 pens)``, home first."""
    h, a = match.home.code, match.away.code
    line = f"{h} {match.result.score[h]}-{match.result.score[a]} {a}"
    if match.result.shootout:
        line += f" ({match.result.shootout[h]}-{match.result.shootout[a]} pens)"
    return line


def _date(value: str | None, option: str) -> dt.date | None:
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        _fail(f"{option} must be a date such as 2022-11-21, not {quote(value)}")


def match_day(
    matches: Sequence[Match], day: str, speed: float | None
) -> tuple[list[Match], list[float]]:
    """The matches of ``day`` and the wall seconds each waits before kickoff at ``speed``."""
    date = _date(day, "--day")
    assert date is not None
    chosen = matches_on(matches, date)
    if not chosen:
        dates = sorted({m.kickoff.date for m in matches})
        span = f"{dates[0]} to {dates[-1]}" if dates else "none"
        _fail(f"--day {day}: no match kicks off that day (the matches given: {span})")
    return chosen, kickoff_delays(chosen, speed)


def _emit(matches: Sequence[Match], output: Path | None, fmt: MatchFormat, header: str) -> None:
    """Write one match to a file or standard output, or many into a directory."""
    if output is None:
        if len(matches) != 1:
            _fail(f"{len(matches)} matches: choose one (--match) or give a directory (-o DIR)")
        typer.echo(dump_match(matches[0], fmt, header=header), nl=False)
        return
    many = len(matches) > 1 or output.is_dir() or str(output).endswith(("/", "\\"))
    if many:
        if output.exists() and not output.is_dir():
            _fail(f"-o {output}: {len(matches)} matches need a directory, not a file")
        output.mkdir(parents=True, exist_ok=True)
    for match in matches:
        path = output / f"{match.match_id}.{fmt}" if many else output
        write_match(match, path, header=header)
        typer.echo(f"wrote {path}: {result_line(match)}", err=True)


def _xg(value: str | None) -> tuple[float, float] | None:
    if value is None:
        return None
    try:
        home, away = (float(v) for v in value.split(","))
    except ValueError:
        _fail(f"--xg must be two numbers, home,away (1.6,1.1), not {quote(value)}")
    return home, away


def _output_option(help_text: str) -> Any:
    """``-o`` of simulate and import: where the match files go."""
    return typer.Option("--output", "-o", metavar="PATH", help=help_text)


def simulate(
    home: Annotated[str, typer.Option(metavar="CODE", help="Home team, a FIFA code.")] = "ARG",
    away: Annotated[str, typer.Option(metavar="CODE", help="Away team, a FIFA code.")] = "ENG",
    seed: Annotated[
        int,
        typer.Option(parser=whole(0), metavar="N", help="Same seed, same match, byte for byte."),
    ] = 0,
    count: Annotated[
        int,
        typer.Option(
            parser=whole(1, MAX_COUNT),
            metavar="N",
            help="Write this many matches, seeds SEED, SEED+1, ...",
        ),
    ] = 1,
    output: Annotated[
        Path | None,
        _output_option("File (.yaml/.json), or a directory for --count > 1; default stdout."),
    ] = None,
    knockout: Annotated[
        bool, typer.Option("--knockout", help="Level after 90 goes to extra time and penalties.")
    ] = False,
    xg: Annotated[
        str | None,
        typer.Option(
            metavar="HOME,AWAY",
            help="Expected goals (e.g. 1.6,1.1); default from 2022 records.",
        ),
    ] = None,
    date: Annotated[
        str | None,
        typer.Option(metavar="YYYY-MM-DD", help="Kickoff date written into the file."),
    ] = None,
    fmt: Annotated[
        str,
        typer.Option("--format", metavar="yaml|json", help="For stdout and directories."),
    ] = "yaml",
    help_all: HelpAllOpt = False,
) -> None:
    """``matchcast simulate``: plausible simulated matches (Poisson goals, cards, subs,
    added time)."""
    home, away = home.upper(), away.upper()
    if fmt not in ("yaml", "json"):
        _fail(f"--format must be yaml or json, not {quote(fmt)}")
    if count > MAX_COUNT:
        _fail(f"--count is at most {MAX_COUNT}, not {count}")
    if output is not None and output.suffix in (".yaml", ".yml", ".json") and count > 1:
        _fail(f"--count {count} writes {count} files: give -o a directory, not {output}")
    rates = _xg(xg)
    kickoff = _date(date, "--date")
    try:
        matches = [
            simulate_match(
                s,
                home,
                away,
                xg=rates,
                knockout=knockout,
                **({"date": kickoff} if kickoff else {}),
            )
            for s in range(seed, seed + count)
        ]
    except MatchFileError as err:
        _fail(_one_line(err))
    header = "A simulated match, not a real one: matchcast simulate (see sources)."
    _emit(matches, output, "json" if fmt == "json" else "yaml", header)


def import_(
    fmt: Annotated[
        ImportFormat,
        typer.Argument(
            metavar="FORMAT", parser=choice(ImportFormat), help="openfootball or statsbomb."
        ),
    ],
    files: Annotated[
        list[Path],
        typer.Argument(
            metavar="FILE",
            help="openfootball: a worldcup.json. statsbomb: the events file, with the lineups "
            "and matches files if you have them.",
        ),
    ],
    output: Annotated[
        Path | None,
        _output_option(
            "Match file (.yaml/.json), or a directory for many matches; default stdout."
        ),
    ] = None,
    select: Annotated[
        str | None,
        typer.Option(
            "--match",
            metavar="WHICH",
            help="openfootball: which matches (final, group-a, ARG-FRA, 2022-12-18).",
        ),
    ] = None,
    utc_offset: Annotated[
        str | None,
        typer.Option(
            "--utc-offset",
            metavar="+HH:MM",
            help="openfootball: UTC offset of local kickoff times.",
        ),
    ] = None,
    date: Annotated[
        str | None,
        typer.Option(
            metavar="YYYY-MM-DD", help="statsbomb: match date when no matches file gives it."
        ),
    ] = None,
    home: Annotated[
        str | None,
        typer.Option(
            metavar="NAME", help="statsbomb: home team name when no matches file gives it."
        ),
    ] = None,
    help_all: HelpAllOpt = False,
) -> None:
    """``matchcast import``: real match data into match files (openfootball results,
    StatsBomb events)."""
    wrong = (
        ["--date" if date else "", "--home" if home else ""]
        if fmt is ImportFormat.openfootball
        else ["--match" if select else "", "--utc-offset" if utc_offset else ""]
    )
    if any(wrong):
        _fail(f"{' and '.join(w for w in wrong if w)}: not an option of {fmt.value} imports")
    try:
        if fmt is ImportFormat.openfootball:
            if len(files) != 1:
                _fail(f"openfootball takes one worldcup.json, not {len(files)} files")
            matches = import_openfootball(files[0], utc_offset=utc_offset)
            if select is not None:
                matches = select_matches(matches, select, where=str(files[0]))
            header = (
                f"Imported by matchcast from openfootball {files[0].name} (public domain, CC0 1.0)."
            )
        else:
            matches = [import_statsbomb(files, date=_date(date, "--date"), home=home)]
            header = f"Imported by matchcast. {ATTRIBUTION}. Keep this attribution."
    except MatchFileError as err:
        _fail(_one_line(err))
    suffix = output.suffix if output is not None else ""
    _emit(matches, output, "json" if suffix == ".json" else "yaml", header)


def register(app: typer.Typer) -> None:
    """Add ``simulate`` and ``import`` to the ``matchcast`` command line."""
    app.command()(simulate)
    app.command("import")(import_)
