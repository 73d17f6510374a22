"""Which words diverge: word clouds of high- and low-divergence tokens (Fig. 5)."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from divscope import analyses
from divscope.analyses._frames import Frame
from divscope.figures.style import (
    DOUBLE_COLUMN,
    GREY,
    MODEL_COLORS,
    RL_COLOR,
    figure_function,
    metric_symbol,
    panels,
)


@figure_function
def wordclouds(
    tokens: Frame,
    ax: Sequence[Axes] | None = None,
    *,
    metric: str = "js",
    high: float = 0.1,
    low: float = 0.01,
    top: int = 60,
) -> Figure:
    """Word clouds of the most frequent high- and low-divergence words (Fig. 5).

    Word size is proportional to the word's frequency within its group.

    Args:
        tokens: a token table.
        ax: two axes to draw into, high then low (default: a new full-width figure).
        metric: the divergence column.
        high: the high group is metric > high.
        low: the low group is metric < low.
        top: words per cloud.
    """
    from wordcloud import WordCloud

    frequencies = analyses.word_frequencies(tokens, metric, high=high, low=low, top=top)
    figure, axes = panels(ax, 2, width=DOUBLE_COLUMN, height=2.0)
    symbol = metric_symbol(metric)
    groups = {
        "high": (f"(a) high divergence, {symbol} > {high:g}", RL_COLOR),
        "low": (f"(b) low divergence, {symbol} < {low:g}", MODEL_COLORS["base"]),
    }
    for panel, (group, (title, color)) in zip(axes, groups.items(), strict=True):
        words = frequencies.filter(pl.col("group") == group)
        panel.set_axis_off()
        panel.set_title(f"{title}: {len(words)} most frequent words", loc="left")
        if words.is_empty():
            panel.text(
                0.5,
                0.5,
                "no tokens in this group",
                ha="center",
                va="center",
                transform=panel.transAxes,
                color=GREY,
            )
            continue
        cloud = WordCloud(
            width=900,
            height=500,
            background_color="white",
            color_func=lambda *args, color=color, **kwargs: color,
            prefer_horizontal=1.0,
            random_state=0,
            margin=4,
        ).generate_from_frequencies(dict(zip(words["word"], words["count"], strict=True)))
        panel.imshow(cloud.to_array(), interpolation="bilinear")
    return figure
