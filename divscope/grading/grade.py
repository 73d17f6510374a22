"""`grade`: a file of responses in, the same rows with `correct` and `grade_note` on disk out.

What `divscope grade` runs: check the output path and the grader first, read the responses,
grade them in worker processes with a per-response time limit (`table.grade_table`), write
atomically, and report mean@n with its problem-level bootstrap interval.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from typing import Annotated

import polars as pl

from divscope.estimators import Interval
from divscope.grading.accuracy import mean_at_n
from divscope.grading.registry import get_grader
from divscope.grading.table import GradeConfig, grade_table
from divscope.io import read_table, write_table
from divscope.output import check_target
from divscope.params import Flag, Output
from divscope.readers import Reading, read_responses
from divscope.schema import require_columns


@dataclass(frozen=True)
class GradeReport:
    """What `grade` wrote, in numbers."""

    n_responses: int
    """Responses graded."""
    n_prompts: int
    """Distinct prompts among them."""
    n_correct: int
    """Responses graded correct."""
    accuracy: Interval
    """mean@n over prompts with its 95% problem-level bootstrap interval."""
    notes: dict[str, int]
    """How many responses got each `grade_note`, most frequent first."""

    def format(self) -> str:
        """Two or three lines for the terminal."""
        a = self.accuracy
        lines = [
            f"graded {self.n_responses} responses of {self.n_prompts} prompts: "
            f"{self.n_correct} correct",
            f"mean@n {a.estimate:.4f} [{a.low:.4f}, {a.high:.4f}] "
            f"({a.confidence:.0%} CI over prompts)",
        ]
        if self.notes:
            noted = "; ".join(f"{n} × {note}" for note, n in list(self.notes.items())[:5])
            lines.append(f"notes: {noted}")
        return "\n".join(lines)


def grade(
    responses: str | os.PathLike,
    out: Output,
    config: GradeConfig = GradeConfig(),  # noqa: B008 (frozen, hashable)
    *,
    answers: str | os.PathLike | None = None,
    reading: Annotated[Reading, Flag(omit=("correct", "prompts", "system_prompt"))] = Reading(),  # noqa: B008
) -> GradeReport:
    """Grade every response against its gold answer and write the graded table.

    Reads RESPONSES, writes --out. Adds `correct` and `grade_note` (why a response could not be
    graded cleanly: no \\boxed{}, timeout, ...; replaced if present) to every input column and
    prints mean@n with a problem-level 95% bootstrap interval. --out is Parquet (`.parquet`),
    JSONL (`.jsonl`) or a directory of parts (any other path); it may be RESPONSES itself with
    --overwrite: the input is read whole first and replaced atomically.

    Args:
        responses: Trajectories or cross-sample results with 'prompt_id' and 'response'.
        out: the graded table (or its path); `overwrite` replaces it if it exists.
        config: the grader, its timeout and the number of workers.
        answers: Prompts file with 'prompt_id' and 'answer', for responses without an 'answer'
            column.
        reading: the responses' format (`--from`, detected by default; docs/inputs.md): a
            verl dump, TRL completions or an eval log is graded as its trajectory columns.

    Returns:
        Counts, mean@n with its interval, and the `grade_note`s.

    Raises:
        DivscopeError: `out` exists without `overwrite`, or any `grade_table` error.

    Example (the lab in `fixtures/lab`, from the repository root):
        >>> import tempfile
        >>> import divscope
        >>> from divscope.grading import GradeConfig
        >>> tmp = tempfile.TemporaryDirectory()
        >>> report = divscope.grade(
        ...     "fixtures/lab/trajectories.jsonl", f"{tmp.name}/graded.parquet",
        ...     GradeConfig("lab", workers=1))
        >>> report.n_responses, report.n_prompts
        (512, 64)
        >>> tmp.cleanup()
    """
    out = Output.of(out)
    check_target(out.path, overwrite=out.overwrite)
    get_grader(config.grader)  # an unknown grader fails before a large input is read
    frame = pl.from_arrow(read_responses(responses, reading))
    needed = ["prompt_id", "response"]
    require_columns(frame.columns, needed, source=str(responses), what="grading")
    gold = None if answers is None else read_table(answers)
    graded = grade_table(frame, config, answers=gold)
    write_table(graded, out.path, overwrite=out.overwrite)
    notes = Counter(note for note in graded["grade_note"].to_list() if note is not None)
    return GradeReport(
        n_responses=graded.height,
        n_prompts=graded["prompt_id"].n_unique(),
        n_correct=int(graded["correct"].sum()),
        accuracy=mean_at_n(graded),
        notes=dict(notes.most_common()),
    )
