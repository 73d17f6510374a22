"""The evolution directory: written step by step, read back by the token-table readers."""

from __future__ import annotations

import math

import polars as pl
import pytest

from divscope.errors import DivscopeError
from divscope.io import read_metadata, scan_token_table
from divscope.monitor import EvolutionDir, step_statistics
from divscope.testing import synthetic_tokens


def test_round_trip(tmp_path):
    evolution = EvolutionDir(tmp_path / "evolution")
    assert evolution.steps() == [] and evolution.summary().height == 0
    tables = {step: synthetic_tokens(4, 2, 20, seed=step) for step in (20, 0, 10)}
    for step, tokens in tables.items():
        stats = step_statistics(tokens)
        evolution.write(step, tokens, stats, seconds=step / 10, metadata={"top_p": 0.7})
    assert evolution.steps() == [0, 10, 20]
    for step, tokens in tables.items():
        assert scan_token_table(evolution.table(step)).collect().equals(tokens)
        assert read_metadata(evolution.table(step)) == {"top_p": 0.7, "step": step}
    summary = evolution.summary()
    assert summary["step"].to_list() == [0, 10, 20]
    assert summary.columns == ["step", *step_statistics(tables[0]), "seconds"]
    assert summary.row(1, named=True) == {
        "step": 10, **step_statistics(tables[10]), "seconds": 1.0
    }  # fmt: skip
    # A step written again replaces its table and its line; a reader of the directory sees
    # only complete tables (not a writer's hidden temporary one).
    again = synthetic_tokens(2, 2, 10, seed=99)
    evolution.write(10, again, {"divscope/js_mean": math.nan}, seconds=3.0)
    (evolution.path / ".rl-step-30.parquet.tmp-1").write_bytes(b"")
    assert evolution.steps() == [0, 10, 20]
    assert scan_token_table(evolution.table(10)).collect().equals(again)
    row = evolution.summary().row(1, named=True)
    assert math.isnan(row["divscope/js_mean"]) and row["seconds"] == 3.0
    assert row["divscope/ce_gini"] is None  # not written for this step: null


def test_bad_input_is_refused(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(DivscopeError, match="must be a directory"):
        EvolutionDir(tmp_path / "file")
    evolution = EvolutionDir(tmp_path / "evolution")
    with pytest.raises(DivscopeError, match="step must be >= 0"):
        evolution.write(-1, synthetic_tokens(1, 1, 4), {}, seconds=0.0)
    evolution.path.mkdir()
    (evolution.path / "summary.jsonl").write_text('{"step": 0}\n{"step": 1,\n')
    with pytest.raises(DivscopeError, match=r"summary\.jsonl, line 2: not JSON"):
        evolution.summary()


def test_summary_of_an_empty_directory(tmp_path):
    assert EvolutionDir(tmp_path).summary().schema == pl.Schema(
        {"step": pl.Int64(), "seconds": pl.Float64()}
    )
