"""`divscope watch`: score each checkpoint a trainer saves into an evolution directory."""

from __future__ import annotations

from typing import Any

import typer

from divscope.cli.command import Command


def scored(step) -> None:
    """One line per checkpoint scored: its step, the headline statistics, the time."""
    typer.echo(step.line())


def present(report, arguments: dict[str, Any]) -> None:
    """What was scored and skipped, and where the evolution directory is."""
    skipped = f", {len(report.skipped)} already there" if report.skipped else ""
    stopped = " (stopped by Ctrl-C)" if report.interrupted else ""
    typer.echo(
        f"Scored {len(report.scored)} checkpoints{skipped}{stopped} into {report.out} "
        f"(summary: {report.out / 'summary.jsonl'}); draw it with divscope plot --evolution "
        f"{report.out} -o FIGURES"
    )


COMMAND = Command(
    "divscope.monitor.watch:watch",
    present,
    {"on_step": scored},
    example=(
        "divscope watch runs/grpo --base Qwen/Qwen2.5-Math-7B --probe probe.jsonl \\\n"
        "    -o runs/evolution --follow"
    ),
)
