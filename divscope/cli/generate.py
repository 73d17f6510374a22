"""`divscope generate`: sample n responses per prompt from one model, as trajectories."""

from __future__ import annotations

from typing import Any

import typer

from divscope.cli.command import Command


def present(report, arguments: dict[str, Any]) -> None:
    """One line: the prompts done, the responses and tokens generated, and where they are."""
    typer.echo(report.format())


COMMAND = Command(
    "divscope.generation.generate:generate",
    present,
    example=(
        "divscope generate fixtures/lab/prompts/eval.jsonl --model fixtures/lab/base \\\n"
        "    --n 8 --max-new-tokens 224 -o runs/traj"
    ),
)
