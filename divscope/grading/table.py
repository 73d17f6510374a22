"""Grading a table of responses (trajectories or cross-sample results) in memory.

Every response is graded in a `TimeoutPool` worker with a wall-clock limit, so a pathological
answer costs one worker and a `timeout` note, never the run. Identical (response, answer) pairs
are graded once.

>>> frame = pl.DataFrame({"prompt_id": ["p"], "response": ["\\\\boxed{B}"], "answer": ["B"]})
>>> grade_table(frame, GradeConfig("exact", workers=1))["correct"].to_list()
[True]
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Annotated

import polars as pl

from divscope.defaults import GRADE_TIMEOUT, GRADER
from divscope.errors import DivscopeError
from divscope.grading.pool import TimeoutPool
from divscope.grading.registry import grader_target
from divscope.grading.verdict import Verdict
from divscope.params import Flag
from divscope.schema import GRADED, require_columns


@dataclass(frozen=True)
class GradeConfig:
    """How to grade responses."""

    grader: str = GRADER
    """math (Math-Verify on the last \\boxed{}), exact, lab, or your own function as
    module:function taking (response, answer) and returning a bool (or a `Verdict`)."""
    timeout: Annotated[float, Flag("--grade-timeout", min=0.0)] = GRADE_TIMEOUT
    """Wall-clock seconds allowed to grade one response; an overrun counts as incorrect (a
    `timeout` note)."""
    workers: Annotated[int | None, Flag(min=1)] = None
    """Grading processes (default: CPUs, at most 8)."""


def grade_table(
    frame: pl.DataFrame, config: GradeConfig = GradeConfig(), *, answers: pl.DataFrame | None = None
) -> pl.DataFrame:
    """`frame` with `correct` (bool) and `grade_note` (str, null for a clean verdict) set.

    Args:
        frame: responses with a `response` text column, plus `answer` unless `answers` is given.
        config: the grader, its per-response timeout and the number of workers.
        answers: gold answers by prompt (`prompt_id`, `answer`); they replace any `answer`
            column of `frame`.

    Raises:
        DivscopeError: a missing column, a response or answer missing, or a grader that raised
            or returned something other than a bool or a `Verdict`.
    """
    workers = config.workers or min(8, os.cpu_count() or 1)
    pool = TimeoutPool(grader_target(config.grader), timeout=config.timeout, workers=workers)
    require_columns(frame.columns, ["response"], source="responses", what="grading")
    gold = _gold_answers(frame, answers)
    responses = frame["response"].to_list()
    if None in responses:
        row = frame.row(responses.index(None), named=True)
        raise DivscopeError(f"responses: 'response' is null for {_key(row)}.")
    pairs = list(dict.fromkeys(zip(responses, gold, strict=True)))
    verdicts = {}
    for pair, outcome in zip(pairs, pool.map(pairs), strict=True):
        if outcome.status == "raised":
            row = frame.row(responses.index(pair[0]), named=True)
            raise DivscopeError(f"grader {config.grader!r} raised {outcome.error} on {_key(row)}.")
        verdicts[pair] = (
            _verdict(outcome.value, config.grader)
            if outcome.status == "ok"
            else Verdict(False, outcome.error)
        )
    graded = [verdicts[pair] for pair in zip(responses, gold, strict=True)]
    columns = {"correct": [v.correct for v in graded], "grade_note": [v.note for v in graded]}
    return frame.with_columns(pl.DataFrame(columns, schema=GRADED).get_columns())


def _gold_answers(frame: pl.DataFrame, answers: pl.DataFrame | None) -> list[str]:
    """The gold answer of each row of `frame`, from `answers` (by prompt) or its own column."""
    if answers is None:
        if "answer" not in frame.columns:
            raise DivscopeError(
                "responses: no 'answer' column, and every grader compares with a gold answer; "
                "pass --answers PROMPTS (a prompts file with 'prompt_id' and 'answer')."
            )
        gold = frame
    else:
        require_columns(frame.columns, ["prompt_id"], source="responses", what="--answers")
        require_columns(answers.columns, ["prompt_id", "answer"], source="answers", what="grading")
        answers = answers.select(pl.col("prompt_id").cast(pl.String), "answer")
        duplicated = answers.filter(pl.col("prompt_id").is_duplicated())
        if duplicated.height:
            raise DivscopeError(
                f"answers: prompt_id {duplicated['prompt_id'][0]!r} appears more than once."
            )
        gold = frame.select(pl.col("prompt_id").cast(pl.String)).join(
            answers, on="prompt_id", how="left", maintain_order="left"
        )
    missing = gold.filter(pl.col("answer").is_null())
    if missing.height:
        example = _key(missing.row(0, named=True))
        raise DivscopeError(
            f"{missing.height} response(s) have no gold answer, e.g. {example}; give every "
            "prompt an answer."
        )
    return gold["answer"].cast(pl.String).to_list()


def _verdict(value: object, grader: str) -> Verdict:
    if isinstance(value, Verdict):
        return value
    if isinstance(value, bool):
        return Verdict(value)
    raise DivscopeError(
        f"grader {grader!r} returned {value!r}; a grader must return a bool or a Verdict."
    )


def _key(row: dict) -> str:
    keys = [f"{c}={row[c]!r}" for c in ("prompt_id", "sample_id", "policy", "budget") if c in row]
    return ", ".join(keys) or "a row"
