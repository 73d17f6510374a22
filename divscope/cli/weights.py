"""`divscope weights`: the weight-level relative gap ratio σ of tuned models to their base."""

from __future__ import annotations

from typing import Any

import typer

from divscope.cli.command import Command


def present(gap, arguments: dict[str, Any]) -> None:
    """The table of σ per part and in total, and where its JSON is (with --json)."""
    typer.echo(gap.to_text())
    if arguments["out"] is not None:
        typer.echo(f"\nWrote {arguments['out']}")


COMMAND = Command(
    "divscope.scoring.weights:weights",
    present,
    example="divscope weights fixtures/lab/base fixtures/lab/rl fixtures/lab/sft",
)
