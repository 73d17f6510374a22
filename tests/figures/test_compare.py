"""The SFT-vs-RL side-by-side figures (Figs. 14-18): each draws every labelled table's analysis
result, in the table's colour, with the single-table figures' drawing code."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.colors import same_color

from divscope import analyses, figures
from divscope.errors import DivscopeError
from divscope.figures.style import table_style
from divscope.testing import synthetic_tokens

COMPARE_FIGURES = [
    "compare_positional_profile", "compare_entropy", "compare_topk_overlap",
    "compare_rank_reordering", "compare_tail_promotion", "compare_sparsity",
]  # fmt: skip


@pytest.fixture(scope="module")
def pair(tokens):
    return {"rl": tokens, "sft": synthetic_tokens(n_prompts=4, scale=3.0, seed=5)}


@pytest.mark.parametrize("name", COMPARE_FIGURES)
def test_compare_figures_need_two_tables(name, tokens):
    with pytest.raises(DivscopeError, match=f"{name}: needs at least two labelled tables"):
        getattr(figures, name)({"rl": tokens})


def test_positional_profile_one_panel_per_table(pair):
    figure = figures.compare_positional_profile(pair)
    assert [axes.get_title(loc="left") for axes in figure.axes] == ["(a) rl", "(b) sft"]
    for i, (axes, table) in enumerate(zip(figure.axes, pair.values(), strict=True)):
        (mean,) = [line for line in axes.lines if line.get_label() == "mean"]
        expected = analyses.positional_profile(table).drop_nulls("mean")["mean"].to_numpy()
        assert np.allclose(mean.get_ydata(), expected)
        assert same_color(mean.get_color(), table_style(i)["color"])
    # Panel (a) is the single-table figure of the first table.
    single = figures.positional_profile(pair["rl"]).axes[0]
    compared = figure.axes[0]
    labels = [line.get_label() for line in compared.lines]
    assert [line.get_label() for line in single.lines] == labels
    for a, b in zip(single.lines, compared.lines, strict=True):
        assert np.array_equal(a.get_ydata(), b.get_ydata())


def test_entropy_panels_are_the_high_divergence_kdes(pair):
    figure = figures.compare_entropy(pair, split=0.05, max_samples=300, seed=2)
    for i, (axes, (label, table)) in enumerate(zip(figure.axes, pair.items(), strict=True)):
        density = analyses.entropy_density(table, split=0.05, max_samples=300, seed=2).curves
        for model, name in (("base", "base"), ("rl", label)):
            (line,) = [line for line in axes.lines if line.get_label() == name]
            expected = density.filter(group="high", model=model)["density"].to_numpy()
            assert np.allclose(line.get_ydata(), expected)
        (tuned,) = [line for line in axes.lines if line.get_label() == label]
        assert same_color(tuned.get_color(), table_style(i)["color"])
        assert axes.get_title(loc="left").endswith(f"{label}: high divergence, JS > 0.05")


def test_topk_overlap_one_line_per_table(pair):
    figure = figures.compare_topk_overlap(pair, threshold=0.05)
    lines = figure.axes[0].lines
    assert [line.get_label().split(" (")[0] for line in lines] == ["rl", "sft"]
    for i, (line, table) in enumerate(zip(lines, pair.values(), strict=True)):
        overlap = analyses.topk_overlap(table, thresholds=(0.05,))
        expected = [overlap[c][0] for c in overlap.columns if c.startswith("overlap_")]
        assert np.allclose(line.get_ydata(), expected)
        assert line.get_label() == f"{list(pair)[i]} ({overlap['count'][0]:,})"
        assert same_color(line.get_color(), table_style(i)["color"])
        assert line.get_linestyle() == table_style(i)["linestyle"]


def test_rank_reordering_one_panel_per_table(pair):
    figure = figures.compare_rank_reordering(pair)
    for i, (axes, (label, table)) in enumerate(zip(figure.axes, pair.items(), strict=True)):
        result = analyses.rank_reordering(table)
        top1 = result.distribution.filter(rl_token=1).sort("base_rank")["share"].to_numpy()
        bars = axes.containers[0]
        assert bars.get_label() == f"{label} top-1 token"
        assert np.allclose([bar.get_height() for bar in bars], top1)
        assert same_color(bars[0].get_facecolor(), table_style(i)["color"])
        note = axes.get_legend().get_title().get_text()
        assert f"{result.n_positions:,} positions with JS > 0.1" in note


def test_tail_promotion_one_curve_per_table(pair):
    figure = figures.compare_tail_promotion(pair, tail_cutoff=0.05)
    lines = figure.axes[0].lines
    assert len(lines) == 2
    for i, (line, (label, table)) in enumerate(zip(lines, pair.items(), strict=True)):
        result = analyses.tail_promotion(table, tail_cutoff=0.05)
        assert np.allclose(line.get_ydata(), result.curve["share"].to_numpy())
        share = result.n_tail / result.n_positions
        expected = f"{label}: {result.n_positions:,} positions, {share:.1%} from the tail"
        assert line.get_label() == expected
        assert same_color(line.get_color(), table_style(i)["color"])


def test_three_tables_take_three_colours(pair, tokens):
    tables = {**pair, "other": synthetic_tokens(n_prompts=3, scale=0.5, seed=9)}
    lines = figures.compare_topk_overlap(tables).axes[0].lines
    assert len({line.get_color() for line in lines}) == 3
    assert len(figures.compare_rank_reordering(tables).axes) == 3
