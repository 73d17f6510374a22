"""`divscope plot`: every figure the given tables allow, written to a directory with index.md."""

from __future__ import annotations

from typing import Any

import typer

from divscope.cli.command import Command


def progress(name: str, reason: str | None) -> None:
    """One line per figure as it is drawn or skipped."""
    typer.echo(f"  {name}" if reason is None else f"  {name}: skipped, {reason}")


def present(report, arguments: dict[str, Any]) -> None:
    """How many figures were written, and where."""
    typer.echo(
        f"Wrote {len(report.written)} figures ({len(report.skipped)} skipped) to {report.out}; "
        f"see {report.out / 'index.md'}"
    )


COMMAND = Command(
    "divscope.figures.plot:plot",
    present,
    {"on_figure": progress},
    example="divscope plot runs/tokens.parquet -o runs/figures",
)
