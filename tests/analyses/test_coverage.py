"""path_coverage: RAST's path coverage rate, per response and pooled, with prompt-bootstrap CIs."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from divscope.analyses import path_coverage
from divscope.errors import DivscopeError
from divscope.estimators import problem_bootstrap_weights


def coverage_table() -> pl.DataFrame:
    """Three prompts; covered = top1_base == token_id.

    p0/0: 4 tokens, 3 covered (0.75); p0/1: 2 tokens, 0 covered (0.0);
    p1/0: 2 tokens, 2 covered (1.0); p2/0: 4 tokens, 1 covered (0.25).
    """
    rows = [
        ("p0", 0, [1, 2, 3, 4], [1, 2, 3, 0]),
        ("p0", 1, [5, 6], [0, 0]),
        ("p1", 0, [7, 8], [7, 8]),
        ("p2", 0, [1, 1, 1, 1], [1, 2, 2, 2]),
    ]
    return pl.DataFrame(
        [
            {"prompt_id": p, "sample_id": s, "token_id": t, "top1_base": b}
            for p, s, tokens, base in rows
            for t, b in zip(tokens, base, strict=True)
        ]
    )


def test_path_coverage_hand_computed():
    result = path_coverage(coverage_table(), n_boot=200)
    assert (result.n_tokens, result.n_responses, result.n_prompts) == (12, 4, 3)
    assert result.mean.estimate == pytest.approx((0.75 + 0.0 + 1.0 + 0.25) / 4)
    assert result.pooled.estimate == pytest.approx(6 / 12)
    assert result.mean.confidence == 0.95


def test_path_coverage_intervals_match_a_brute_force_prompt_bootstrap():
    frame = coverage_table()
    result = path_coverage(frame, n_boot=300, seed=7, confidence=0.9)
    prompts = ["p0", "p1", "p2"]
    # The same resamples: counts of each prompt (sorted by prompt_id) per bootstrap row.
    counts = problem_bootstrap_weights(3, n_boot=300, seed=7)
    means, pooled = [], []
    for row in counts:
        chosen = [p for p, c in zip(prompts, row, strict=True) for _ in range(c)]
        resample = pl.concat([frame.filter(prompt_id=p) for p in chosen])
        per_response = resample.group_by("prompt_id", "sample_id", maintain_order=True).agg(
            (pl.col("token_id") == pl.col("top1_base")).mean()
        )
        # Copies of a prompt share a key, so each response appears once, weighted by its count.
        weights = [row[prompts.index(p)] for p in per_response["prompt_id"]]
        means.append(np.average(per_response["token_id"].to_numpy(), weights=weights))
        pooled.append((resample["token_id"] == resample["top1_base"]).mean())
    low, high = np.quantile(means, [0.05, 0.95])
    assert (result.mean.low, result.mean.high) == pytest.approx((low, high))
    low, high = np.quantile(pooled, [0.05, 0.95])
    assert (result.pooled.low, result.pooled.high) == pytest.approx((low, high))


def test_path_coverage_skips_null_positions():
    frame = pl.DataFrame(
        {"prompt_id": ["a"] * 3, "sample_id": [0] * 3, "token_id": [1, 2, 3],
         "top1_base": [1, None, 0]}
    )  # fmt: skip
    result = path_coverage(frame, n_boot=10)
    assert (result.n_tokens, result.pooled.estimate) == (2, 0.5)


def test_path_coverage_needs_positions_and_columns():
    empty = coverage_table().clear()
    with pytest.raises(DivscopeError, match="no position has both"):
        path_coverage(empty)
    with pytest.raises(DivscopeError, match="missing column.*'top1_base'"):
        path_coverage(coverage_table().drop("top1_base"))
