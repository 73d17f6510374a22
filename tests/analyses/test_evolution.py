"""evolution over training checkpoints."""

from __future__ import annotations

import polars as pl
import pytest

from divscope.analyses import evolution
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
