"""``matchcast schema`` and ``matchcast asyncapi``: print the contract (JSON Schema, AsyncAPI)."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated

import typer

from events import EventAdapter, MatchState
from matchcast.cli.options import HelpAllOpt, choice
from simulator import Match

__all__ = ["asyncapi", "register", "schema"]


class _Format(StrEnum):
    yaml = "yaml"
    json = "json"


def schema(
    state: Annotated[
        bool, typer.Option("--state", help="The retained state snapshot instead of the events.")
    ] = False,
    match_file: Annotated[
        bool, typer.Option("--match-file", help="The match file format instead of the events.")
    ] = False,
    help_all: HelpAllOpt = False,
) -> None:
    """``matchcast schema``: the JSON Schema of the events on the wire (or of the state, or of
    match files)."""
    if match_file:
        doc = Match.model_json_schema()
    else:
        doc = MatchState.model_json_schema() if state else EventAdapter.json_schema()
    typer.echo(json.dumps(doc, indent=2, ensure_ascii=False))


def asyncapi(
    fmt: Annotated[
        _Format,
        typer.Option(
            "--format", "-f", parser=choice(_Format), metavar="yaml|json", help="Output format."
        ),
    ] = _Format.yaml,
    help_all: HelpAllOpt = False,
) -> None:
    """``matchcast asyncapi``: the AsyncAPI 3.0 document of the topics, messages and payload
    schemas."""
    from matchcast.contract.asyncapi import asyncapi_document, dump  # noqa: PLC0415

    typer.echo(dump(asyncapi_document(), fmt.value), nl=False)


def register(app: typer.Typer) -> None:
    """Add the ``schema`` and ``asyncapi`` commands to ``app``."""
    app.command()(schema)
    app.command("asyncapi")(asyncapi)
