"""`divscope grade`: add `correct` and `grade_note` to trajectories or cross-sample results."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from divscope import defaults
from divscope.cli import options


def grade(
    responses: Annotated[
        Path,
        typer.Argument(help="Trajectories or cross-sample results with a 'response' column."),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="Graded table: .parquet, .jsonl, or any other path for a directory of parts. "
            "May be RESPONSES itself with --overwrite.",
        ),
    ],
    grader: options.Grader = defaults.GRADER,
    answers: Annotated[
        Path | None,
        typer.Option(
            "--answers",
            help="Prompts file with 'prompt_id' and 'answer', for responses without an "
            "'answer' column.",
        ),
    ] = None,
    timeout: options.GradeTimeout = defaults.GRADE_TIMEOUT,
    workers: Annotated[
        int | None,
        typer.Option("--workers", min=1, help="Grading processes (default: CPUs, at most 8)."),
    ] = None,
    overwrite: options.Overwrite = False,
) -> None:
    """Grade every response against its gold answer and write the graded table.

    Reads RESPONSES, writes --out. Adds `correct` and `grade_note` (why a response could not be
    graded cleanly: no \\boxed{}, timeout, ...) and prints mean@n with a problem-level 95% bootstrap
    interval.
    """
    from divscope.grading import GradeConfig
    from divscope.grading.grade import grade as run

    if os.getcwd() not in sys.path:  # so that --grader mymodule:check finds ./mymodule.py
        sys.path.insert(0, os.getcwd())
    config = GradeConfig(grader=grader, timeout=timeout, workers=workers)
    report = run(responses, out, config, answers=answers, overwrite=overwrite)
    typer.echo(report.format())
    typer.echo(f"wrote {out}")
