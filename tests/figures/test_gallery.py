"""write_figures: what is written, what is skipped and why, atomic output, the papers' sections
and their metrics, JS thresholds refused or carried to another metric."""

from __future__ import annotations

import numpy as np
import pytest

from divscope import analyses
from divscope.analyses.summary import Metrics
from divscope.errors import DivscopeError
from divscope.figures import gallery
from divscope.figures.gallery import FIGURES, PlotInputs, write_figures
from divscope.params import Recovery

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
    assert "--cross-sample" in report.skipped["cross_sampling_curves"]
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
        recovery=Recovery(n_boot=20), max_samples=500,
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

    spec = gallery.FigureSpec("lorenz", "tokens", "takeover", "", interrupted)
    monkeypatch.setitem(FIGURES, "lorenz", spec)
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


TAKEOVER_FIGURES = {"lorenz", "early_density", "failure_roc", "takeover_knee"}
CORE_FIGURES = {
    "divergence_histogram", "percentile_curve", "positional_profile", "entropy_by_divergence",
    "wordclouds", "token_trajectory", "topk_overlap", "tail_promotion", "rank_reordering",
    "token_profile", "compare_sparsity", "compare_positional_profile", "compare_entropy",
    "compare_topk_overlap", "compare_rank_reordering", "compare_tail_promotion", "evolution",
    "cross_sampling_curves",
}  # fmt: skip


def test_each_figure_belongs_to_its_papers_section():
    sections = {name: spec.section for name, spec in FIGURES.items()}
    assert {n for n in TAKEOVER_FIGURES if sections[n] == "takeover"} == TAKEOVER_FIGURES
    assert {n for n in CORE_FIGURES if sections[n] == "core"} == CORE_FIGURES
    assert set(sections.values()) <= set(gallery.SECTIONS)
    # Only the core paper's figures carry JS thresholds; the takeover paper ranks tokens.
    assert all(not FIGURES[n].js_thresholds for n in TAKEOVER_FIGURES)
    assert FIGURES["topk_overlap"].js_thresholds == (0.0, 0.01, 0.05, 0.1, 0.2)
    assert FIGURES["wordclouds"].js_thresholds == (0.01, 0.1)
    with pytest.raises(ValueError, match="section must be one of"):
        gallery.FigureSpec("x", "tokens", "paper", "caption", lambda inputs: None)


@pytest.mark.parametrize("section", ["core", "takeover"])
def test_a_figure_is_drawn_on_its_sections_metric(tokens, section):
    seen = []

    def spy(data, *, metric, threshold=0.1, seed=0):
        seen.append((metric, threshold, seed))

    spec = gallery._table_figure("spy", "tokens", section, "", spy, seed="recovery.seed")
    spec.draw(PlotInputs(tokens, recovery=Recovery(seed=3)))
    on_kl = Metrics(core_metric="kl_rl_base", takeover_metric="kl_rl_base")
    spec.draw(PlotInputs(tokens, metrics=on_kl))
    default = "js" if section == "core" else "ce_base_rl"
    assert seen == [(default, 0.1, 3), ("kl_rl_base", 0.1, 0)]


def test_takeover_figures_are_drawn_on_ce_and_core_ones_on_js_by_default(tokens):
    inputs = PlotInputs(tokens)
    lorenz = FIGURES["lorenz"].draw(inputs)
    gini = analyses.lorenz(tokens, "ce_base_rl").gini
    assert any(line.get_label() == f"CE: Gini = {gini:.3f}" for line in lorenz.axes[0].lines)
    early = FIGURES["early_density"].draw(inputs)
    legend = [text.get_text() for text in early.axes[0].get_legend().get_texts()]
    assert "top 1% by CE" in legend
    curve = FIGURES["percentile_curve"].draw(inputs)
    assert curve.axes[0].get_ylabel() == "JS divergence, top-p (nats)"
    overridden = PlotInputs(
        tokens, metrics=Metrics(core_metric="kl_rl_base", takeover_metric="kl_rl_base")
    )
    curve = FIGURES["percentile_curve"].draw(overridden)
    assert curve.axes[0].get_ylabel() == "KL(RL ‖ base) (nats)"


def test_js_thresholds_on_another_core_metric_are_refused(tokens, tmp_path):
    names = ["topk_overlap", "wordclouds", "percentile_curve", "lorenz"]
    inputs = PlotInputs(tokens, metrics=Metrics(core_metric="ce_base_rl"))
    report = write_figures(inputs, tmp_path / "out", names=names, formats=["png"])
    assert list(report.written) == ["percentile_curve", "lorenz"]
    reason = report.skipped["topk_overlap"]
    assert reason.startswith("its thresholds (0, 0.01, 0.05, 0.1, 0.2) are JS values in nats")
    assert "would be applied to ce_base_rl" in reason and "--rescale-thresholds" in reason
    assert "(0.01, 0.1)" in report.skipped["wordclouds"]
    with pytest.raises(DivscopeError, match="are JS values in nats"):
        FIGURES["topk_overlap"].draw(inputs)
    # js_full is on the JS scale: its thresholds apply as they are.
    inputs = PlotInputs(tokens, metrics=Metrics(core_metric="js_full"))
    report = write_figures(inputs, tmp_path / "full", names=["topk_overlap"], formats=["png"])
    assert list(report.written) == ["topk_overlap"]


def test_rescaled_thresholds_are_carried_at_equal_quantiles(tokens, tmp_path):
    inputs = PlotInputs(tokens, metrics=Metrics(core_metric="ce_base_rl", rescale_thresholds=True))
    thresholds = FIGURES["topk_overlap"].js_thresholds
    carried = analyses.matched_thresholds(tokens, "ce_base_rl", thresholds)
    figure = FIGURES["topk_overlap"].draw(inputs)
    labels = [line.get_label().split(" (")[0] for line in figure.axes[0].lines]
    assert labels == [f"CE > {m.value:g}" for m in carried]
    # The same shares of tokens as on JS: the analysis on CE at the carried values counts what
    # the analysis on JS counts at the paper's.
    on_ce = analyses.topk_overlap(tokens, "ce_base_rl", thresholds=[m.value for m in carried])
    on_js = analyses.topk_overlap(tokens, "js", thresholds=thresholds)
    assert np.array_equal(on_ce["count"].to_numpy(), on_js["count"].to_numpy())
    write_figures(inputs, tmp_path / "out", names=["topk_overlap"], formats=["png"])
    index = (tmp_path / "out" / "index.md").read_text()
    m = carried[3]
    assert f"{m.threshold:g} → {m.value:.4g} ({m.share_above:.2%} of tokens above)" in index


def test_index_lists_the_figures_under_one_heading_per_paper(tokens, tmp_path):
    names = ["lorenz", "percentile_curve", "compare_sparsity"]
    write_figures(PlotInputs(tokens), tmp_path / "out", names=names, formats=["png"])
    index = (tmp_path / "out" / "index.md").read_text()
    core = index.index("## Core paper: Sparse but Critical (Meng et al., ICLR 2026), on `js`")
    takeover = index.index("## Takeover paper: Reasoning Can Be Restored by Correcting a Few")
    skipped = index.index("## Skipped")
    assert core < index.index("### percentile_curve") < takeover
    assert takeover < index.index("### lorenz") < skipped
    assert "), on `ce_base_rl`" in index[takeover:]
    assert "Lorenz curve of the CE mass" in index and "JS at each percentile" in index
    write_figures(PlotInputs(tokens), tmp_path / "core", names=["percentile_curve"])
    index = (tmp_path / "core" / "index.md").read_text()
    assert "No figure of this paper was drawn (see Skipped)." in index
