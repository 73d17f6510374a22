"""What changes where the models diverge: entropy, top-k, ranks, tail (Figs. 4, 9, 10, 22)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
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
    count,
    figure_function,
    header_note,
    legend_below,
    metric_symbol,
    panel_title,
    panels,
    percent_axis,
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
        split: low = metric < split, high = metric > split.
        max_samples: tokens per group the KDE is fitted on.
        seed: seed of the samples.
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
    for letter, panel, group in zip("ab", axes, ("low", "high"), strict=True):
        row = medians.filter(group=group).row(0, named=True)
        for model in ("base", "rl"):
            curve = density.curves.filter(group=group, model=model)
            color = MODEL_COLORS[model]
            name = "base" if model == "base" else "RL"
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
        panel_title(panel, letter, titles[group])
        panel.legend(loc="best")
        header_note(panel, _sample_note(density.n_sampled[group], density.n_tokens[group], seed))
    return figure


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
        thresholds: tokens strictly above each threshold form one line.
    """
    overlap = analyses.topk_overlap(tokens, metric, thresholds=thresholds)
    ks = [int(c.removeprefix("overlap_")) for c in overlap.columns if c.startswith("overlap_")]
    figure, (axes,) = panels(ax)
    symbol = metric_symbol(metric)
    for i, row in enumerate(overlap.iter_rows(named=True)):
        if not row["count"]:
            continue
        values = [row[f"overlap_{k}"] for k in ks]
        axes.plot(
            ks,
            values,
            marker="o",
            color=CYCLE[i % len(CYCLE)],
            label=f"{symbol} > {row['threshold']:g} ({count(row['count'])})",
        )
    axes.set_xscale("log")
    axes.set_xticks(ks, [str(k) for k in ks])
    axes.minorticks_off()
    axes.set_ylim(0, 1.03)
    percent_axis(axes.yaxis)
    axes.set_xlabel("k (size of each model's top-k set)")
    axes.set_ylabel("shared top-k tokens (%)")
    legend_below(axes, own_figure=ax is None, ncols=2, title="tokens with")
    return figure


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
        threshold: positions strictly above it are counted.
        max_rank: ranks above it are pooled in the last group.
    """
    result = analyses.rank_reordering(tokens, metric, threshold=threshold, max_rank=max_rank)
    figure, (axes,) = panels(ax)
    ranks = np.arange(1, max_rank + 2)
    width = 0.27
    for i, k in enumerate((1, 2, 3)):
        share = result.distribution.filter(rl_token=k).sort("base_rank")["share"].to_numpy()
        axes.bar(
            ranks + (i - 1) * width,
            share,
            width=width,
            color=(RL_COLOR, SKY_BLUE, GREY)[i],
            label=f"RL top-{k} token",
        )
    axes.set_xticks(ranks, [str(r) for r in ranks[:-1]] + [f">{max_rank}"])
    axes.set_ylim(0, 1)
    percent_axis(axes.yaxis)
    axes.set_xlabel("rank of the RL token under the base model")
    axes.set_ylabel("divergent positions (%)")
    note = (
        f"{count(result.n_positions)} positions with {metric_symbol(metric)} > {threshold:g};\n"
        f"RL top-1 = base top-1 at {result.within_base_top1[1]:.0%},\n"
        f"within the base top-3 at {result.within_base_top3[1]:.0%}"
    )
    axes.legend(loc="upper right", title=note, alignment="left")
    return figure


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
        threshold: positions strictly above it are counted.
        tail_cutoff: base probability below which a token counts as promoted from the tail.
        max_samples: positions drawn in panel (b).
        seed: seed of the sample of panel (b).
    """
    result = analyses.tail_promotion(tokens, metric, threshold=threshold, tail_cutoff=tail_cutoff)
    columns = ["p_base_of_rl_top1", "p_top1_rl"]
    sample = analyses.high_divergence_sample(
        tokens, columns, metric, threshold=threshold, max_rows=max_samples, seed=seed
    )
    figure, (curve, scatter) = panels(ax, 2, width=DOUBLE_COLUMN, height=2.7)
    symbol = metric_symbol(metric)
    floor = 1e-8
    if result.n_tail:
        tail = (
            f"promoted from the tail (base p < {tail_cutoff:g}): {count(result.n_tail)} positions "
            f"({result.n_tail / result.n_positions:.1%}), mean RL p {result.tail_rl_prob_mean:.2f}"
        )
    else:
        tail = f"tail, base p < {tail_cutoff:g}: no divergent position takes a token from it"
    for panel, label in ((curve, None), (scatter, tail)):
        panel.axvspan(floor / 2, tail_cutoff, color=SKY_BLUE, alpha=0.25, linewidth=0, label=label)
        panel.set_xscale("log")
        panel.set_xlim(floor / 2, 1.5)
        panel.set_xlabel("base probability of the RL top-1 token")
    curve.plot(result.curve["cutoff"], result.curve["share"], marker="o", color=RL_COLOR)
    curve.set_ylim(0, 1.02)
    percent_axis(curve.yaxis)
    curve.set_ylabel("positions with base p < x (%)")
    panel_title(curve, "a", "cumulative share")
    header_note(curve, f"{count(result.n_positions)} positions\nwith {symbol} > {threshold:g}")
    points = sample.rows
    scatter.scatter(
        points["p_base_of_rl_top1"].clip(lower_bound=floor),
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
    header_note(scatter, f"{note}\nbase p < {floor:g} drawn at {floor:g}")
    legend_below(scatter, own_figure=ax is None, ncols=2, markerscale=3)
    return figure
