"""`divscope analyze`: the headline statistics of a token table, printed and saved as JSON."""

from __future__ import annotations

from typing import Any

import typer

from divscope.cli.command import Command


def present(result, arguments: dict[str, Any]) -> None:
    """The digest of the summary, and where it is."""
    from divscope.formatting import digest

    typer.echo(digest(result, source=arguments["study"].tokens))
    typer.echo(f"\nWrote {arguments['out'].path}")


COMMAND = Command(
    "divscope.analyses.analyze:analyze",
    present,
    example="divscope analyze runs/tokens.parquet -o runs/summary.json",
)
