"""threshold_sensitivity, switch_pairs and takeover_planning, hand-computed."""

from __future__ import annotations

import polars as pl
import pytest

from divscope.analyses import switch_pairs, takeover_planning, threshold_sensitivity


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
            "n_effective_independent": [60, 50, 8, 4, 0],
            "correct": [True, False, True, None, False],
        }
    )


def test_threshold_sensitivity_counts_and_ratios():
    table = threshold_sensitivity(sweep())
    assert table["eps"].to_list() == [0.01, 0.1]
    low = table.row(0, named=True)
    assert (low["n_responses"], low["switches"], low["effective"]) == (2, 150, 76)
    assert low["effective_independent"] == 110
    assert low["effective_ratio"] == pytest.approx(76 / 150)
    assert low["effective_independent_ratio"] == pytest.approx(110 / 150)
    assert low["switches_per_response"] == 75.0  # the paper's "75 events"
    assert low["effective_per_response"] == 38.0  # "38 effective"
    assert low["tokens_per_response"] == 975.0
    assert low["effective_token_share"] == pytest.approx(38 / 975)  # "3.90% effective tokens"
    assert low["effective_independent_token_share"] == pytest.approx(55 / 975)
    assert low["accuracy"] == 0.5
    assert table.row(1, named=True)["accuracy"] == 1.0  # the ungraded response is skipped


def test_threshold_sensitivity_without_independent_counts():
    table = threshold_sensitivity(sweep().drop("n_effective_independent"))
    assert table["effective_independent"].to_list() == [None, None]
    assert table["effective_independent_ratio"].to_list() == [None, None]


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
