"""What changes where the models diverge: entropy, top-k, ranks, tail (Figs. 4, 9, 10, 22), and
the same of several tables side by side, e.g. RL and the SFT control (Figs. 15-18)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from divscope import analyses
from divscope.analyses._frames import Frame
from divscope.figures.style import (
    CYCLE,
    DOUBLE_COLUMN,
    GREY,
    MODEL_COLORS,
    RL_COLOR,
    SKY_BLUE,
    compared,
    count,
    figure_function,
    header_note,
    legend_below,
    metric_symbol,
    panel_title,
    panels,
    percent_axis,
    side_by_side,
)


def _sample_note(n_sampled: int, n_total: int, seed: int, unit: str = "tokens") -> str:
    """Say how many rows a panel shows, and that they are a seeded sample when they are."""
    if n_sampled < n_total:
        return f"random sample of {count(n_sampled)}\nof {count(n_total)} {unit} (seed {seed})"
    return f"{count(n_total)} {unit}"


@figure_function
def entropy_by_divergence(
    tokens: Frame,
    ax: Sequence[Axes] | None = None,
    *,
    metric: str = "js",
    split: float = 0.1,
    max_samples: int = 20_000,
    seed: int = 0,
) -> Figure:
    """KDEs of base and RL entropy at low- and high-divergence tokens, medians dashed (Fig. 4).

    Each KDE is fitted on at most `max_samples` tokens per group, sampled with `seed`; the
    panel says so when it samples.

    Args:
        tokens: a token table.
        ax: two axes to draw into, low then high (default: a new full-width figure).
        metric: the divergence column.
        split: low = metric < split, high = metric > split (on the JS scale in the paper).
        max_samples: tokens per group the KDE is fitted on.
        seed: seed of the samples.

    >>> rng = np.random.default_rng(0)
    >>> tokens = pl.DataFrame({"js": rng.exponential(0.05, 400),
    ...     "entropy_base": rng.exponential(1.0, 400), "entropy_rl": rng.exponential(0.5, 400)})
    >>> entropy_by_divergence(tokens).axes[0].get_xlabel()
    'entropy of the next-token distribution (nats)'
    """
    density = analyses.entropy_density(
        tokens, metric, split=split, max_samples=max_samples, seed=seed
    )
    medians = analyses.entropy_by_divergence(tokens, metric, split=split)
    figure, axes = panels(ax, 2, width=DOUBLE_COLUMN, sharex=True)
    symbol = metric_symbol(metric)
    titles = {
        "low": f"low divergence, {symbol} < {split:g}",
        "high": f"high divergence, {symbol} > {split:g}",
    }
    models = {"base": ("base", MODEL_COLORS["base"]), "rl": ("RL", MODEL_COLORS["rl"])}
    for letter, panel, group in zip("ab", axes, ("low", "high"), strict=True):
        _draw_kde_panel(panel, density, medians, group, models)
        panel_title(panel, letter, titles[group])
    return figure


@figure_function
def compare_entropy(
    tables: Mapping[str, Frame],
    ax: Sequence[Axes] | None = None,
    *,
    metric: str = "js",
    split: float = 0.1,
    max_samples: int = 20_000,
    seed: int = 0,
) -> Figure:
    """Base and fine-tuned entropy at the high-divergence tokens of several tables (Fig. 15).

    One panel per table (e.g. RL and the SFT control), each the high-divergence panel of
    `entropy_by_divergence`: KDEs of the base model's entropy and of that table's fine-tuned
    model's entropy at tokens with metric > `split`, medians dashed. The paper's SFT divergent
    tokens sit more often at high base entropy than RL's.

    Args:
        tables: label -> token table, in drawing order (at least two).
        ax: one axes per table to draw into (default: a new full-width figure).
        metric: the divergence column.
        split: high = metric > split (on the JS scale in the paper).
        max_samples: tokens per table the KDEs are fitted on.
        seed: seed of the samples.

    Raises:
        DivscopeError: fewer than two tables.

    >>> rng = np.random.default_rng(0)
    >>> tokens = pl.DataFrame({"js": rng.exponential(0.05, 400),
    ...     "entropy_base": rng.exponential(1.0, 400), "entropy_rl": rng.exponential(0.5, 400)})
    >>> len(compare_entropy({"RL": tokens, "SFT": tokens}).axes)
    2
    """

    def draw(panel: Axes, label: str, table: Frame, style: dict[str, str]) -> None:
        density = analyses.entropy_density(
            table, metric, split=split, max_samples=max_samples, seed=seed
        )
        medians = analyses.entropy_by_divergence(table, metric, split=split)
        models = {"base": ("base", MODEL_COLORS["base"]), "rl": (label, style["color"])}
        _draw_kde_panel(panel, density, medians, "high", models)

    title = f"{{label}}: high divergence, {metric_symbol(metric)} > {split:g}"
    return side_by_side(tables, ax, "compare_entropy", draw, title=title, sharex=True, sharey=True)


def _draw_kde_panel(
    panel: Axes,
    density: analyses.EntropyDensity,
    medians: pl.DataFrame,
    group: str,
    models: Mapping[str, tuple[str, str]],
) -> None:
    """The KDE and dashed median of each model (`base`/`rl` -> (name, colour)) in `group`."""
    row = medians.filter(group=group).row(0, named=True)
    for model, (name, color) in models.items():
        curve = density.curves.filter(group=group, model=model)
        if curve.height:
            panel.plot(curve["entropy"], curve["density"], color=color, label=name)
            panel.fill_between(curve["entropy"], curve["density"], color=color, alpha=0.12)
        median = row[f"median_entropy_{model}"]
        if median is not None:
            panel.axvline(
                median,
                color=color,
                linestyle="--",
                linewidth=0.8,
                label=f"{name} median {median:.2f}",
            )
    panel.set_xlim(left=0)
    panel.set_ylim(bottom=0)
    panel.set_xlabel("entropy of the next-token distribution (nats)")
    panel.set_ylabel("density (1/nat)")
    panel.legend(loc="best")
    header_note(
        panel, _sample_note(density.n_sampled[group], density.n_tokens[group], density.seed)
    )


@figure_function
def topk_overlap(
    tokens: Frame,
    ax: Axes | None = None,
    *,
    metric: str = "js",
    thresholds: Sequence[float] = (0.0, 0.01, 0.05, 0.1, 0.2),
) -> Figure:
    """Mean overlap of the base and RL top-k sets against k, per divergence threshold (Fig. 9).

    Args:
        tokens: a token table.
        ax: axes to draw into (default: a new single-column figure).
        metric: the divergence column.
        thresholds: tokens strictly above each threshold form one line (on the JS scale in the
            paper).

    >>> from divscope.schema import OVERLAP_KS
    >>> rng = np.random.default_rng(0)
    >>> tokens = pl.DataFrame({"js": rng.exponential(0.05, 400),
    ...     **{f"overlap_{k}": rng.integers(0, k + 1, 400) / k for k in OVERLAP_KS}})
    >>> topk_overlap(tokens).axes[0].get_ylabel()
    'shared top-k tokens (%)'
    """
    overlap = analyses.topk_overlap(tokens, metric, thresholds=thresholds)
    figure, (axes,) = panels(ax)
    symbol = metric_symbol(metric)
    for i, row in enumerate(overlap.iter_rows(named=True)):
        label = f"{symbol} > {row['threshold']:g} ({count(row['count'])})"
        _draw_overlap(axes, row, label=label, color=CYCLE[i % len(CYCLE)])
    _overlap_axes(axes, overlap)
    legend_below(axes, own_figure=ax is None, ncols=2, title="tokens with")
    return figure


@figure_function
def compare_topk_overlap(
    tables: Mapping[str, Frame],
    ax: Axes | None = None,
    *,
    metric: str = "js",
    threshold: float = 0.1,
) -> Figure:
    """Top-k overlap with the base model at high divergence, several tables overlaid (Fig. 16).

    One line per table (e.g. RL and the SFT control): the mean overlap of the base and the
    fine-tuned top-k sets against k among tokens with metric > `threshold`. The paper's SFT
    overlaps less at every k, most at k = 1-3.

    Args:
        tables: label -> token table, in drawing order (at least two).
        ax: axes to draw into (default: a new single-column figure).
        metric: the divergence column.
        threshold: tokens strictly above it are averaged (on the JS scale in the paper).

    Raises:
        DivscopeError: fewer than two tables.

    >>> from divscope.schema import OVERLAP_KS
    >>> rng = np.random.default_rng(0)
    >>> tokens = pl.DataFrame({"js": rng.exponential(0.05, 400),
    ...     **{f"overlap_{k}": rng.integers(0, k + 1, 400) / k for k in OVERLAP_KS}})
    >>> compare_topk_overlap({"RL": tokens, "SFT": tokens}).axes[0].get_xlabel()
    "k (size of each model's top-k set)"
    """
    entries = compared(tables, "compare_topk_overlap")
    figure, (axes,) = panels(ax)
    for label, table, style in entries:
        overlap = analyses.topk_overlap(table, metric, thresholds=(threshold,))
        row = overlap.row(0, named=True)
        _draw_overlap(axes, row, label=f"{label} ({count(row['count'])})", **style)
    _overlap_axes(axes, overlap)
    title = f"tokens with {metric_symbol(metric)} > {threshold:g}"
    legend_below(axes, own_figure=ax is None, ncols=min(len(entries), 4), title=title)
    return figure


def _overlap_ks(columns: Iterable[str]) -> list[int]:
    """The k of each `overlap_<k>` column, in order."""
    return [int(c.removeprefix("overlap_")) for c in columns if c.startswith("overlap_")]


def _draw_overlap(axes: Axes, row: Mapping[str, Any], **style: Any) -> None:
    """One row of `analyses.topk_overlap` as a line over k; nothing when no token passes."""
    if row["count"]:
        ks = _overlap_ks(row)
        axes.plot(ks, [row[f"overlap_{k}"] for k in ks], marker="o", **style)


def _overlap_axes(axes: Axes, overlap: pl.DataFrame) -> None:
    """The axes of a top-k overlap figure: k on a log axis with its values as ticks, percent."""
    ks = _overlap_ks(overlap.columns)
    axes.set_xscale("log")
    axes.set_xticks(ks, [str(k) for k in ks])
    axes.minorticks_off()
    axes.set_ylim(0, 1.03)
    percent_axis(axes.yaxis)
    axes.set_xlabel("k (size of each model's top-k set)")
    axes.set_ylabel("shared top-k tokens (%)")


@figure_function
def rank_reordering(
    tokens: Frame,
    ax: Axes | None = None,
    *,
    metric: str = "js",
    threshold: float = 0.1,
    max_rank: int = 10,
) -> Figure:
    """Base-model rank of the RL model's top-1, -2 and -3 tokens at divergent positions (Fig. 22).

    Args:
        tokens: a token table.
        ax: axes to draw into (default: a new single-column figure).
        metric: the divergence column.
        threshold: positions strictly above it are counted (on the JS scale in the paper).
        max_rank: ranks above it are pooled in the last group.

    >>> rng = np.random.default_rng(0)
    >>> tokens = pl.DataFrame({"js": rng.exponential(0.1, 400),
    ...     **{f"rl_top{i}_rank_in_base": rng.geometric(0.5, 400) for i in (1, 2, 3)}})
    >>> rank_reordering(tokens).axes[0].get_xlabel()
    'rank of the RL token under the base model'
    """
    figure, (axes,) = panels(ax)
    _draw_ranks(
        axes, tokens, metric, threshold=threshold, max_rank=max_rank, color=RL_COLOR, model="RL"
    )
    return figure


@figure_function
def compare_rank_reordering(
    tables: Mapping[str, Frame],
    ax: Sequence[Axes] | None = None,
    *,
    metric: str = "js",
    threshold: float = 0.1,
    max_rank: int = 10,
) -> Figure:
    """The rank reordering of several tables side by side (Fig. 17).

    One panel per table (e.g. RL and the SFT control), each that of `rank_reordering`, its top-1
    bars in the table's colour: where the fine-tuned model's top-1, -2 and -3 tokens sit in the
    base ranking at divergent positions. The paper's SFT takes more of them from outside the
    base top-3.

    Args:
        tables: label -> token table, in drawing order (at least two).
        ax: one axes per table to draw into (default: a new full-width figure).
        metric: the divergence column.
        threshold: positions strictly above it are counted (on the JS scale in the paper).
        max_rank: ranks above it are pooled in the last group.

    Raises:
        DivscopeError: fewer than two tables.

    >>> rng = np.random.default_rng(0)
    >>> tokens = pl.DataFrame({"js": rng.exponential(0.1, 400),
    ...     **{f"rl_top{i}_rank_in_base": rng.geometric(0.5, 400) for i in (1, 2, 3)}})
    >>> figure = compare_rank_reordering({"RL": tokens, "SFT": tokens})
    >>> [axes.get_xlabel() for axes in figure.axes]
    ['rank of the RL token under the base model', 'rank of the SFT token under the base model']
    """

    def draw(panel: Axes, label: str, table: Frame, style: dict[str, str]) -> None:
        _draw_ranks(
            panel,
            table,
            metric,
            threshold=threshold,
            max_rank=max_rank,
            color=style["color"],
            model=label,
        )

    return side_by_side(tables, ax, "compare_rank_reordering", draw, height=2.7, sharey=True)


def _draw_ranks(
    axes: Axes,
    tokens: Frame,
    metric: str,
    *,
    threshold: float,
    max_rank: int,
    color: str,
    model: str,
) -> None:
    """One table's rank bars, top-1 in `color`, and its positions and top-1/top-3 shares; `model`
    names the table's fine-tuned model."""
    result = analyses.rank_reordering(tokens, metric, threshold=threshold, max_rank=max_rank)
    ranks = np.arange(1, max_rank + 2)
    width = 0.27
    for i, k in enumerate((1, 2, 3)):
        share = result.distribution.filter(rl_token=k).sort("base_rank")["share"].to_numpy()
        axes.bar(
            ranks + (i - 1) * width,
            share,
            width=width,
            color=(color, SKY_BLUE, GREY)[i],
            label=f"{model} top-{k} token",
        )
    axes.set_xticks(ranks, [str(r) for r in ranks[:-1]] + [f">{max_rank}"])
    axes.set_ylim(0, 1)
    percent_axis(axes.yaxis)
    axes.set_xlabel(f"rank of the {model} token under the base model")
    axes.set_ylabel("divergent positions (%)")
    note = (
        f"{count(result.n_positions)} positions with {metric_symbol(metric)} > {threshold:g};\n"
        f"{model} top-1 = base top-1 at {result.within_base_top1[1]:.0%},\n"
        f"within the base top-3 at {result.within_base_top3[1]:.0%}"
    )
    axes.legend(loc="upper right", title=note, alignment="left")


TAIL_FLOOR = 1e-8
"""Base probabilities below this are drawn at it on the log axes of the tail figures."""


@figure_function
def tail_promotion(
    tokens: Frame,
    ax: Sequence[Axes] | None = None,
    *,
    metric: str = "js",
    threshold: float = 0.1,
    tail_cutoff: float = 0.01,
    max_samples: int = 5_000,
    seed: int = 0,
) -> Figure:
    """How far down the base distribution the RL model's choice comes from (Fig. 10a/b).

    (a) Cumulative share of divergent positions whose RL top-1 token has base probability below
    x. (b) Each divergent position's base vs RL probability of the RL top-1 token; the shaded
    band is the tail the RL model promotes (a seeded sample when there are many positions).

    Args:
        tokens: a token table.
        ax: two axes to draw into (default: a new full-width figure).
        metric: the divergence column.
        threshold: positions strictly above it are counted (on the JS scale in the paper).
        tail_cutoff: base probability below which a token counts as promoted from the tail.
        max_samples: positions drawn in panel (b).
        seed: seed of the sample of panel (b).

    >>> rng = np.random.default_rng(0)
    >>> tokens = pl.DataFrame({"js": rng.exponential(0.1, 400),
    ...     "p_base_of_rl_top1": rng.random(400) ** 3, "p_top1_rl": rng.random(400)})
    >>> [axes.get_ylabel() for axes in tail_promotion(tokens).axes]
    ['positions with base p < x (%)', 'RL probability of its top-1 token']
    """
    result = analyses.tail_promotion(tokens, metric, threshold=threshold, tail_cutoff=tail_cutoff)
    columns = ["p_base_of_rl_top1", "p_top1_rl"]
    sample = analyses.high_divergence_sample(
        tokens, columns, metric, threshold=threshold, max_rows=max_samples, seed=seed
    )
    figure, (curve, scatter) = panels(ax, 2, width=DOUBLE_COLUMN, height=2.7)
    symbol = metric_symbol(metric)
    if result.n_tail:
        tail = (
            f"promoted from the tail (base p < {tail_cutoff:g}): {count(result.n_tail)} positions "
            f"({result.n_tail / result.n_positions:.1%}), mean RL p {result.tail_rl_prob_mean:.2f}"
        )
    else:
        tail = f"tail, base p < {tail_cutoff:g}: no divergent position takes a token from it"
    _tail_axes(curve, tail_cutoff, model="RL")
    _draw_tail_curve(curve, result, color=RL_COLOR)
    panel_title(curve, "a", "cumulative share")
    header_note(curve, f"{count(result.n_positions)} positions\nwith {symbol} > {threshold:g}")
    _tail_axes(scatter, tail_cutoff, model="RL", label=tail)
    points = sample.rows
    scatter.scatter(
        points["p_base_of_rl_top1"].clip(lower_bound=TAIL_FLOOR),
        points["p_top1_rl"],
        s=3,
        alpha=0.35,
        color=RL_COLOR,
        linewidths=0,
        rasterized=True,
        label="one divergent position",
    )
    scatter.set_ylim(0, 1.02)
    scatter.set_ylabel("RL probability of its top-1 token")
    panel_title(scatter, "b", "each position")
    note = _sample_note(sample.rows.height, sample.n_total, seed, "positions").replace("\n", " ")
    header_note(scatter, f"{note}\nbase p < {TAIL_FLOOR:g} drawn at {TAIL_FLOOR:g}")
    legend_below(scatter, own_figure=ax is None, ncols=2, markerscale=3)
    return figure


@figure_function
def compare_tail_promotion(
    tables: Mapping[str, Frame],
    ax: Axes | None = None,
    *,
    metric: str = "js",
    threshold: float = 0.1,
    tail_cutoff: float = 0.01,
) -> Figure:
    """Tail promotion of several tables overlaid: panel (a) of `tail_promotion` (Fig. 18).

    One cumulative curve per table (e.g. RL and the SFT control): the share of divergent
    positions whose fine-tuned top-1 token has base probability below x. The paper's SFT curve
    rises earlier and higher: it promotes more tokens the base model dispreferred.

    Args:
        tables: label -> token table, in drawing order (at least two).
        ax: axes to draw into (default: a new single-column figure).
        metric: the divergence column.
        threshold: positions strictly above it are counted (on the JS scale in the paper).
        tail_cutoff: base probability below which a token counts as promoted from the tail.

    Raises:
        DivscopeError: fewer than two tables.

    >>> rng = np.random.default_rng(0)
    >>> tokens = pl.DataFrame({"js": rng.exponential(0.1, 400),
    ...     "p_base_of_rl_top1": rng.random(400) ** 3, "p_top1_rl": rng.random(400)})
    >>> compare_tail_promotion({"RL": tokens, "SFT": tokens}).axes[0].get_xlabel()
    'base probability of the fine-tuned top-1 token'
    """
    entries = compared(tables, "compare_tail_promotion")
    figure, (axes,) = panels(ax, height=2.7)
    _tail_axes(axes, tail_cutoff, model="fine-tuned", label=f"tail, base p < {tail_cutoff:g}")
    for label, table, style in entries:
        result = analyses.tail_promotion(
            table, metric, threshold=threshold, tail_cutoff=tail_cutoff
        )
        share = result.n_tail / result.n_positions if result.n_positions else float("nan")
        name = f"{label}: {count(result.n_positions)} positions, {share:.1%} from the tail"
        _draw_tail_curve(axes, result, label=name, **style)
    title = f"positions with {metric_symbol(metric)} > {threshold:g}"
    legend_below(axes, own_figure=ax is None, ncols=1, title=title)
    return figure


def _tail_axes(axes: Axes, tail_cutoff: float, *, model: str, label: str | None = None) -> None:
    """A log axis of the base probability of `model`'s top-1 token, the tail below `tail_cutoff`
    shaded (and labelled `label` in the legend)."""
    axes.axvspan(TAIL_FLOOR / 2, tail_cutoff, color=SKY_BLUE, alpha=0.25, linewidth=0, label=label)
    axes.set_xscale("log")
    axes.set_xlim(TAIL_FLOOR / 2, 1.5)
    axes.set_xlabel(f"base probability of the {model} top-1 token")


def _draw_tail_curve(axes: Axes, result: analyses.TailPromotion, **style: Any) -> None:
    """The cumulative share of `result`'s positions whose RL top-1 has base probability < x."""
    axes.plot(result.curve["cutoff"], result.curve["share"], marker="o", **style)
    axes.set_ylim(0, 1.02)
    percent_axis(axes.yaxis)
    axes.set_ylabel("positions with base p < x (%)")
