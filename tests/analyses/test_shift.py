"""entropy_by_divergence, entropy_density, topk_overlap, rank_reordering, tail_promotion,
entropy_iou."""

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
    entropy_iou,
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


def iou_table(metric, entropy, prompts=None) -> pl.DataFrame:
    n = len(metric)
    return pl.DataFrame(
        {
            "prompt_id": prompts or ["a"] * n,
            "sample_id": [0] * n,
            "position": list(range(n)),
            "ce_base_rl": metric,
            "entropy_base": entropy,
        }
    )


def test_entropy_iou_hand_computed():
    # 10 positions. Top 20% = 2 positions: by CE {0, 1}; by entropy {1, 5}: IoU 1/3.
    # Top 40% = 4: by CE {0, 1, 2, 3}; by entropy {1, 5, 2, 3}: |∩| 3, |∪| 5.
    frame = iou_table(
        [9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.0],
        [0.1, 5.0, 3.0, 2.5, 0.2, 4.0, 0.3, 0.4, 0.5, 0.6],
    )
    result = entropy_iou(frame, "ce_base_rl", shares=(0.2, 0.4, 1.0))
    assert result["n_top"].to_list() == [2, 4, 10]
    assert result["n_both"].to_list() == [1, 3, 10]
    assert result["iou"].to_list() == pytest.approx([1 / 3, 3 / 5, 1.0])
    # Random sets of m out of n share m²/n in expectation: 0.4 of 2 -> 0.4 / 3.6.
    assert result["chance_iou"][0] == pytest.approx(0.4 / 3.6)


def test_entropy_iou_breaks_ties_at_the_cut_by_position_key():
    # Top 2 of 4 by CE: 3.0 (a/1), then three tied at 1.0: the smallest key wins (a/0).
    # Top 2 by entropy: 2.0 at b/0, then a tie at 1.0 between a/0 and a/1: a/0.
    frame = iou_table([1.0, 3.0, 1.0, 1.0], [1.0, 1.0, 0.0, 2.0], ["a", "a", "b", "b"])
    frame = frame.with_columns(pl.Series("position", [0, 1, 1, 0]))
    expected = entropy_iou(frame, "ce_base_rl", shares=(0.5,))
    assert expected["n_both"].to_list() == [1]  # {a/0, a/1} ∩ {b/0, a/0}
    assert expected["iou"].to_list() == pytest.approx([1 / 3])
    for seed in range(5):  # the row order does not matter
        shuffled = frame.sample(fraction=1.0, shuffle=True, seed=seed)
        assert entropy_iou(shuffled, "ce_base_rl", shares=(0.5,)).equals(expected)


def test_entropy_iou_matches_a_brute_force_sort():
    rng = np.random.default_rng(3)
    n = 500
    metric = rng.integers(0, 40, n).astype(np.float64)  # many ties
    entropy = rng.integers(0, 40, n).astype(np.float64)
    frame = iou_table(metric.tolist(), entropy.tolist())
    for share in (0.01, 0.05, 0.1, 0.2, 0.5):
        m = int(np.ceil(share * n - 1e-9))
        # Descending value, then ascending position (the key): a stable sort of -value.
        top_metric = set(np.argsort(-metric, kind="stable")[:m])
        top_entropy = set(np.argsort(-entropy, kind="stable")[:m])
        iou = len(top_metric & top_entropy) / len(top_metric | top_entropy)
        row = entropy_iou(frame, "ce_base_rl", shares=(share,)).row(0, named=True)
        assert (row["n_top"], row["iou"]) == (m, pytest.approx(iou))


def test_entropy_iou_skips_nulls_and_handles_an_empty_table():
    frame = iou_table([2.0, None, 1.0], [1.0, 5.0, 0.5])
    assert entropy_iou(frame, "ce_base_rl", shares=(0.5,))["iou"].to_list() == [1.0]
    empty = entropy_iou(frame.clear(), "ce_base_rl", shares=(0.5,))
    assert empty.row(0) == (0.5, 0, 0, None, None)
