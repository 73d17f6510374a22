"""The small analyses behind the figures: samples, entropy KDEs, ROC points, takeover knee."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from divscope.analyses import (
    auroc,
    entropy_density,
    example_response,
    failure_auroc,
    failure_roc,
    high_divergence_sample,
    most_frequent_words,
    pooled_controls,
    roc_points,
    sample_rows,
    takeover_knee,
)
from divscope.errors import DivscopeError


def test_sample_rows_is_seeded_and_reports_the_total():
    lazy = pl.LazyFrame({"x": range(100)})
    first = sample_rows(lazy, max_rows=10, seed=3)
    again = sample_rows(lazy, max_rows=10, seed=3)
    assert first.rows.equals(again.rows)
    assert (first.n_total, first.rows.height, first.sampled) == (100, 10, True)
    whole = sample_rows(lazy, max_rows=1000, seed=3)
    assert (whole.rows.height, whole.sampled) == (100, False)


def test_high_divergence_sample_keeps_only_rows_strictly_above():
    frame = pl.DataFrame({"js": [0.1, 0.2, 0.05], "p": [1.0, 2.0, 3.0]})
    assert high_divergence_sample(frame, ["p"], threshold=0.1).rows["p"].to_list() == [2.0]


def test_entropy_density_integrates_to_about_one():
    rng = np.random.default_rng(0)
    n = 4000
    frame = pl.DataFrame(
        {
            "js": np.r_[np.zeros(n), np.full(n, 0.5)],
            "entropy_base": np.r_[rng.exponential(0.3, n), rng.exponential(2.0, n)] + 0.5,
            "entropy_rl": np.r_[rng.exponential(0.2, n), rng.exponential(1.0, n)] + 0.5,
        }
    )
    result = entropy_density(frame, points=400, max_samples=1000, seed=1)
    assert result.n_tokens == {"low": n, "high": n}
    assert result.n_sampled == {"low": 1000, "high": 1000}
    for (group, model), curve in result.curves.group_by("group", "model"):
        area = np.trapezoid(curve["density"], curve["entropy"])
        assert area == pytest.approx(1.0, abs=0.06), (group, model)


def test_entropy_density_skips_degenerate_groups():
    frame = pl.DataFrame({"js": [0.0, 0.0], "entropy_base": [1.0, 1.0], "entropy_rl": [1.0, 2.0]})
    result = entropy_density(frame, points=3)
    assert result.curves.select("group", "model").unique().rows() == [("low", "rl")]
    assert result.n_tokens == {"low": 2, "high": 0}


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


def test_pooled_controls_relabels_only_controls():
    frame = pl.DataFrame(
        {"policy": ["base", "rl", "gated"], "budget": [2, 8, 8], "tau": [0.1, 0.2, 0.3]}
    )
    pooled = pooled_controls(frame).collect()
    assert pooled["budget"].to_list() == [-1, -1, 8]
    assert pooled["tau"].to_list() == [None, None, 0.3]


def results_frame(accuracy_by_eps: dict[float, float], n_prompts: int = 20) -> pl.DataFrame:
    """Gated results whose switch share grows with 1/eps, with base 0.2 and RL 0.8 controls."""
    rows = []
    for p in range(n_prompts):
        for policy, eps, accuracy, switches in (
            ("base", None, 0.2, 0),
            ("rl", None, 0.8, 0),
            *[("gated", e, a, round(10 / e)) for e, a in accuracy_by_eps.items()],
        ):
            for s in range(10):
                rows.append((f"p{p}", policy, -1, eps, s < round(accuracy * 10), 100, switches, 0))
    schema = ["prompt_id", "policy", "budget", "eps", "correct", "n_tokens", "n_switches"]
    return pl.DataFrame(rows, schema=[*schema, "n_effective"], orient="row")


def test_takeover_knee_finds_the_saturation_point():
    # Shares 1%, 2%, 5%, 10%: accuracy saturates at 5% of tokens taken over.
    frame = results_frame({10.0: 0.4, 5.0: 0.6, 2.0: 0.8, 1.0: 0.8})
    result = takeover_knee(frame, n_boot=20)
    curve = result.curve
    assert curve["switch_share"].to_list() == pytest.approx([0.01, 0.02, 0.05, 0.1])
    assert curve["eps"].to_list() == [10.0, 5.0, 2.0, 1.0]
    assert curve["accuracy"].to_list() == pytest.approx([0.4, 0.6, 0.8, 0.8])
    assert curve["recovery"].to_list() == pytest.approx([1 / 3, 2 / 3, 1.0, 1.0])
    assert result.knee_index == 2  # rescaled (4/9, 1): gain 5/9, the largest
    assert (result.base_accuracy, result.rl_accuracy) == pytest.approx((0.2, 0.8))


def test_takeover_knee_keeps_calibrations_apart():
    # Two gated calibrations at the same budget and eps: two points, not one pooled point.
    frame = results_frame({2.0: 0.4, 1.0: 0.8}).with_columns(
        pl.when(pl.col("policy") != "gated")
        .then(None)
        .when(pl.col("eps") == 2.0)
        .then(0.5)
        .otherwise(0.3)
        .alias("tau"),
        pl.when(pl.col("policy") == "gated").then(None).otherwise(pl.col("eps")).alias("eps"),
    )
    curve = takeover_knee(frame, n_boot=5).curve
    assert curve.columns[:3] == ["budget", "eps", "tau"]
    assert curve["tau"].to_list() == [0.5, 0.3]
    assert curve["accuracy"].to_list() == pytest.approx([0.4, 0.8])


def test_takeover_knee_without_a_knee_and_without_the_policy():
    result = takeover_knee(results_frame({2.0: 0.5, 1.0: 0.6}), n_boot=5)
    assert result.knee_index is None
    with pytest.raises(DivscopeError, match="no graded responses of policy 'gated'"):
        takeover_knee(results_frame({}), n_boot=5)


def test_example_response_prefers_short_responses_with_many_high_tokens():
    frame = pl.DataFrame(
        {
            "prompt_id": ["long"] * 5 + ["a"] * 2 + ["b"] * 2 + ["late"] * 5,
            "sample_id": [0] * 14,
            "position": [0, 1, 2, 3, 4, 0, 1, 0, 1, 0, 1, 2, 3, 4],
            "n_tokens": [5] * 5 + [2] * 4 + [5] * 5,
            "js": [0.5] * 5 + [0.0, 0.5, 0.0, 0.0] + [0.0, 0.0, 0.5, 0.5, 0.5],
        }
    )
    assert example_response(frame, max_tokens=2) == ("a", 0)
    # None fits in one token: only the first token of each counts, so "late" loses.
    assert example_response(frame, max_tokens=1) == ("long", 0)


def test_most_frequent_words_normalizes_and_skips_whitespace():
    frame = pl.DataFrame({"token": ["\n", "\n", "\n", " b", "B", " a", " a", " c"]})
    assert most_frequent_words(frame, top=2) == ["a", "b"]
    assert most_frequent_words(frame.head(3)) == []
