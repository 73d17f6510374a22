"""positional_profile, early_density and example_response."""

from __future__ import annotations

import polars as pl
import pytest

from divscope.analyses import early_density, example_response, positional_profile


def response(js: list[float]) -> pl.DataFrame:
    n = len(js)
    return pl.DataFrame({"position": list(range(n)), "n_tokens": [n] * n, "js": js})


def test_positional_bins_are_exact_integer_fractions():
    # 7/20 is 0.34999999 in float32: the bin comes from position and n_tokens, not rel_position.
    frame = pl.DataFrame({"position": [7], "n_tokens": [20], "js": [1.0]})
    profile = positional_profile(frame, bins=20)
    assert profile.filter(pl.col("count") > 0)["bin"].to_list() == [7]


def test_positional_profile_hand_computed():
    frame = pl.concat([response([0.4, 0.2, 0.0, 0.0]), response([0.6, 0.0])])
    profile = positional_profile(frame, bins=2)
    assert profile["bin_start"].to_list() == [0.0, 0.5]
    assert profile["count"].to_list() == [3, 3]
    assert profile["mean"].to_list() == pytest.approx([0.4, 0.0])
    assert profile["median"].to_list() == [0.4, 0.0]
    assert profile["p10"].to_list() == pytest.approx([0.24, 0.0])  # 0.2 + 0.2 · (0.4 − 0.2)
    assert profile["p90"].to_list() == pytest.approx([0.56, 0.0])


def test_positional_profile_keeps_empty_bins():
    profile = positional_profile(response([0.1]), bins=4)
    assert profile["count"].to_list() == [1, 0, 0, 0]
    assert profile["mean"].to_list() == [0.1, None, None, None]


def test_early_density_hand_computed():
    frame = response([0.9, 0.1, 0.0, 0.0, 0.0, 0.0, 0.0, 0.8, 0.0, 0.0])
    density = early_density(frame, top_share=0.2, bins=2)
    assert density["count"].to_list() == [1, 1]
    assert density["density"].to_list() == [1.0, 1.0]
    density = early_density(frame, top_share=0.1, bins=5)
    assert density["count"].to_list() == [1, 0, 0, 0, 0]
    assert density["density"].to_list() == [5.0, 0, 0, 0, 0]
    assert density["density_all"].to_list() == [1.0] * 5


def test_early_density_top_count_rounds_up():
    density = early_density(response([0.5, 0.4, 0.3]), top_share=0.5, bins=3)
    assert density["count"].to_list() == [1, 1, 0]  # ⌈1.5⌉ = 2 tokens


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
