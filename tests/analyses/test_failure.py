"""response_scores, failure_auroc, roc_points and failure_roc."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy.stats import mannwhitneyu

from divscope.analyses import failure_auroc, failure_roc, response_scores, roc_points
from divscope.errors import DivscopeError
from divscope.estimators import auroc


def graded(n_prompts: int = 6, samples: int = 4, length: int = 8, seed: int = 0) -> pl.DataFrame:
    """Responses whose wrong answers carry somewhat larger divergence."""
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(n_prompts):
        for s in range(samples):
            correct = bool(rng.random() < 0.5)
            for _ in range(length):
                rows.append(
                    {
                        "prompt_id": f"p{p}",
                        "sample_id": s,
                        "correct": correct,
                        "js": rng.random() * (0.5 if correct else 0.7),
                        "entropy_base": rng.random(),
                    }
                )
    return pl.DataFrame(rows)


def test_response_scores_average_the_top_n_values():
    frame = pl.DataFrame(
        {
            "prompt_id": ["a"] * 3 + ["b"],
            "sample_id": [0, 0, 0, 0],
            "correct": [True, True, True, False],
            "js": [0.1, 0.5, 0.3, 0.2],
            "entropy_base": [1.0, 1.0, 4.0, 3.0],
        }
    )
    scores = response_scores(frame, top_n=2)
    assert scores.rows() == [("a", 0, True, pytest.approx(0.4), 2.5), ("b", 0, False, 0.2, 3.0)]


def test_failure_auroc_matches_mann_whitney_on_response_scores():
    frame = graded()
    result = failure_auroc(frame, top_n=3, n_boot=100)
    scores = response_scores(frame, top_n=3)
    failed = ~scores["correct"].to_numpy()
    values = scores["score"].to_numpy()
    u = mannwhitneyu(values[failed], values[~failed]).statistic
    assert result.divergence.estimate == pytest.approx(u / (failed.sum() * (~failed).sum()))
    assert (result.n_responses, result.n_failures, result.n_prompts) == (24, failed.sum(), 6)
    assert result.divergence.low <= result.divergence.estimate <= result.divergence.high


def test_failure_auroc_bootstrap_is_seeded():
    frame = graded()
    assert failure_auroc(frame, n_boot=50, seed=3) == failure_auroc(frame, n_boot=50, seed=3)
    assert failure_auroc(frame, n_boot=50, seed=3) != failure_auroc(frame, n_boot=50, seed=4)


def test_failure_auroc_skips_ungraded_responses():
    frame = graded().with_columns(
        pl.when(pl.col("prompt_id") == "p0")
        .then(None)
        .otherwise(pl.col("correct"))
        .alias("correct")
    )
    assert failure_auroc(frame, n_boot=10).n_prompts == 5


def test_failure_auroc_needs_both_outcomes():
    frame = graded().with_columns(pl.lit(True).alias("correct"))
    with pytest.raises(DivscopeError, match="both correct and wrong"):
        failure_auroc(frame)


def test_roc_points_area_is_the_auroc():
    rng = np.random.default_rng(0)
    scores = np.round(rng.random(300), 2)  # ties included
    positive = rng.random(300) < scores
    fpr, tpr = roc_points(scores, positive)
    assert np.trapezoid(tpr, fpr) == pytest.approx(auroc(scores, positive))
    assert (fpr[0], tpr[0], fpr[-1], tpr[-1]) == (0.0, 0.0, 1.0, 1.0)


def test_failure_roc_matches_failure_auroc():
    rng = np.random.default_rng(1)
    rows = 40 * 10
    frame = pl.DataFrame(
        {
            "prompt_id": np.repeat([f"p{i}" for i in range(10)], 40),
            "sample_id": np.tile(np.repeat(np.arange(4), 10), 10),
            "correct": np.repeat(rng.random(40) < 0.5, 10),
            "js": rng.random(rows),
            "entropy_base": rng.random(rows),
        }
    )
    curves = failure_roc(frame, top_n=3)
    result = failure_auroc(frame, top_n=3, n_boot=10)
    for predictor, expected in (("js", result.divergence), ("entropy_base", result.entropy)):
        curve = curves.filter(predictor=predictor)
        area = np.trapezoid(curve["true_positive_rate"], curve["false_positive_rate"])
        assert area == pytest.approx(expected.estimate)


def test_failure_roc_needs_both_outcomes():
    frame = pl.DataFrame(
        {"prompt_id": ["a"], "sample_id": [0], "correct": [True], "js": [0.1], "entropy_base": [1]}
    )
    with pytest.raises(DivscopeError, match="both correct and wrong"):
        failure_roc(frame)
