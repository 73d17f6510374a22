"""`divscope score`: the teacher-forced token table of a base/RL model pair."""

from __future__ import annotations

from typing import Any

import typer

from divscope.cli.command import Command


def present(summary, arguments: dict[str, Any]) -> None:
    """The summary of the table (None: another share is still running), and where it is."""
    from divscope.distributed import reports
    from divscope.output import written

    if not reports():
        return
    if summary is not None:
        typer.echo(summary.format())
    typer.echo(written(arguments["out"].path, complete=summary is not None))


COMMAND = Command(
    "divscope.scoring.score:score",
    present,
    example=(
        "divscope score fixtures/lab/trajectories.jsonl --base fixtures/lab/base \\\n"
        "    --rl fixtures/lab/rl -o runs/tokens.parquet"
    ),
)
