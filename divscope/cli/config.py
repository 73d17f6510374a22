"""`divscope config`: the study file that replays the run that made an output."""

from __future__ import annotations

from typing import Any

import typer

from divscope.cli.command import Command


def present(text: str, arguments: dict[str, Any]) -> None:
    """The study file itself, or where it was written."""
    if arguments["out"] is None:
        typer.echo(text, nl=False)
    else:
        typer.echo(f"wrote {arguments['out']}")


COMMAND = Command(
    "divscope.study_file:config",
    present,
    example="divscope config runs/tokens.parquet -o runs/study.toml",
)
