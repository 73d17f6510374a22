"""entropy_by_divergence, entropy_density, topk_overlap, rank_reordering, tail_promotion."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from divscope.analyses import (
    entropy_by_divergence,
    entropy_density,
    rank_reordering,
    tail_promotion,
    topk_overlap,
)
from divscope.schema import OVERLAP_KS


def test_entropy_by_divergence_hand_computed():
    frame = pl.DataFrame(
        {
            "js": [0.0, 0.05, 0.1, 0.3, 0.5],  # 0.1 is exactly the split: in neither group
            "entropy_base": [0.1, 0.3, 9.0, 2.0, 4.0],
            "entropy_rl": [0.2, 0.2, 9.0, 1.0, 1.0],
        }
    )
    result = entropy_by_divergence(frame)
    assert result["group"].to_list() == ["low", "high"]
    assert result["count"].to_list() == [2, 2]
    assert result["mean_entropy_base"].to_list() == pytest.approx([0.2, 3.0])
    assert result["median_entropy_rl"].to_list() == pytest.approx([0.2, 1.0])


def test_entropy_by_divergence_empty_group_is_null():
    frame = pl.DataFrame({"js": [0.0], "entropy_base": [1.0], "entropy_rl": [1.0]})
    result = entropy_by_divergence(frame, split=0.5)
    assert result.row(1) == ("high", 0, None, None, None, None)


def test_topk_overlap_hand_computed():
    frame = pl.DataFrame(
        {"js": [0.0, 0.06, 0.3], "overlap_1": [1.0, 0.0, 0.0], "overlap_2": [1.0, 1.0, 0.5]}
    )
    result = topk_overlap(frame, thresholds=(0.01, 0.1, 0.5), ks=(1, 2))
    assert result.rows() == [
        (0.01, 2, 0.0, 0.75),
        (0.1, 1, 0.0, 0.5),
        (0.5, 0, None, None),
    ]


@given(
    st.lists(
        st.tuples(st.floats(0, 0.7), st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=30
    )
)
def test_topk_overlap_means_stay_in_unit_interval(rows):
    frame = pl.DataFrame(rows, schema=["js", "overlap_1", "overlap_50"], orient="row")
    result = topk_overlap(frame, ks=(1, 50))
    for column in ("overlap_1", "overlap_50"):
        assert all(0.0 <= v <= 1.0 for v in result[column].drop_nulls())


def test_topk_overlap_defaults_cover_every_overlap_column():
    frame = pl.DataFrame({"js": [0.5], **{f"overlap_{k}": [1.0] for k in OVERLAP_KS}})
    assert topk_overlap(frame).columns[2:] == [f"overlap_{k}" for k in OVERLAP_KS]


def test_rank_reordering_hand_computed():
    frame = pl.DataFrame(
        {
            "js": [0.5, 0.5, 0.5, 0.5, 0.0],  # the last position is not divergent
            "rl_top1_rank_in_base": [1, 2, 4, 40, 1],
            "rl_top2_rank_in_base": [2, 1, 1, 3, 2],
            "rl_top3_rank_in_base": [3, 3, 2, 1, 3],
        }
    )
    result = rank_reordering(frame, max_rank=5)
    assert result.n_positions == 4
    assert result.within_base_top1 == {1: 0.25, 2: 0.5, 3: 0.25}
    assert result.within_base_top3 == {1: 0.5, 2: 1.0, 3: 1.0}
    top1 = result.distribution.filter(rl_token=1)
    assert top1["base_rank"].to_list() == [1, 2, 3, 4, 5, 6]
    assert top1["count"].to_list() == [1, 1, 0, 1, 0, 1]  # rank 40 pooled into 6 = "beyond 5"
    assert top1["share"].to_list() == [0.25, 0.25, 0.0, 0.25, 0.0, 0.25]


def test_rank_reordering_without_divergent_positions_is_nan():
    frame = pl.DataFrame({"js": [0.0]} | {f"rl_top{k}_rank_in_base": [1] for k in (1, 2, 3)})
    result = rank_reordering(frame)
    assert result.n_positions == 0 and math.isnan(result.within_base_top1[1])


def test_tail_promotion_hand_computed():
    frame = pl.DataFrame(
        {
            "js": [0.5, 0.5, 0.5, 0.5, 0.0],
            "p_base_of_rl_top1": [0.001, 0.005, 0.05, 0.4, 0.0],
            "p_top1_rl": [0.9, 0.5, 0.6, 0.8, 1.0],
        }
    )
    result = tail_promotion(frame, cutoffs=(1e-3, 1e-2, 0.1, 1.0))
    assert result.n_positions == 4
    assert result.curve["share"].to_list() == [0.0, 0.5, 0.75, 1.0]  # strictly below each cutoff
    assert (result.n_tail, result.tail_rl_prob_mean, result.tail_rl_prob_median) == (
        2,
        pytest.approx(0.7),
        pytest.approx(0.7),
    )


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
