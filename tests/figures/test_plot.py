"""`divscope.plot`: the figures of token-table files, each section's metric, and the recovery
settings of the cross-sample figures."""

from __future__ import annotations

import pytest

import divscope.figures.plot as figures_plot
from divscope.analyses.study import Study
from divscope.analyses.summary import Metrics
from divscope.errors import DivscopeError
from divscope.figures.gallery import token_columns
from divscope.figures.plot import plot
from divscope.params import Recovery


def test_plot_reads_files(tokens, results, tmp_path):
    tokens.write_parquet(tmp_path / "rl.parquet")
    results.write_parquet(tmp_path / "xs.parquet")
    report = plot(
        Study(tmp_path / "rl.parquet", cross_sample=tmp_path / "xs.parquet"),
        tmp_path / "out",
        recovery=Recovery(n_boot=20),
        names=["percentile_curve", "takeover_knee"],
        formats=["png"],
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
        tmp_path / "rl.parquet",
        tmp_path / "kl",
        Metrics("kl_rl_base"),
        names=names,
        formats=["png"],
    )
    index = (tmp_path / "kl" / "index.md").read_text()
    assert index.count(", on `kl_rl_base`") == 2
    assert "are JS values in nats" in report.skipped["rank_reordering"]
    # Rescaling needs the js column, which is loaded then even though no section draws on it.
    report = plot(
        tmp_path / "rl.parquet", tmp_path / "ce",
        Metrics(core_metric="ce_base_rl", rescale_thresholds=True), names=names, formats=["png"],
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
    at_8 = Recovery(recovery_at=8)

    def study(reference=None):
        return Study(
            tmp_path / "rl.parquet", cross_sample=tmp_path / "xs.parquet", reference=reference
        )

    plot(study("gated"), tmp_path / "a", recovery=at_8)
    plot(study(tmp_path / "thinking.parquet"), tmp_path / "b", recovery=at_8)
    assert seen[0].reference == "gated" and seen[0].recovery.recovery_at == 8
    assert seen[1].reference.equals(results.filter(policy="rl"))
    with pytest.raises(DivscopeError, match="--reference runs/thinking.parquet: no such file"):
        plot(study("runs/thinking.parquet"), tmp_path / "c", recovery=at_8)
    with pytest.raises(DivscopeError, match="give the cross-sample results with --cross-sample"):
        plot(tmp_path / "rl.parquet", tmp_path / "d", recovery=at_8)
