"""The monitor's statistics: the analyses' values, and a slow obvious reference on the lab."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from divscope.analyses import (
    PLANNING_WORDS,
    lorenz,
    normalized_token,
    planning_enrichment,
    sparsity,
    topk_overlap,
)
from divscope.monitor import STATISTICS, step_statistics


@pytest.fixture(scope="module")
def lab_probe_tokens(scorer, lab_rl) -> pl.DataFrame:
    return scorer.score(lab_rl, step=0)


def test_names_are_the_statistics(lab_probe_tokens):
    assert tuple(step_statistics(lab_probe_tokens)) == STATISTICS
    assert all(name.startswith("divscope/") for name in STATISTICS)


def test_statistics_are_the_analyses(lab_probe_tokens):
    tokens = lab_probe_tokens
    stats = step_statistics(tokens)
    spread = sparsity(tokens, "js", thresholds=(1e-3,), percentiles=(50, 90, 95, 99))
    overlap = topk_overlap(tokens, "js", thresholds=(0.1,), ks=(1,))
    assert stats["divscope/js_below_0.001"] == spread.share_below[1e-3]
    assert stats["divscope/js_above_0.1"] == overlap["count"][0] / tokens.height
    assert stats["divscope/overlap_1_js_above_0.1"] == overlap["overlap_1"][0]
    for q in (50, 90, 95, 99):
        assert stats[f"divscope/js_p{q}"] == spread.percentiles[q]
    assert stats["divscope/ce_gini"] == lorenz(tokens, "ce_base_rl").gini
    planning = planning_enrichment(tokens, "ce_base_rl", top_share=0.01)
    assert stats["divscope/planning_share_top_1pct"] == planning.share_top


def test_statistics_match_a_slow_reference(lab_probe_tokens):
    tokens = lab_probe_tokens
    stats = step_statistics(tokens)
    js = tokens["js"].to_numpy().astype(np.float64)
    n = js.size
    assert stats["divscope/n_tokens"] == n
    assert stats["divscope/n_responses"] == len(set(tokens.select("prompt_id", "sample_id").rows()))
    assert stats["divscope/js_above_0.1"] == sum(v > 0.1 for v in js) / n
    assert stats["divscope/js_below_0.001"] == sum(v < 1e-3 for v in js) / n
    assert stats["divscope/js_mean"] == pytest.approx(sum(js) / n, rel=1e-12)
    ordered = sorted(js)
    for q in (50, 90, 95, 99):  # linear interpolation between the order statistics
        h = (n - 1) * q / 100
        lo = math.floor(h)
        value = ordered[lo] + (h - lo) * (ordered[min(lo + 1, n - 1)] - ordered[lo])
        assert stats[f"divscope/js_p{q}"] == pytest.approx(value, rel=1e-12, abs=1e-15)
    # Gini as the mean absolute difference over all pairs, halved and divided by the mean.
    ce = tokens["ce_base_rl"].to_numpy().astype(np.float64)
    pairs = sum(abs(a - b) for a in ce for b in ce)
    assert stats["divscope/ce_gini"] == pytest.approx(pairs / (2 * n * n * ce.mean()), rel=1e-9)
    # Planning words among the ceil(1%) highest-CE tokens.
    words = tokens.select(normalized_token().alias("word"), "ce_base_rl")
    top = sorted(words.rows(), key=lambda row: -row[1])[: math.ceil(0.01 * n)]
    planning = sum(word in PLANNING_WORDS for word, _ in top) / len(top)
    assert stats["divscope/planning_share_top_1pct"] == planning
    # `topk_overlap` averages the Float32 column in float32: equal to float32 precision.
    overlap = tokens["overlap_1"].to_numpy().astype(np.float64)
    assert stats["divscope/overlap_1"] == pytest.approx(overlap.mean(), rel=1e-6)
    high = overlap[js > 0.1]
    assert stats["divscope/overlap_1_js_above_0.1"] == pytest.approx(high.mean(), rel=1e-6)


def test_a_hand_computed_table():
    frame = pl.DataFrame(
        {
            "prompt_id": ["a", "a", "b", "b"],
            "sample_id": [0, 0, 0, 1],
            "token": [" the", " Wait", " x", " so"],
            "js": [0.0, 0.0005, 0.2, 0.4],
            "ce_base_rl": [0.0, 0.0, 0.0, 1.0],
            "overlap_1": [1.0, 1.0, 0.0, 1.0],
        }
    )
    stats = step_statistics(frame)
    assert stats["divscope/js_above_0.1"] == 0.5
    assert stats["divscope/js_below_0.001"] == 0.5
    assert stats["divscope/js_p50"] == pytest.approx(0.10025)
    assert stats["divscope/ce_gini"] == 0.75  # all of the mass on 1 token of 4
    assert stats["divscope/planning_share_top_1pct"] == 1.0  # the top token, " so"
    assert stats["divscope/overlap_1"] == 0.75
    assert stats["divscope/overlap_1_js_above_0.1"] == 0.5
    assert stats["divscope/n_responses"] == 3
    no_high = step_statistics(frame.with_columns(js=pl.lit(0.0)))
    assert math.isnan(no_high["divscope/overlap_1_js_above_0.1"])
