"""Accuracy of graded responses: mean@n with a problem-level bootstrap interval.

The estimators themselves (`pass_at_k`, `bootstrap_ci`) live in `divscope.estimators`, once.

>>> graded = pl.DataFrame({"prompt_id": ["a", "a", "b", "b"],
...                        "correct": [True, False, True, True]})
>>> mean_at_n(graded).estimate
0.75
"""

from __future__ import annotations

import polars as pl

from divscope.errors import DivscopeError
from divscope.estimators import Interval, bootstrap_ci
from divscope.schema import require_columns


def mean_at_n(
    graded: pl.DataFrame, *, n_boot: int = 1000, seed: int = 0, confidence: float = 0.95
) -> Interval:
    """Mean over prompts of each prompt's share of correct responses, with a bootstrap CI.

    Ungraded responses (`correct` null) are skipped; the interval resamples prompts.

    Args:
        graded: responses with `prompt_id` and `correct`.
        n_boot: bootstrap resamples of prompts.
        seed: seed of the bootstrap.
        confidence: coverage of the interval.

    Raises:
        DivscopeError: no response is graded.
    """
    require_columns(graded.columns, ["prompt_id", "correct"], source="graded", what="mean@n")
    per_prompt = (
        graded.drop_nulls("correct")
        .group_by("prompt_id")
        .agg(pl.col("correct").cast(pl.Float64).mean())
        .sort("prompt_id")  # the resamples depend on the order of the problems
    )
    if per_prompt.is_empty():
        raise DivscopeError("mean@n: no graded responses (all `correct` are null).")
    return bootstrap_ci(
        per_prompt["correct"].to_numpy(), n_boot=n_boot, seed=seed, confidence=confidence
    )
