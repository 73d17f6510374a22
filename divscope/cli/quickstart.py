"""`divscope quickstart`: the whole study on the lab models, in one command."""

from __future__ import annotations

from typing import Any

import typer

from divscope.cli.command import Command


def present(report, arguments: dict[str, Any]) -> None:
    """The headline numbers and where every file is."""
    typer.echo(report.format())


COMMAND = Command(
    "divscope.lab_study:quickstart", present, example="divscope quickstart --out runs/quickstart"
)
