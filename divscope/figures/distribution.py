"""How the divergence is distributed: histogram, percentiles, Lorenz curve (Figs. 2, 6, 12, 23)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from divscope import analyses
from divscope.analyses._frames import Frame
from divscope.errors import DivscopeError
from divscope.figures.style import (
    BLACK,
    CYCLE,
    DOUBLE_COLUMN,
    GREY,
    LINESTYLES,
    RL_COLOR,
    SQUARE_HEIGHT,
    compared,
    corner_note,
    count,
    figure_function,
    header_note,
    legend_below,
    metric_label,
    metric_symbol,
    panel_title,
    panels,
    percent_axis,
    plain_log_ticks,
    zero_log_yaxis,
)

CURVE_PERCENTILES: tuple[float, ...] = (
    *np.round(np.linspace(0, 99, 199), 2),
    99.5, 99.8, 99.9, 99.95, 99.99, 100.0,
)  # fmt: skip
"""Percentiles drawn by the percentile curves: every half percent, then the top tail."""
MARKED_PERCENTILES: tuple[float, ...] = (50, 90, 99, 99.9)


@figure_function
def divergence_histogram(
    tokens: Frame, ax: Axes | None = None, *, metric: str = "js", bins: int = 60
) -> Figure:
    """Histogram of the divergence over log-spaced bins, counts on a log axis (Fig. 2, left).

    Log bins start at the smallest positive value; exact zeros cannot sit on a log axis and are
    counted in the corner note instead.

    Args:
        tokens: a token table.
        ax: axes to draw into (default: a new single-column figure).
        metric: the divergence column.
        bins: number of log-spaced bins.

    >>> import polars as pl
    >>> tokens = pl.DataFrame({"js": np.random.default_rng(0).exponential(0.03, 400)})
    >>> divergence_histogram(tokens).axes[0].get_xlabel()
    'JS divergence, top-p (nats)'
    """
    result = analyses.histogram(tokens, metric, bins=bins, log=True)
    figure, (axes,) = panels(ax)
    axes.stairs(result.counts, result.edges, fill=True, color=RL_COLOR, alpha=0.85, linewidth=0)
    axes.set_xscale("log")
    axes.set_yscale("log")
    plain_log_ticks(axes.xaxis)
    axes.set_xlabel(metric_label(metric))
    axes.set_ylabel("tokens (count)")
    total = sum(result.counts) + result.n_below + result.n_above
    note = f"{count(total)} tokens"
    if result.n_below:
        zeros = f"{count(result.n_below)} ({result.n_below / total:.1%})"
        note += f"; {zeros} are exactly 0\nand cannot be shown on the log axis"
    header_note(axes, note)
    return figure


def _draw_percentile_curve(axes: Axes, percentiles: Mapping[float, float], **style) -> None:
    axes.plot(list(percentiles), list(percentiles.values()), **style)


@figure_function
def percentile_curve(tokens: Frame, ax: Axes | None = None, *, metric: str = "js") -> Figure:
    """The divergence at each percentile of tokens, on a log axis (Fig. 2, right).

    The curve stays near zero for most tokens and climbs only in the top few percent: the
    sparsity of the shift. The axis is logarithmic above 1e-6 and linear below, so exact zeros
    show as a flat line at 0.

    Args:
        tokens: a token table.
        ax: axes to draw into (default: a new single-column figure).
        metric: the divergence column.

    >>> import polars as pl
    >>> tokens = pl.DataFrame({"js": np.random.default_rng(0).exponential(0.03, 400)})
    >>> percentile_curve(tokens).axes[0].get_xlabel()
    'percentile of tokens (%)'
    """
    result = analyses.sparsity(tokens, metric, thresholds=(), percentiles=CURVE_PERCENTILES)
    figure, (axes,) = panels(ax)
    _draw_percentile_curve(axes, result.percentiles, color=RL_COLOR)
    marked = {q: result.percentiles[q] for q in MARKED_PERCENTILES if q in result.percentiles}
    axes.plot(list(marked), list(marked.values()), "o", color=BLACK, markersize=3)
    listing = "\n".join(f"p{q:g} = {value:.2g}" for q, value in marked.items())
    corner_note(axes, f"{count(result.n_tokens)} tokens\n{listing}", loc="upper left")
    zero_log_yaxis(axes)
    axes.set_xlim(0, 100)
    axes.set_xlabel("percentile of tokens (%)")
    axes.set_ylabel(metric_label(metric))
    axes.grid(True, which="major")
    return figure


@figure_function
def compare_sparsity(
    tables: Mapping[str, Frame],
    ax: Sequence[Axes] | None = None,
    *,
    metric: str = "js",
    thresholds: Sequence[float] = (1e-4, 1e-3, 1e-2, 0.1),
) -> Figure:
    """Several labelled token tables overlaid, e.g. RL vs the SFT control (Figs. 6 and 12).

    Panel (a) overlays the percentile curves, panel (b) compares the share of tokens below
    near-zero thresholds.

    Args:
        tables: label -> token table, in drawing order.
        ax: two axes to draw into (default: a new full-width figure).
        metric: the divergence column.
        thresholds: cut-offs of panel (b); a token counts when strictly below (on the JS
            scale in the paper).

    Raises:
        DivscopeError: fewer than two tables.

    >>> import polars as pl
    >>> tokens = pl.DataFrame({"js": np.random.default_rng(0).exponential(0.03, 400)})
    >>> figure = compare_sparsity({"RL": tokens, "SFT": tokens.with_columns(pl.col("js") * 10)})
    >>> [axes.get_xlabel() for axes in figure.axes]
    ['percentile of tokens (%)', 'near-zero threshold (nats)']
    """
    styles = [style for _, _, style in compared(tables, "compare_sparsity")]
    result = analyses.compare(tables, metric, thresholds=thresholds, percentiles=CURVE_PERCENTILES)
    figure, (curves, bars) = panels(ax, 2, width=DOUBLE_COLUMN)
    width = 0.8 / result.height
    for i, (row, style) in enumerate(zip(result.iter_rows(named=True), styles, strict=True)):
        percentiles = {q: row[f"p{q:g}"] for q in CURVE_PERCENTILES}
        label = f"{row['label']} ({count(row['n_tokens'])} tokens)"
        _draw_percentile_curve(curves, percentiles, label=label, **style)
        shares = [row[f"share_below_{t:g}"] for t in thresholds]
        positions = np.arange(len(thresholds)) + (i - (result.height - 1) / 2) * width
        bars.bar(positions, shares, width=width, color=style["color"])
    zero_log_yaxis(curves)
    curves.set_xlim(0, 100)
    curves.set_xlabel("percentile of tokens (%)")
    curves.set_ylabel(metric_label(metric))
    curves.grid(True)
    panel_title(curves, "a", "divergence at each percentile")
    symbol = metric_symbol(metric)
    bars.set_xticks(range(len(thresholds)), [f"{symbol} < {t:g}" for t in thresholds])
    bars.set_xlabel("near-zero threshold (nats)")
    bars.set_ylabel("tokens below threshold (%)")
    bars.set_ylim(0, 1)
    percent_axis(bars.yaxis)
    legend_below(curves, own_figure=ax is None, ncols=min(result.height, 4))
    panel_title(bars, "b", "share of near-zero tokens")
    return figure


@figure_function
def token_profile(
    tokens: Frame,
    ax: Axes | None = None,
    *,
    words: Sequence[str] | None = None,
    metric: str = "js",
) -> Figure:
    """Percentile curves of chosen words beside all tokens (the paper's "the", Fig. 23).

    A frequent function word diverges like the table as a whole: the shift is about context,
    not vocabulary. Words are matched after normalization (" The" matches "the").

    Args:
        tokens: a token table.
        ax: axes to draw into (default: a new single-column figure).
        words: the words profiled; default the three most frequent words of the table.
        metric: the divergence column.

    Raises:
        DivscopeError: none of the words occurs in the table.

    >>> import polars as pl
    >>> tokens = pl.DataFrame({"token": [" wait", " so", " the", " x"] * 50,
    ...                        "js": np.random.default_rng(0).exponential(0.05, 200)})
    >>> token_profile(tokens, words=[" wait", " so"]).axes[0].get_xlabel()
    'percentile of occurrences (%)'
    """
    if words is None:
        words = analyses.most_frequent_words(tokens, top=3)
    profiles = {
        word: analyses.token_profile(tokens, word, metric, percentiles=CURVE_PERCENTILES)
        for word in words
    }
    present = {word: p for word, p in profiles.items() if p.n_tokens}
    if not present:
        raise DivscopeError(
            f"token_profile: none of the words {', '.join(map(repr, words))} occurs in the table."
        )
    everything = analyses.sparsity(tokens, metric, thresholds=(), percentiles=CURVE_PERCENTILES)
    figure, (axes,) = panels(ax)
    _draw_percentile_curve(
        axes, everything.percentiles, color=GREY, label=f"all tokens ({count(everything.n_tokens)})"
    )
    for i, (word, profile) in enumerate(present.items()):
        _draw_percentile_curve(
            axes,
            profile.percentiles,
            color=CYCLE[(i + 1) % len(CYCLE)],
            linestyle=LINESTYLES[(i + 1) % len(LINESTYLES)],
            label=f"“{word}” ({count(profile.n_tokens)})",
        )
    zero_log_yaxis(axes)
    axes.set_xlim(0, 100)
    axes.set_xlabel("percentile of occurrences (%)")
    axes.set_ylabel(metric_label(metric))
    axes.grid(True)
    axes.legend(loc="upper left", title="occurrences")
    return figure


@figure_function
def lorenz(tokens: Frame, ax: Axes | None = None, *, metric: str = "js") -> Figure:
    """Lorenz curve of the divergence mass with its Gini coefficient (the takeover paper).

    Tokens are sorted from least to most divergent; the curve gives the share of the total
    divergence held by the least divergent x% of tokens. The dots mark how few of the most
    divergent tokens hold 50%, 80% and 90% of the mass.

    Args:
        tokens: a token table.
        ax: axes to draw into (default: a new single-column figure).
        metric: a non-negative divergence column.

    >>> import polars as pl
    >>> tokens = pl.DataFrame({"js": np.random.default_rng(0).exponential(0.03, 400)})
    >>> lorenz(tokens).axes[0].get_ylabel()
    'divergence mass (cumulative %)'
    """
    result = analyses.lorenz(tokens, metric)
    figure, (axes,) = panels(ax, height=SQUARE_HEIGHT)
    curve = result.curve
    axes.plot([0, 1], [0, 1], color=GREY, linestyle="--", linewidth=0.8, label="equal divergence")
    axes.plot(
        curve["token_share"],
        curve["mass_share"],
        color=RL_COLOR,
        label=f"{metric_symbol(metric)}: Gini = {result.gini:.3f}",
    )
    for mass, tokens_share in result.token_share_for_mass.items():
        point = (1 - tokens_share, 1 - mass)
        axes.plot(*point, "o", color=BLACK, markersize=3)
        axes.annotate(
            f"top {tokens_share:.1%} of tokens\nhold {mass:.0%} of the mass",
            point,
            xytext=(-6, 4),
            textcoords="offset points",
            ha="right",
            va="bottom",
            fontsize=6.5,
        )
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1)
    percent_axis(axes.xaxis)
    percent_axis(axes.yaxis)
    axes.set_xlabel("tokens, least divergent first (cumulative %)")
    axes.set_ylabel("divergence mass (cumulative %)")
    axes.legend(loc="upper left", title=f"{count(result.n_tokens)} tokens")
    return figure
