"""The one style of every divscope figure: palette, sizes, axis labels, and how comparison
figures lay out their labelled tables (one colour per table, panels side by side).

Sizes are those of a two-column paper: a figure is `SINGLE_COLUMN` (3.4 in) or `DOUBLE_COLUMN`
(7 in) wide and its text is 7-8 pt, so it stays readable when placed at 100%. Colours are the
Okabe–Ito palette, distinguishable with every common colour-vision deficiency; base is always
blue and RL always vermillion.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from string import ascii_lowercase
from typing import Any, TypeVar

import matplotlib as mpl
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, PercentFormatter

from divscope.errors import DivscopeError

SINGLE_COLUMN = 3.4
"""Width in inches of a figure that spans one column of a two-column paper."""
DOUBLE_COLUMN = 7.0
"""Width in inches of a figure that spans the whole page."""
PANEL_HEIGHT = 2.3
"""Height in inches of one row of panels."""
SQUARE_HEIGHT = 3.1
"""Height in inches of a single-column figure with a square plot (Lorenz, ROC)."""

# Okabe & Ito (2008), "Color Universal Design".
BLACK = "#000000"
ORANGE = "#E69F00"
SKY_BLUE = "#56B4E9"
GREEN = "#009E73"
YELLOW = "#F0E442"
BLUE = "#0072B2"
VERMILLION = "#D55E00"
PURPLE = "#CC79A7"
GREY = "#999999"

BASE_COLOR = BLUE
RL_COLOR = VERMILLION
MODEL_COLORS = {"base": BASE_COLOR, "rl": RL_COLOR}
CYCLE = (BLUE, VERMILLION, GREEN, ORANGE, PURPLE, SKY_BLUE, BLACK, YELLOW)
"""Colours of series in order: base, RL, then the others."""
LINESTYLES = ("-", "--", ":", "-.")
"""Line styles cycled with the colours where curves may coincide, so that none hides another."""

METRIC_LABELS = {
    "js": "JS divergence, top-p (nats)",
    "js_full": "JS divergence, full (nats)",
    "kl_base_rl": "KL(base ‖ RL) (nats)",
    "kl_rl_base": "KL(RL ‖ base) (nats)",
    "ce_base_rl": "cross-entropy H(base, RL) (nats)",
}
METRIC_SYMBOLS = {
    "js": "JS",
    "js_full": "JS (full)",
    "kl_base_rl": "KL(b‖r)",
    "kl_rl_base": "KL(r‖b)",
    "ce_base_rl": "CE",
}

RC_PARAMS: dict[str, Any] = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "legend.fontsize": 7,
    "legend.title_fontsize": 7,
    "legend.frameon": False,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.prop_cycle": mpl.cycler(color=CYCLE),
    "lines.linewidth": 1.3,
    "lines.markersize": 3.5,
    "axes.linewidth": 0.7,
    "xtick.major.width": 0.7,
    "ytick.major.width": 0.7,
    "grid.linewidth": 0.5,
    "grid.alpha": 0.35,
    "savefig.dpi": 200,
    "pdf.fonttype": 42,
    "ps.fonttype": 42,
    "svg.fonttype": "none",
}

F = TypeVar("F", bound=Callable[..., Figure])
T = TypeVar("T")


def figure_function(function: F) -> F:
    """Draw `function`'s figure under the divscope style (rc parameters apply at creation)."""

    @functools.wraps(function)
    def styled(*args: Any, **kwargs: Any) -> Figure:
        with mpl.rc_context(RC_PARAMS):
            return function(*args, **kwargs)

    return styled  # type: ignore[return-value]


def metric_label(metric: str) -> str:
    """Axis label of a divergence column, with its unit."""
    return METRIC_LABELS.get(metric, f"{metric} (nats)")


def metric_symbol(metric: str) -> str:
    """Short name of a divergence column for legends and titles: js -> 'JS'."""
    return METRIC_SYMBOLS.get(metric, metric)


def table_style(index: int) -> dict[str, str]:
    """Colour and line style of the `index`-th labelled token table of a comparison figure.

    The first table (the RL checkpoint) is RL vermillion, the next ones (e.g. the SFT control)
    take the following colours of `CYCLE`; every comparison figure styles the tables alike.

    >>> table_style(0)
    {'color': '#D55E00', 'linestyle': '-'}
    """
    return {
        "color": CYCLE[(index + 1) % len(CYCLE)],
        "linestyle": LINESTYLES[index % len(LINESTYLES)],
    }


def compared(tables: Mapping[str, T], what: str) -> list[tuple[str, T, dict[str, str]]]:
    """(label, table, `table_style`) of each table of a comparison figure, in drawing order.

    Raises:
        DivscopeError: fewer than two tables.
    """
    if len(tables) < 2:
        raise DivscopeError(f"{what}: needs at least two labelled tables.")
    return [(label, table, table_style(i)) for i, (label, table) in enumerate(tables.items())]


def side_by_side(
    tables: Mapping[str, T],
    ax: Sequence[Axes] | None,
    what: str,
    draw: Callable[[Axes, str, T, dict[str, str]], None],
    *,
    title: str = "{label}",
    **subplot_options: Any,
) -> Figure:
    """One panel per labelled table, each drawn by the single-table figure's code.

    Args:
        tables: label -> table, in drawing order (at least two).
        ax: one axes per table (default: a new full-width figure, panels sharing their axes
            per `subplot_options`; only the outer ones keep their labels).
        what: the figure's name, for the error message.
        draw: draws one table: `draw(panel, label, table, table_style)`.
        title: each panel's title after its letter; `{label}` is the table's label.
        **subplot_options: passed to `panels` (e.g. `sharey=True`, `height`).

    Raises:
        DivscopeError: fewer than two tables, or not one axes per table.
    """
    entries = compared(tables, what)
    figure, axes = panels(ax, len(entries), width=DOUBLE_COLUMN, **subplot_options)
    for letter, panel, (label, table, style) in zip(ascii_lowercase, axes, entries, strict=False):
        draw(panel, label, table, style)
        panel_title(panel, letter, title.format(label=label))
    if ax is None:
        for panel in axes[1:]:
            panel.label_outer()
    return figure


def panels(
    ax: Axes | Sequence[Axes] | None,
    n: int = 1,
    *,
    width: float = SINGLE_COLUMN,
    height: float = PANEL_HEIGHT,
    rows: int = 1,
    **subplot_options: Any,
) -> tuple[Figure, list[Axes]]:
    """The figure and `n` axes to draw into: the caller's, or a new figure of the given size.

    Args:
        ax: None for a new figure; one Axes when `n` is 1; otherwise a sequence of `n` Axes.
        n: number of panels the figure needs.
        width: width in inches of a new figure.
        height: height in inches of a new figure.
        rows: rows of panels in a new figure (`n` must be a multiple).
        **subplot_options: passed to `Figure.subplots` (e.g. `sharey=True`).

    Raises:
        DivscopeError: `ax` holds the wrong number of axes.
    """
    if ax is None:
        figure = Figure(figsize=(width, height), layout="constrained")
        grid = figure.subplots(rows, n // rows, squeeze=False, **subplot_options)
        return figure, list(grid.ravel())
    axes = [ax] if isinstance(ax, Axes) else list(ax)
    if len(axes) != n:
        raise DivscopeError(f"this figure draws {n} panel(s); got {len(axes)} axes in `ax`.")
    return axes[0].figure, axes


def percent_axis(axis: Any, *, decimals: int | None = None) -> None:
    """Show a 0–1 share on `axis` (ax.xaxis or ax.yaxis) as percent."""
    axis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=decimals))


def panel_title(ax: Axes, letter: str, text: str) -> None:
    """Title a panel '(a) text', left-aligned."""
    ax.set_title(f"({letter}) {text}", loc="left")


def corner_note(ax: Axes, text: str, *, loc: str = "upper right") -> None:
    """A small grey note inside the axes (sample sizes, seeds), placed at a corner."""
    x = 0.98 if "right" in loc else 0.02
    y = 0.97 if "upper" in loc else 0.03
    ax.text(
        x,
        y,
        text,
        transform=ax.transAxes,
        ha="right" if "right" in loc else "left",
        va="top" if "upper" in loc else "bottom",
        fontsize=6.5,
        color="#555555",
    )


ZERO_LINEAR_RANGE = 1e-6
"""Values below this sit on the linear stretch of `zero_log_yaxis`, so exact zeros show."""


def zero_log_yaxis(ax: Axes) -> None:
    """Log y scale above `ZERO_LINEAR_RANGE` with a short linear stretch down to 0 (symlog).

    Divergences are skewed over many decades, yet often exactly zero for most tokens: a plain
    log axis would silently drop those.
    """
    ax.set_yscale("symlog", linthresh=ZERO_LINEAR_RANGE, linscale=0.4)
    ax.set_ylim(bottom=0)


def plain_log_ticks(axis: Any) -> None:
    """Label a log axis that spans under two decades with plain numbers (0.2, 0.3, 0.5)."""
    low, high = sorted(axis.get_view_interval())
    if low > 0 and high / low < 100:
        axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        axis.set_minor_formatter(FuncFormatter(lambda value, _: f"{value:g}"))


def header_note(ax: Axes, text: str) -> None:
    """A small grey note above the axes on the right, where it cannot cover data."""
    ax.set_title(text, loc="right", fontsize=6.5, color="#555555")


def legend_below(ax: Axes, *, own_figure: bool, ncols: int = 2, **options: Any) -> None:
    """The legend under the plot when the figure is ours, else the best spot inside `ax`.

    Args:
        ax: the axes whose handles are listed.
        own_figure: whether the figure was made by the figure function (ax=None); a legend
            below a caller's axes could land on their other panels.
        ncols: legend columns below the plot.
        **options: passed to `legend` (e.g. `title`).
    """
    if own_figure:
        ax.figure.legend(
            *ax.get_legend_handles_labels(), loc="outside lower center", ncols=ncols, **options
        )
    else:
        ax.legend(loc="best", **options)


def count(n: int) -> str:
    """A count with thousands separators: 12345 -> '12,345'."""
    return f"{n:,}"
