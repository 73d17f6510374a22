"""Every figure renders (Agg) on synthetic frames, labels its axes, draws what analyses return."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from matplotlib.figure import Figure

from divscope import analyses, figures
from divscope.errors import DivscopeError
from divscope.testing import synthetic_tokens

TOKEN_FIGURES = [
    "divergence_histogram", "percentile_curve", "lorenz", "positional_profile", "early_density",
    "entropy_by_divergence", "wordclouds", "token_trajectory", "topk_overlap", "tail_promotion",
    "rank_reordering", "token_profile", "failure_roc",
]  # fmt: skip

# Figure -> (x label, y label) fragments of its first panel: quantity and unit.
LABELS = {
    "divergence_histogram": ("JS divergence, top-p (nats)", "tokens (count)"),
    "percentile_curve": ("percentile of tokens (%)", "JS divergence, top-p (nats)"),
    "lorenz": ("tokens, least divergent first (cumulative %)", "divergence mass (cumulative %)"),
    "positional_profile": ("relative position", "JS divergence, top-p (nats)"),
    "early_density": ("relative position", "density (uniform = 1)"),
    "entropy_by_divergence": ("entropy of the next-token distribution (nats)", "density (1/nat)"),
    "token_trajectory": ("token position t", "JS divergence, top-p (nats)"),
    "topk_overlap": ("k (size of each model's top-k set)", "shared top-k tokens (%)"),
    "tail_promotion": ("base probability of the RL top-1 token", "positions with base p < x (%)"),
    "rank_reordering": ("rank of the RL token under the base model", "divergent positions (%)"),
    "token_profile": ("percentile of occurrences (%)", "JS divergence, top-p (nats)"),
    "failure_roc": ("false-positive rate", "true-positive rate"),
    "compare_sparsity": ("percentile of tokens (%)", "JS divergence, top-p (nats)"),
    "compare_positional_profile": ("relative position", "JS divergence, top-p (nats)"),
    "compare_entropy": ("entropy of the next-token distribution (nats)", "density (1/nat)"),
    "compare_topk_overlap": ("k (size of each model's top-k set)", "shared top-k tokens (%)"),
    "compare_rank_reordering": ("rank of the rl token under the base model", "divergent positions"),
    "compare_tail_promotion": ("base probability of the fine-tuned top-1", "base p < x (%)"),
    "evolution": ("RL training step", "JS divergence, top-p (nats)"),
    "cross_sampling_curves": ("intervention budget", "accuracy (mean@n, %)"),
    "takeover_knee": ("mean takeover rate ρ̄", "accuracy (mean@n, %)"),
    "threshold_sensitivity": ("switch threshold ε (JS)", "effective / total switches (%)"),
    "threshold_recovery": ("intervention budget", "recovery of the gain (mean@n)"),
    "token_pairs": ("share of its", "primary → intervener"),
    "delta_alignment": ("relative position t/T", "cosine(small-pair Δ, large-pair Δ)"),
}


CROSS_SAMPLE_FIGURES = (
    "cross_sampling_curves", "takeover_knee", "threshold_sensitivity", "token_pairs",
    "delta_alignment", "threshold_recovery",
)  # fmt: skip


def assert_labelled(figure: Figure) -> None:
    """Every plotting panel names its quantity on both axes (image panels are exempt)."""
    for axes in figure.axes:
        if not axes.axison:
            assert axes.get_title(loc="left"), "an axis-less panel needs a title"
            continue
        assert axes.get_xlabel(), f"unlabelled x axis in {axes}"
        assert axes.get_ylabel() or axes.get_shared_y_axes().get_siblings(axes) != [axes]


@pytest.mark.parametrize("name", list(LABELS))
def test_figure_renders_with_labelled_axes(name, tokens, results, checkpoints, tmp_path):
    bootstrapped = (
        "cross_sampling_curves",
        "takeover_knee",
        "delta_alignment",
        "threshold_recovery",
    )
    options = {"n_boot": 50} if name in bootstrapped else {}
    cross_sample = [name for name in LABELS if name in CROSS_SAMPLE_FIGURES]
    pair = {"rl": tokens, "sft": synthetic_tokens(scale=0.2, seed=5)}
    data = {
        **{figure: pair for figure in LABELS if figure.startswith("compare_")},
        "evolution": checkpoints,
        **dict.fromkeys(cross_sample, results),
    }.get(name, tokens)
    figure = getattr(figures, name)(data, **options)
    assert isinstance(figure, Figure)
    figure.savefig(tmp_path / f"{name}.png", dpi=60)
    assert (tmp_path / f"{name}.png").stat().st_size > 1000
    assert_labelled(figure)
    first = figure.axes[0]
    x_label, y_label = LABELS[name]
    assert x_label in first.get_xlabel()
    assert y_label in first.get_ylabel()


def test_wordclouds_are_titled_panels_of_words(tokens):
    figure = figures.wordclouds(tokens)
    titles = [axes.get_title(loc="left") for axes in figure.axes]
    assert titles[0].startswith("(a) high divergence, JS > 0.1")
    assert titles[1].startswith("(b) low divergence, JS < 0.01")
    frequencies = analyses.word_frequencies(tokens, top=60)
    n_high = frequencies.filter(group="high").height
    assert figure.axes[0].get_title(loc="right").startswith(f"{n_high} most frequent words\n")
    words = {text.get_text() for axes in figure.axes for text in axes.texts}
    expected = frequencies["word"].to_list()
    assert words == set(expected)  # every word fits in the synthetic table's small vocabulary


def test_figures_draw_into_given_axes(tokens):
    host = Figure()
    single = host.add_subplot(1, 3, 1)
    pair = [host.add_subplot(1, 3, 2), host.add_subplot(1, 3, 3)]
    assert figures.percentile_curve(tokens, ax=single) is host
    assert figures.entropy_by_divergence(tokens, ax=pair) is host
    assert single.get_ylabel() and pair[1].get_xlabel()
    with pytest.raises(DivscopeError, match="draws 2 panel"):
        figures.tail_promotion(tokens, ax=single)


def test_percentile_curve_draws_the_analysis_result(tokens, monkeypatch):
    fixed = analyses.Sparsity("js", 3, 0.1, {}, {10.0: 1e-4, 50.0: 0.0, 90.0: 0.2})
    monkeypatch.setattr(analyses, "sparsity", lambda *args, **kwargs: fixed)
    figure = figures.percentile_curve(tokens)
    axes = figure.axes[0]
    curve = axes.lines[0]
    assert curve.get_xdata().tolist() == [10.0, 50.0, 90.0]
    assert curve.get_ydata().tolist() == [1e-4, 0.0, 0.2]
    # Exact zeros stay visible: the axis is linear near 0 and logarithmic above.
    assert axes.get_yscale() == "symlog" and axes.get_ylim()[0] == 0


def test_lorenz_draws_the_analysis_curve_and_gini(tokens):
    result = analyses.lorenz(tokens)
    figure = figures.lorenz(tokens)
    curve = next(line for line in figure.axes[0].lines if "Gini" in line.get_label())
    assert np.allclose(curve.get_ydata(), result.curve["mass_share"].to_numpy())
    assert f"Gini = {result.gini:.3f}" in curve.get_label()


def test_topk_overlap_lines_are_the_analysis_means(tokens):
    overlap = analyses.topk_overlap(tokens, thresholds=(0.05,))
    figure = figures.topk_overlap(tokens, thresholds=(0.05,))
    (line,) = figure.axes[0].lines
    expected = [overlap[c][0] for c in overlap.columns if c.startswith("overlap_")]
    assert np.allclose(line.get_ydata(), expected)


def notes(figure: Figure) -> str:
    """Every note of a figure: texts inside the axes and the small titles above them."""
    return " ".join(
        [t.get_text() for axes in figure.axes for t in axes.texts]
        + [axes.get_title(loc="right") for axes in figure.axes]
    )


def test_sampled_figures_say_so(tokens):
    figure = figures.entropy_by_divergence(tokens, max_samples=100, seed=7)
    assert "random sample of 100" in notes(figure) and "(seed 7)" in notes(figure)
    figure = figures.tail_promotion(tokens, max_samples=50, seed=3)
    assert "random sample of 50" in notes(figure) and "positions (seed 3)" in notes(figure)


def test_token_trajectory_marks_the_divergent_tokens(tokens):
    key = tokens.filter(prompt_id="p1", sample_id=2).sort("position")
    figure = figures.token_trajectory(tokens, prompt_id="p1", sample_id=2, max_tokens=500)
    bars, text = figure.axes
    assert "prompt p1, sample 2" in bars.get_title(loc="left")
    n_high = int((key["js"] > 0.1).sum())
    assert f"the {n_high} tokens with JS > 0.1" in text.get_title(loc="left")
    boxed = [t for t in text.texts if t.get_bbox_patch() is not None]
    assert len(boxed) == n_high
    with pytest.raises(DivscopeError, match="no response prompt_id='nope'"):
        figures.token_trajectory(tokens, prompt_id="nope", sample_id=0)


def test_cross_sampling_curves_draw_only_panels_with_data(results):
    forward_only = results.filter(pl.col("policy").is_in(["base", "rl", "forward"]))
    figure = figures.cross_sampling_curves(forward_only, n_boot=20)
    assert len(figure.axes) == 1
    labels = figure.legends[0].get_texts()
    assert {t.get_text().split(" (")[0] for t in labels} == {"base model", "RL model", "forward"}
    ticks = [t.get_text() for t in figure.axes[0].get_xticklabels()]
    assert ticks == ["0", "1", "2", "4", "8", "∞"]
    with pytest.raises(DivscopeError, match="none of the policies"):
        figures.cross_sampling_curves(results.filter(policy="base"), n_boot=5)


def test_cross_sampling_curves_draw_one_labelled_line_per_setting(results):
    forward = results.filter(pl.col("policy").is_in(["base", "rl", "forward"]))
    second = forward.filter(policy="forward").with_columns(
        pl.lit(0.01).alias("eps"), (~pl.col("correct")).alias("correct")
    )
    figure = figures.cross_sampling_curves(pl.concat([forward, second]), n_boot=20)
    lines = {
        line.get_label(): line.get_ydata()
        for line in figure.axes[0].lines
        if line.get_label().startswith("forward")
    }
    assert sorted(lines) == ["forward (eps 0.01)", "forward (eps 0.05)"]
    curve = analyses.cross_sampling_curve(pl.concat([forward, second]), n_boot=20)
    for eps in (0.01, 0.05):
        expected = curve.filter(policy="forward", eps=eps)
        expected = expected.sort(pl.col("budget").replace(-1, 99))["accuracy"].to_list()
        assert list(lines[f"forward (eps {eps:g})"]) == pytest.approx(expected)
    legend = [t.get_text() for t in figure.legends[0].get_texts()]
    assert "forward (eps 0.01)" in legend and "forward (eps 0.05)" in legend


def test_takeover_knee_marks_the_knee(results):
    figure = figures.takeover_knee(results, n_boot=20)
    labels = [line.get_label() for line in figure.axes[0].lines]
    assert any(label.startswith("knee: ") for label in labels)


def test_takeover_knee_sits_on_the_mean_takeover_rate(results):
    knee = analyses.takeover_knee(results, n_boot=20, recovery_at=4)
    figure = figures.takeover_knee(results, n_boot=20, recovery_at=4)
    (line,) = [line for line in figure.axes[0].lines if line.get_label() == "gated takeover"]
    assert list(line.get_xdata()) == pytest.approx(knee.curve["rho_mean"].to_list())
    assert list(line.get_ydata()) == pytest.approx(knee.curve["pass_at_k"].to_list())
    assert figure.axes[0].get_ylabel() == "pass@4 (%)"


def test_cross_sampling_curves_draw_the_controls_of_each_sampling(results):
    forward = results.filter(pl.col("policy").is_in(["base", "rl", "forward"]))
    runs = pl.concat(
        [
            forward.with_columns(temperature=pl.lit(1.0), top_p=pl.lit(0.7)),
            forward.with_columns(
                temperature=pl.lit(0.6), top_p=pl.lit(0.95), correct=~pl.col("correct")
            ),
        ]
    )
    figure = figures.cross_sampling_curves(runs, n_boot=20, recovery_at=2)
    controls = sorted(
        line.get_label() for line in figure.axes[0].lines if "model" in line.get_label()
    )
    assert len(controls) == 4
    assert sum("T 0.6, top-p 0.95" in label for label in controls) == 2
    assert sum("T 1, top-p 0.7" in label for label in controls) == 2
    assert figure.axes[0].get_ylabel() == "pass@2 (%)"


def test_token_pairs_draw_the_busiest_setting(results):
    figure = figures.token_pairs(results, top=5)
    pairs = analyses.switch_pairs(results, policy="forward", top=5)
    busiest = pairs.sort("n_switches", descending=True)["budget"][0]
    expected = pairs.filter(budget=busiest)
    bars = [patch.get_width() for patch in figure.axes[0].patches]
    assert bars == pytest.approx(expected["pair_share"].to_list())
    labels = [t.get_text() for t in figure.axes[0].get_yticklabels()]
    first = expected.row(0, named=True)
    assert labels[0] == f"'{first['primary_token']}' → '{first['token']}'"
    with pytest.raises(DivscopeError, match="no effective switch of policy 'base'"):
        figures.token_pairs(results, policy="base")


def test_threshold_sensitivity_draws_both_draws(results):
    figure = figures.threshold_sensitivity(results)
    table = analyses.threshold_sensitivity(results).filter(policy="gated").sort("eps")
    lines = {line.get_label(): line for line in figure.axes[0].lines}
    assert list(lines["gated"].get_ydata()) == pytest.approx(table["effective_ratio"].to_list())
    assert list(lines["_gated, coupled"].get_ydata()) == pytest.approx(
        table["effective_coupled_ratio"].to_list()
    )
    with pytest.raises(DivscopeError, match="no policy was run at several eps"):
        figures.threshold_sensitivity(results.filter(pl.col("eps").is_null()))
    one_eps = results.filter((pl.col("policy") != "gated") | (pl.col("eps") == 1.0))
    with pytest.raises(DivscopeError, match="no policy was run at several eps"):
        figures.threshold_sensitivity(one_eps)


def test_threshold_recovery_draws_one_line_per_eps(results):
    swept = pl.concat(
        [results, results.filter(pl.col("policy") == "forward").with_columns(eps=pl.lit(0.2))]
    )
    figure = figures.threshold_recovery(swept, n_boot=50)
    assert [axes.get_title(loc="left") for axes in figure.axes] == ["(a) forward", "(b) reverse"]
    table = analyses.threshold_curves(swept, n_boot=50).filter(policy="forward")
    lines = {line.get_label(): line for line in figure.axes[0].lines if line.get_marker() != "None"}
    assert set(lines) == {"ε 0.05", "ε 0.2"}
    for eps in (0.05, 0.2):
        rows = table.filter(eps=eps).sort(pl.col("budget").replace(-1, 10**9))
        assert list(lines[f"ε {eps:g}"].get_ydata()) == pytest.approx(rows["recovery"].to_list())
    assert figures.threshold_recovery(results, n_boot=20).axes[1].lines[0].get_label() == "ε 0.05"
    with pytest.raises(DivscopeError, match="no recovery of forward, reverse at an eps"):
        figures.threshold_recovery(results.filter(pl.col("policy") != "base"), n_boot=20)


def test_token_profile_needs_a_present_word(tokens):
    with pytest.raises(DivscopeError, match="none of the words 'zebra'"):
        figures.token_profile(tokens, words=("zebra",))


STATISTICS = {
    "mean", "median", "quantile", "percentile", "histogram", "cumsum", "std", "var", "agg",
    "group_by", "gaussian_kde", "bincount", "top_k", "top_k_by", "auroc", "bootstrap_ci",
}  # fmt: skip


def test_no_statistics_in_figure_code():
    """Figure modules call statistics only through `analyses.<name>`; everything else draws."""
    package = Path(inspect.getfile(figures)).parent
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            function = node.func
            name = getattr(function, "attr", getattr(function, "id", ""))
            receiver = getattr(getattr(function, "value", None), "id", None)
            assert name not in STATISTICS or receiver == "analyses", (
                f"{path.name}:{node.lineno} computes {name}(); add it to divscope.analyses"
            )


def test_delta_alignment_draws_each_settings_profile_and_mean(results):
    """One line per setting: its points are `analyses.delta_alignment`'s profile, its legend
    label the mean over responses with the interval."""
    chosen = results.filter(
        (pl.col("policy") == "base")
        | ((pl.col("policy") == "forward") & pl.col("budget").is_in([0, 1]))
    )
    alignment = analyses.delta_alignment(chosen, n_boot=20)
    figure = figures.delta_alignment(chosen, n_boot=20)
    lines = [line for line in figure.axes[0].get_lines() if line.get_label()[0] != "_"]
    assert len(lines) == alignment.summary.height == 3  # base, forward at budgets 0 and 1
    for line, row in zip(lines, alignment.summary.iter_rows(named=True), strict=True):
        assert f"{row['delta_cosine']:.2f} [{row['delta_cosine_low']:.2f}" in line.get_label()
        profile = alignment.profile.filter(
            (pl.col("policy") == row["policy"]) & (pl.col("budget") == row["budget"])
        ).sort("bin_start")
        np.testing.assert_allclose(line.get_ydata(), profile["delta_cosine"].to_numpy())


def test_delta_alignment_without_cosines_says_how_to_record_them(results):
    with pytest.raises(DivscopeError, match="--delta-alignment"):
        figures.delta_alignment(
            results.with_columns(pl.lit(None, dtype=pl.List(pl.Float32())).alias("delta_cosine"))
        )


def test_cross_sampling_curves_say_the_effective_share_of_forward_and_the_random_controls(
    results,
):
    both = pl.concat(
        [results, results.filter(policy="random").with_columns(policy=pl.lit("random-effective"))]
    )
    figure = figures.cross_sampling_curves(both, n_boot=20)
    (note,) = [t.get_text() for t in figure.axes[0].texts if "effective" in t.get_text()]
    curve = analyses.cross_sampling_curve(both, n_boot=20).filter(budget=-1)
    for policy in ("forward", "random", "random-effective"):
        share = curve.filter(policy=policy)["effective_share_pooled"][0]
        assert f"\n{policy} {100 * share:.2f}% at ∞" in note
    styles = {line.get_label(): line.get_linestyle() for line in figure.axes[0].lines}
    assert (styles["random"], styles["random-effective"]) == (":", "-.")
