"""delta_alignment: mean delta cosine per setting with a paired prompt bootstrap, and its
profile over relative position."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from divscope.analyses import delta_alignment
from divscope.estimators import problem_bootstrap_weights


def cosines() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "prompt_id": ["a", "a", "b", "a", "b"],
            "policy": ["rast", "rast", "rast", "base", "base"],
            "budget": [-1] * 5,
            "delta_cosine": [[1.0, 0.5], [0.0, 0.0, 0.0, 0.0], [None, 0.8], [0.2], None],
        },
        schema_overrides={"delta_cosine": pl.List(pl.Float32)},
    )


def test_delta_alignment_means_over_responses():
    result = delta_alignment(cosines(), bins=2, n_boot=50)
    rows = result.summary.select("policy", "n_responses", "delta_cosine").rows()
    # rast responses: 0.75, 0, 0.8 (the null step skipped); base: 0.2 (no cosine for b).
    assert rows[0] == ("base", 1, pytest.approx(0.2))
    assert rows[1] == ("rast", 3, pytest.approx((0.75 + 0.0 + 0.8) / 3))
    profile = result.profile.filter(policy="rast").select("bin_start", "delta_cosine", "n_steps")
    # Bins of t/T: [1.0 | 0.5], [0, 0 | 0, 0], [null | 0.8].
    assert profile.rows() == [
        (0.0, pytest.approx(1 / 3), 3),
        (0.5, pytest.approx((0.5 + 0 + 0 + 0.8) / 4), 4),
    ]


def test_delta_alignment_interval_is_a_prompt_bootstrap():
    n_boot, seed = 200, 4
    result = delta_alignment(cosines(), n_boot=n_boot, seed=seed)
    row = result.summary.filter(policy="rast").row(0, named=True)
    means = {"a": [0.75, 0.0], "b": [0.8]}
    weights = problem_bootstrap_weights(2, n_boot=n_boot, seed=seed)  # prompts a, b
    resamples = []
    for w_a, w_b in weights:
        drawn = means["a"] * w_a + means["b"] * w_b
        resamples.append(sum(drawn) / len(drawn))
    low, high = np.quantile(resamples, [0.025, 0.975])
    assert (row["delta_cosine_low"], row["delta_cosine_high"]) == pytest.approx((low, high))
