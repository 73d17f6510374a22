"""How the divergence grows over RL training: several checkpoints on one set of trajectories."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from divscope import analyses
from divscope.analyses._frames import Frame
from divscope.errors import DivscopeError
from divscope.figures.style import (
    CYCLE,
    DOUBLE_COLUMN,
    LINESTYLES,
    RL_COLOR,
    figure_function,
    legend_below,
    metric_label,
    metric_symbol,
    panel_title,
    panels,
    percent_axis,
    zero_log_yaxis,
)


@figure_function
def evolution(
    tables: Mapping[int, Frame],
    ax: Sequence[Axes] | None = None,
    *,
    metric: str = "js",
    threshold: float = 0.1,
) -> Figure:
    """Divergence percentiles, divergent share and their stability over training steps (Fig. 11).

    (a) Percentiles of the divergence per training step. (b) Share of tokens above `threshold`.
    (c) Jaccard overlap of each step's divergent positions with the final checkpoint's: near 1
    early means the positions that will diverge are fixed early in training. Drawn for the
    steps whose tables score the final step's trajectories (`analyses.shared_trajectories`);
    where no earlier step does (a monitor that samples the policy at each step), the panel says
    so instead.

    Args:
        tables: training step -> token table of the base model against that checkpoint.
        ax: three axes to draw into (default: a new full-width figure).
        metric: the divergence column.
        threshold: positions strictly above it count as divergent.

    >>> import numpy as np
    >>> import polars as pl
    >>> rng = np.random.default_rng(0)
    >>> tables = {step: pl.DataFrame({"prompt_id": "p0", "sample_id": np.arange(400) // 100,
    ...     "position": np.arange(400) % 100, "js": rng.exponential(0.001 * step, 400)})
    ...     for step in (30, 60, 120)}
    >>> [axes.get_ylabel() for axes in evolution(tables).axes][1:]
    ['tokens with JS > 0.1 (%)', 'Jaccard overlap with final (0–1)']
    """
    if len(tables) < 2:
        raise DivscopeError("evolution: needs token tables of at least two training steps.")
    steps = analyses.evolution(tables, metric, threshold=threshold)
    figure, (percentiles, share, jaccard) = panels(ax, 3, width=DOUBLE_COLUMN)
    columns = [c for c in steps.columns if c.startswith("p") and c[1:2].isdigit()]
    for i, column in enumerate(columns):
        percentiles.plot(
            steps["step"],
            steps[column],
            marker="o",
            color=CYCLE[i],
            linestyle=LINESTYLES[i % len(LINESTYLES)],
            label=column,
        )
    zero_log_yaxis(percentiles)
    percentiles.set_ylabel(metric_label(metric))
    legend_below(percentiles, own_figure=ax is None, ncols=4, title="percentile")
    panel_title(percentiles, "a", "percentiles")
    symbol = metric_symbol(metric)
    share.plot(steps["step"], steps["share_high"], marker="o", color=RL_COLOR)
    share.set_ylim(bottom=0)
    percent_axis(share.yaxis)
    share.set_ylabel(f"tokens with {symbol} > {threshold:g} (%)")
    panel_title(share, "b", "share of divergent tokens")
    if steps["same_trajectories"][:-1].any():
        jaccard.plot(steps["step"], steps["jaccard_with_final"], marker="o", color=RL_COLOR)
    else:  # only the final step against itself: nothing to compare
        jaccard.set_xlim(share.get_xlim())
        jaccard.text(
            0.5,
            0.5,
            "not comparable:\neach step scores\nits own sampled responses",
            transform=jaccard.transAxes,
            ha="center",
            va="center",
            color="0.35",
        )
    jaccard.set_ylim(0, 1.03)
    jaccard.set_ylabel("Jaccard overlap with final (0–1)")
    panel_title(jaccard, "c", "overlap with the final model")
    for panel in (percentiles, share, jaccard):
        panel.set_xlabel("RL training step")
        panel.grid(True)
    return figure
