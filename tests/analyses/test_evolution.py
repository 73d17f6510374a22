"""evolution over training checkpoints."""

from __future__ import annotations

import polars as pl
import pytest

from divscope.analyses import evolution, shared_trajectories
from divscope.errors import DivscopeError

KEY = {"prompt_id": ["a", "a", "a", "b"], "sample_id": [0, 0, 0, 0], "position": [0, 1, 2, 0]}


def test_evolution_hand_computed():
    tables = {
        200: pl.DataFrame({**KEY, "js": [0.3, 0.5, 0.0, 0.2]}),  # high: a0, a1, b0
        0: pl.DataFrame({**KEY, "js": [0.0, 0.0, 0.0, 0.0]}),  # high: none
        100: pl.DataFrame({**KEY, "js": [0.2, 0.0, 0.4, 0.0]}).lazy(),  # high: a0, a2
    }
    result = evolution(tables, percentiles=(50,))
    assert result["step"].to_list() == [0, 100, 200]
    assert result["n_high"].to_list() == [0, 2, 3]
    assert result["share_high"].to_list() == [0.0, 0.5, 0.75]
    assert result["jaccard_with_final"].to_list() == [0.0, 0.25, 1.0]  # {a0} / {a0, a1, a2, b0}
    assert result["p50"].to_list() == pytest.approx([0.0, 0.1, 0.25])


def test_evolution_reports_the_papers_percentiles_by_default():
    result = evolution({0: pl.DataFrame({**KEY, "js": [0.0, 0.1, 0.2, 0.3]})})
    percentiles = [c for c in result.columns if c.startswith("p") and c[1:].isdigit()]
    assert percentiles == ["p10", "p25", "p50", "p75", "p90", "p95", "p99"]
    assert result["p25"].to_list() == pytest.approx([0.075])


def test_evolution_without_divergent_positions_has_null_jaccard():
    result = evolution({0: pl.DataFrame({**KEY, "js": [0.0] * 4})})
    assert result["jaccard_with_final"].to_list() == [None]


def test_evolution_needs_tables():
    with pytest.raises(DivscopeError, match="no tables"):
        evolution({})


def _shared_reference(tables: dict[int, pl.DataFrame]) -> dict[int, bool]:
    """The obvious reference: the sets of (key, token_id) rows of each step and the final's."""
    rows = {
        s: set(t.select("prompt_id", "sample_id", "position", "token_id").rows())
        for s, t in tables.items()
    }
    return {s: rows[s] == rows[max(rows)] for s in sorted(rows)}


def test_sampled_trajectories_leave_the_overlap_null():
    # step 10 scored other responses (a monitor sampling the policy): other lengths and tokens;
    # step 20 the final's responses (same keys, same tokens); step 30 same keys, other tokens.
    final = pl.DataFrame({**KEY, "token_id": [1, 2, 3, 4], "js": [0.3, 0.5, 0.0, 0.2]})
    tables = {
        10: pl.DataFrame({"prompt_id": ["a", "b"], "sample_id": [0, 0], "position": [0, 0],
                          "token_id": [1, 4], "js": [0.4, 0.0]}),
        20: final.with_columns(js=pl.Series([0.2, 0.0, 0.0, 0.0])),
        30: final.with_columns(token_id=pl.Series([1, 2, 9, 4])),
        40: final,
    }  # fmt: skip
    result = evolution(tables, percentiles=(50,))
    assert result["same_trajectories"].to_list() == [False, True, False, True]
    assert result["same_trajectories"].to_list() == list(_shared_reference(tables).values())
    # step 20: {a0} against the final's {a0, a1, b0}
    assert result["jaccard_with_final"].to_list() == [None, pytest.approx(1 / 3), None, 1.0]
    assert result["share_high"].to_list() == [0.5, 0.25, 0.75, 0.75]  # drawn at every step
    assert result["p50"].to_list() == pytest.approx([0.2, 0.0, 0.25, 0.25])


def test_shared_trajectories_on_keys_alone_without_token_ids():
    tables = {1: pl.DataFrame({**KEY, "js": [0.0] * 4}), 2: pl.DataFrame({**KEY, "js": [1.0] * 4})}
    assert shared_trajectories(tables) == {1: True, 2: True}
    shorter = {1: tables[1].head(3), 2: tables[2]}
    assert shared_trajectories(shorter) == {1: False, 2: True}
