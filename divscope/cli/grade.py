"""`divscope grade`: add `correct` and `grade_note` to trajectories or cross-sample results."""

from __future__ import annotations

from typing import Any

import typer

from divscope.cli.command import Command


def present(report, arguments: dict[str, Any]) -> None:
    """The counts and mean@n with its interval, and where the graded table is."""
    typer.echo(report.format())
    typer.echo(f"wrote {arguments['out'].path}")


COMMAND = Command(
    "divscope.grading.grade:grade",
    present,
    example="divscope grade runs/traj --grader lab -o runs/traj-graded.parquet",
)
