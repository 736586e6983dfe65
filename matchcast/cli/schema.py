"""``matchcast asyncapi``: print the AsyncAPI 3.0 document of the topic API."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

__all__ = ["register"]


class _Format(StrEnum):
    yaml = "yaml"
    json = "json"


def asyncapi(
    fmt: Annotated[_Format, typer.Option("--format", "-f", help="Output format.")] = _Format.yaml,
) -> None:
    """Print the AsyncAPI 3.0 document of the topics, messages and payload schemas."""
    from matchcast.asyncapi import asyncapi_document, dump  # noqa: PLC0415

    typer.echo(dump(asyncapi_document(), fmt.value), nl=False)


def register(app: typer.Typer) -> None:
    """Add the ``asyncapi`` command to ``app``."""
    app.command("asyncapi")(asyncapi)
