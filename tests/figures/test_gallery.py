"""write_figures and `divscope.plot`: what is written, what is skipped and why, atomic output."""

from __future__ import annotations

import pytest

from divscope.errors import DivscopeError
from divscope.figures import gallery
from divscope.figures.gallery import FIGURES, PlotInputs, write_figures

CHEAP = ["percentile_curve", "compare_sparsity", "evolution", "cross_sampling_curves"]


def test_write_figures_skips_what_the_inputs_do_not_allow(tokens, tmp_path):
    out = tmp_path / "figures"
    seen = []
    report = write_figures(
        PlotInputs(tokens),
        out,
        names=CHEAP,
        formats=["png", "svg"],
        on_figure=lambda name, reason: seen.append((name, reason)),
    )
    assert list(report.written) == ["percentile_curve"]
    assert report.written["percentile_curve"] == [
        out / "percentile_curve.png",
        out / "percentile_curve.svg",
    ]
    assert set(report.skipped) == {"compare_sparsity", "evolution", "cross_sampling_curves"}
    assert "--compare" in report.skipped["compare_sparsity"]
    assert "--xs" in report.skipped["cross_sampling_curves"]
    assert [name for name, _ in seen] == CHEAP
    assert sorted(p.name for p in out.iterdir()) == [
        "index.md", "percentile_curve.png", "percentile_curve.svg",
    ]  # fmt: skip
    index = (out / "index.md").read_text()
    assert "![percentile_curve](percentile_curve.png)" in index
    assert "## Skipped" in index and "`evolution`: needs --evolution" in index


def test_write_figures_draws_every_figure_with_all_inputs(tokens, results, checkpoints, tmp_path):
    inputs = PlotInputs(
        tokens, compare={"sft": checkpoints[20]}, evolution=checkpoints, cross_sample=results,
        n_boot=20, max_samples=500,
    )  # fmt: skip
    report = write_figures(inputs, tmp_path / "all", formats=["png"])
    assert list(report.written) == list(FIGURES)
    assert report.skipped == {}
    index = (tmp_path / "all" / "index.md").read_text()
    assert "at most 500 tokens per group, drawn at random with seed 0" in index


def test_analysis_errors_become_skip_reasons(tokens, tmp_path):
    ungraded = tokens.with_columns(correct=None)
    report = write_figures(PlotInputs(ungraded), tmp_path / "out", names=["failure_roc"])
    assert "needs both correct and wrong responses" in report.skipped["failure_roc"]


def test_existing_output_needs_overwrite(tokens, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.png").write_text("old")
    with pytest.raises(DivscopeError, match="output exists; pass --overwrite"):
        write_figures(PlotInputs(tokens), out, names=["percentile_curve"])
    write_figures(PlotInputs(tokens), out, names=["percentile_curve"], overwrite=True)
    assert not (out / "old.png").exists()


def test_an_interrupted_run_leaves_no_output(tokens, tmp_path, monkeypatch):
    def interrupted(inputs):
        raise KeyboardInterrupt

    monkeypatch.setitem(FIGURES, "lorenz", gallery.FigureSpec("lorenz", "tokens", "", interrupted))
    with pytest.raises(KeyboardInterrupt):
        write_figures(PlotInputs(tokens), tmp_path / "out", names=["percentile_curve", "lorenz"])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "names,formats,message",
    [
        (["nope"], ["png"], "unknown figure"),
        (None, ["gif"], "unknown format"),
        (None, [""], "unknown format"),
    ],
)
def test_bad_names_and_formats(tokens, tmp_path, names, formats, message):
    with pytest.raises(DivscopeError, match=message):
        write_figures(PlotInputs(tokens), tmp_path / "out", names=names, formats=formats)
    assert not (tmp_path / "out").exists()
