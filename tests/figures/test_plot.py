"""`divscope.plot`: the figures of token-table files, and the --evolution step names."""

from __future__ import annotations

from pathlib import Path

import pytest

from divscope.errors import DivscopeError
from divscope.figures.plot import evolution_steps, plot


def test_evolution_steps():
    assert evolution_steps(["a/rl-step-40.parquet", "100=b/final.parquet", "c/ckpt7"]) == {
        40: Path("a/rl-step-40.parquet"),
        100: Path("b/final.parquet"),
        7: Path("c/ckpt7"),
    }
    with pytest.raises(DivscopeError, match="cannot tell the training step"):
        evolution_steps(["rl.parquet"])
    with pytest.raises(DivscopeError, match="step 4 given twice"):
        evolution_steps(["x-4.parquet", "4=y.parquet"])


def test_plot_reads_files(tokens, results, tmp_path):
    tokens.write_parquet(tmp_path / "rl.parquet")
    results.write_parquet(tmp_path / "xs.parquet")
    report = plot(
        tmp_path / "rl.parquet",
        tmp_path / "out",
        cross_sample=tmp_path / "xs.parquet",
        names=["percentile_curve", "takeover_knee"],
        formats=["png"],
        n_boot=20,
    )
    assert list(report.written) == ["percentile_curve", "takeover_knee"]
    assert f"{tokens.height:,} tokens" in (tmp_path / "out" / "index.md").read_text()
