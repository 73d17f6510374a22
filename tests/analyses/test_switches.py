"""threshold_sensitivity, threshold_curves, map_agreement, switch_pairs and takeover_planning,
hand-computed."""

from __future__ import annotations

import polars as pl
import pytest

from divscope.analyses import (
    cross_sampling_curve,
    map_agreement,
    switch_pairs,
    takeover_planning,
    threshold_curves,
    threshold_sensitivity,
)


def sweep() -> pl.DataFrame:
    """forward at two eps (two prompts each) and controls, which the sweep leaves out."""
    return pl.DataFrame(
        {
            "prompt_id": ["a", "b", "a", "b", "a"],
            "policy": ["forward"] * 4 + ["base"],
            "budget": [-1] * 5,
            "eps": [0.01, 0.01, 0.1, 0.1, None],
            "n_tokens": [1000, 950, 1000, 1000, 900],
            "n_switches": [80, 70, 10, 6, 0],
            "n_effective": [40, 36, 5, 3, 0],
            "n_effective_coupled": [60, 50, 8, 4, 0],
            "correct": [True, False, True, None, False],
        }
    )


def test_threshold_sensitivity_counts_and_ratios():
    table = threshold_sensitivity(sweep())
    assert table["eps"].to_list() == [0.01, 0.1]
    low = table.row(0, named=True)
    assert (low["n_responses"], low["switches"], low["effective"]) == (2, 150, 76)
    assert low["effective_coupled"] == 110
    assert low["effective_ratio"] == pytest.approx(76 / 150)
    assert low["effective_coupled_ratio"] == pytest.approx(110 / 150)
    assert low["switches_per_response"] == 75.0  # the paper's "75 events"
    assert low["effective_per_response"] == 38.0  # "38 effective"
    assert low["tokens_per_response"] == 975.0
    assert low["effective_token_share"] == pytest.approx(38 / 975)  # "3.90% effective tokens"
    assert low["effective_coupled_per_response"] == 55.0
    assert low["effective_coupled_token_share"] == pytest.approx(55 / 975)
    assert low["accuracy"] == 0.5
    assert table.row(1, named=True)["accuracy"] == 1.0  # the ungraded response is skipped


def test_threshold_sensitivity_without_coupled_counts():
    table = threshold_sensitivity(sweep().drop("n_effective_coupled"))
    assert table["effective_coupled"].to_list() == [None, None]
    assert table["effective_coupled_ratio"].to_list() == [None, None]


def pair_results() -> pl.DataFrame:
    """Two forward responses and a reverse one; at position 2 of the first the RL token equals
    the base draw (not effective)."""
    return pl.DataFrame(
        {
            "prompt_id": ["a", "b", "a"],
            "policy": ["forward", "forward", "reverse"],
            "budget": [-1, -1, -1],
            "response_ids": [[1, 7, 9, 4], [7, 8], [3, 5]],
            "switch_positions": [[1, 2, 3], [0], [1]],
            "switch_primary_ids": [[6, 9, 5], [6], [2]],
            "switch_primary_tokens": [[" So", " x", " the"], [" So"], [" Wait"]],
            "switch_tokens": [[" Wait", " x", " a"], [" Wait"], [" So"]],
        }
    )


def test_switch_pairs_count_effective_swaps_per_setting():
    table = switch_pairs(pair_results())
    assert table.select("policy", "primary_token", "token", "count", "n_switches").rows() == [
        ("forward", " So", " Wait", 2, 3),
        ("forward", " the", " a", 1, 3),
        ("reverse", " Wait", " So", 1, 1),
    ]
    assert table["pair_share"].to_list() == pytest.approx([2 / 3, 1 / 3, 1.0])


def test_switch_pairs_options():
    every = switch_pairs(pair_results(), policy="forward", effective_only=False, top=2)
    assert every.select("primary_token", "token", "count").rows() == [
        (" So", " Wait", 2),
        (" the", " a", 1),
    ]
    assert every["n_switches"].to_list() == [4, 4]


def test_takeover_planning_against_the_token_table():
    results = pl.DataFrame(
        {
            "prompt_id": ["a", "b", "a"],
            "policy": ["gated", "gated", "forward"],
            "budget": [-1, -1, -1],
            "switch_tokens": [[" Wait", " 3", "Let"], [" x"], [" Wait"]],
        }
    )
    tokens = pl.DataFrame({"token": [" wait", " the", " x", " y", " so", "\n", " a", " b"]})
    row = takeover_planning(results, tokens).row(0, named=True)
    assert (row["n_takeovers"], row["n_planning"]) == (4, 2)
    assert row["share_takeover"] == 0.5
    assert row["share_global"] == 2 / 8  # "wait" and "so" of all 8 rows, whitespace included
    assert row["enrichment"] == 2.0
    alone = takeover_planning(results).row(0, named=True)
    assert (alone["share_global"], alone["enrichment"]) == (None, None)


def map_results() -> pl.DataFrame:
    """Online and retrospective forward at eps 0.1 over prompts a and b, a control without JS."""
    return pl.DataFrame(
        {
            "prompt_id": ["a", "b", "a", "b", "b", "a"],
            "policy": ["forward"] * 5 + ["base"],
            "budget": [-1] * 6,
            "eps": [0.1] * 5 + [None],
            "map": ["online"] * 2 + ["retrospective"] * 3 + [None],
            "switch_js": [[0.3, 0.2], [0.5], [0.3, 0.05, 0.1], [0.01], [], None],
        },
        schema_overrides={"switch_js": pl.List(pl.Float32)},
    )


def test_map_agreement_counts_switches_above_eps():
    table = map_agreement(map_results(), n_boot=200)
    assert table["map"].to_list() == ["online", "retrospective"]
    online, retrospective = table.rows(named=True)
    assert (online["n_switches"], online["n_above"], online["agreement"]) == (3, 3, 1.0)
    assert online["agreement_low"] == online["agreement_high"] == 1.0
    # 0.3 > 0.1; 0.05, 0.01 and 0.1 (float32 0.1 = eps in float32: the rule is js > eps) are not.
    assert (retrospective["n_responses"], retrospective["n_prompts"]) == (3, 2)
    assert (retrospective["n_switches"], retrospective["n_above"]) == (4, 1)
    assert retrospective["agreement"] == pytest.approx(1 / 4)
    low, high = retrospective["agreement_low"], retrospective["agreement_high"]
    assert 0 <= low <= 1 / 4 <= high <= 1 / 3 + 1e-12  # resamples: a alone 1/3, b alone 0


def test_map_agreement_without_switches_is_null():
    results = map_results().with_columns(switch_js=pl.lit([], pl.List(pl.Float32)))
    table = map_agreement(results, n_boot=20)
    assert table["agreement"].to_list() == [None, None]
    assert table["n_switches"].to_list() == [0, 0]


def test_threshold_curves_join_recovery_and_both_counts():
    results = pl.DataFrame(
        {
            "prompt_id": ["a", "b"] * 6,
            "policy": ["base"] * 2 + ["rl"] * 2 + ["forward"] * 8,
            "budget": [-1] * 4 + [1, 1, 2, 2] * 2,
            "eps": [None] * 4 + [0.05] * 4 + [0.2] * 4,
            "correct": [False, False, True, True] + [True, False, True, True]
            + [False, False, True, False],
            "n_tokens": [10] * 12,
            "n_switches": [0] * 4 + [1, 1, 2, 2, 1, 0, 1, 1],
            "n_effective": [0] * 4 + [1, 1, 2, 1, 1, 0, 1, 1],
            "n_effective_coupled": [0] * 4 + [1, 0, 1, 1, 0, 0, 1, 0],
        }
    )  # fmt: skip
    table = threshold_curves(results, n_boot=50)
    assert table.select("eps", "budget").rows() == [(0.05, 1), (0.05, 2), (0.2, 1), (0.2, 2)]
    assert table["recovery"].to_list() == [0.5, 1.0, 0.0, 0.5]
    assert table["effective_ratio"].to_list() == [1.0, 0.75, 1.0, 1.0]
    assert table["effective_coupled_ratio"].to_list() == [0.5, 0.5, 0.0, 0.5]
    curve = cross_sampling_curve(results, n_boot=50).filter(pl.col("eps").is_not_null())
    assert table["recovery_low"].to_list() == curve["recovery_low"].to_list()
    sensitivity = threshold_sensitivity(results)
    assert table.select(sensitivity.columns).equals(sensitivity)
