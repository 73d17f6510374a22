"""`divscope.plot`: the figures of token-table files, each section's metric, the recovery
settings of the cross-sample figures, and the --evolution step names."""

from __future__ import annotations

from pathlib import Path

import pytest

import divscope.figures.plot as figures_plot
from divscope.errors import DivscopeError
from divscope.figures.gallery import token_columns
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


def test_token_columns_hold_every_sections_metric():
    columns = token_columns("js", "ce_base_rl")
    assert columns.count("js") == 1 and "ce_base_rl" in columns
    assert "token" in columns and "entropy_base" in columns


def test_metric_sets_both_sections_and_rescaling_reads_js(tokens, tmp_path):
    tokens.write_parquet(tmp_path / "rl.parquet")
    names = ["percentile_curve", "lorenz", "rank_reordering"]
    report = plot(
        tmp_path / "rl.parquet", tmp_path / "kl", names=names, formats=["png"], metric="kl_rl_base"
    )
    index = (tmp_path / "kl" / "index.md").read_text()
    assert index.count(", on `kl_rl_base`") == 2
    assert "are JS values in nats" in report.skipped["rank_reordering"]
    # Rescaling needs the js column, which is loaded then even though no section draws on it.
    report = plot(
        tmp_path / "rl.parquet", tmp_path / "ce", names=names, core_metric="ce_base_rl",
        rescale_thresholds=True, formats=["png"],
    )  # fmt: skip
    assert list(report.written) == names
    index = (tmp_path / "ce" / "index.md").read_text()
    assert "core paper's figures on `ce_base_rl` (JS thresholds carried" in index


def test_reference_and_recovery_reach_the_cross_sample_figures(
    tokens, results, tmp_path, monkeypatch
):
    tokens.write_parquet(tmp_path / "rl.parquet")
    results.write_parquet(tmp_path / "xs.parquet")
    results.filter(policy="rl").write_parquet(tmp_path / "thinking.parquet")
    seen = []
    monkeypatch.setattr(figures_plot, "write_figures", lambda inputs, *a, **k: seen.append(inputs))
    common = {"cross_sample": tmp_path / "xs.parquet", "recovery_at": 8}
    plot(tmp_path / "rl.parquet", tmp_path / "a", reference="gated", **common)
    plot(tmp_path / "rl.parquet", tmp_path / "b", reference=tmp_path / "thinking.parquet", **common)
    assert seen[0].reference == "gated" and seen[0].recovery_at == 8
    assert seen[1].reference.equals(results.filter(policy="rl"))
    with pytest.raises(DivscopeError, match="--reference runs/thinking.parquet: no such file"):
        plot(tmp_path / "rl.parquet", tmp_path / "c", reference="runs/thinking.parquet", **common)
    with pytest.raises(DivscopeError, match="give the cross-sample results with --cross-sample"):
        plot(tmp_path / "rl.parquet", tmp_path / "d", recovery_at=8)
