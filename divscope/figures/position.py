"""Where in a response the divergence sits: positional profile (also of several tables side by
side), early density, one response."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import polars as pl
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.transforms import ScaledTranslation

from divscope import analyses
from divscope.analyses._frames import Frame, checked_lazy
from divscope.analyses._streaming import collect
from divscope.errors import DivscopeError
from divscope.figures.style import (
    BLACK,
    BLUE,
    DOUBLE_COLUMN,
    GREY,
    RL_COLOR,
    YELLOW,
    count,
    figure_function,
    header_note,
    legend_below,
    metric_label,
    metric_symbol,
    panels,
    side_by_side,
    zero_log_yaxis,
)


@figure_function
def positional_profile(
    tokens: Frame, ax: Axes | None = None, *, metric: str = "js", bins: int = 20
) -> Figure:
    """Mean, median and percentile bands of the divergence over relative position (Fig. 3).

    Args:
        tokens: a token table.
        ax: axes to draw into (default: a new single-column figure).
        metric: the divergence column.
        bins: equal-width bins of relative position t / T.

    >>> tokens = pl.DataFrame({"js": np.random.default_rng(0).exponential(0.03, 400),
    ...                        "position": np.arange(400) % 100, "n_tokens": 100})
    >>> positional_profile(tokens).axes[0].get_xlabel()
    'relative position in the response, t / T'
    """
    figure, (axes,) = panels(ax)
    _draw_profile(axes, tokens, metric, bins=bins, color=RL_COLOR)
    legend_below(axes, own_figure=ax is None, ncols=4)
    return figure


@figure_function
def compare_positional_profile(
    tables: Mapping[str, Frame],
    ax: Sequence[Axes] | None = None,
    *,
    metric: str = "js",
    bins: int = 20,
) -> Figure:
    """The positional profile of several labelled token tables side by side (Fig. 14).

    One panel per table on a shared axis, e.g. RL and the SFT control: the paper's RL
    divergence drops to near zero in the middle of a response, SFT's stays elevated throughout.

    Args:
        tables: label -> token table, in drawing order (at least two).
        ax: one axes per table to draw into (default: a new full-width figure).
        metric: the divergence column.
        bins: equal-width bins of relative position t / T.

    Raises:
        DivscopeError: fewer than two tables.

    >>> tokens = pl.DataFrame({"js": np.random.default_rng(0).exponential(0.03, 400),
    ...                        "position": np.arange(400) % 100, "n_tokens": 100})
    >>> len(compare_positional_profile({"RL": tokens, "SFT": tokens}).axes)
    2
    """

    def draw(panel: Axes, label: str, table: Frame, style: dict[str, str]) -> None:
        _draw_profile(panel, table, metric, bins=bins, color=style["color"])

    figure = side_by_side(tables, ax, "compare_positional_profile", draw, sharey=True)
    first = figure.axes[0] if ax is None else ax[0]
    legend_below(first, own_figure=ax is None, ncols=4)
    return figure


def _draw_profile(axes: Axes, tokens: Frame, metric: str, *, bins: int, color: str) -> None:
    """One table's positional profile: percentile bands and the mean in `color`, the median."""
    profile = analyses.positional_profile(tokens, metric, bins=bins).drop_nulls("mean")
    centre = ((profile["bin_start"] + profile["bin_end"]) / 2).to_numpy()
    band = {"color": color, "linewidth": 0}
    axes.fill_between(centre, profile["p10"], profile["p90"], alpha=0.15, label="p10–p90", **band)
    axes.fill_between(centre, profile["p25"], profile["p75"], alpha=0.3, label="p25–p75", **band)
    axes.plot(centre, profile["mean"], color=color, marker="o", label="mean")
    axes.plot(centre, profile["median"], color=BLACK, linestyle="--", label="median")
    zero_log_yaxis(axes)
    axes.set_xlim(0, 1)
    axes.set_xlabel("relative position in the response, t / T")
    axes.set_ylabel(metric_label(metric))
    header_note(axes, f"{count(int(profile['count'].sum()))} tokens in {bins} bins")


@figure_function
def early_density(
    tokens: Frame,
    ax: Axes | None = None,
    *,
    metric: str = "js",
    top_share: float = 0.01,
    bins: int = 20,
) -> Figure:
    """Density over relative position of the most divergent tokens beside all tokens (Fig. 3).

    Args:
        tokens: a token table.
        ax: axes to draw into (default: a new single-column figure).
        metric: the divergence column.
        top_share: share of tokens, most divergent first.
        bins: equal-width bins of relative position.

    >>> tokens = pl.DataFrame({"js": np.random.default_rng(0).exponential(0.03, 400),
    ...                        "position": np.arange(400) % 100, "n_tokens": 100})
    >>> early_density(tokens).axes[0].get_ylabel()
    'density (uniform = 1)'
    """
    density = analyses.early_density(tokens, metric, top_share=top_share, bins=bins)
    figure, (axes,) = panels(ax)
    edges = np.r_[density["bin_start"].to_numpy(), 1.0]
    axes.stairs(density["density_all"], edges, color=GREY, label="all tokens")
    axes.stairs(
        density["density"],
        edges,
        color=RL_COLOR,
        linewidth=1.6,
        label=f"top {top_share:.0%} by {metric_symbol(metric)}",
    )
    axes.axhline(1.0, color=GREY, linewidth=0.6, linestyle=":")
    axes.set_xlim(0, 1)
    axes.set_ylim(bottom=0)
    axes.set_xlabel("relative position in the response, t / T")
    axes.set_ylabel("density (uniform = 1)")
    axes.legend(loc="upper right")
    return figure


def _display_piece(token: str) -> str:
    """A token as shown in running text: newline and tab visible, byte-level markers as spaces."""
    return token.replace("Ġ", " ").replace("▁", " ").replace("\n", "↵").replace("\t", "⇥")


@figure_function
def token_trajectory(
    tokens: Frame,
    ax: Sequence[Axes] | None = None,
    *,
    metric: str = "js",
    prompt_id: str | None = None,
    sample_id: int | None = None,
    threshold: float = 0.1,
    max_tokens: int = 80,
    label_top: int = 5,
) -> Figure:
    """Per-token divergence along one response, with its text and divergent tokens marked (Fig. 1).

    Top: the divergence of every token, those above `threshold` in vermillion, the `label_top`
    largest labelled with their text. Bottom: the response text, divergent tokens highlighted.

    Args:
        tokens: a token table.
        ax: two axes to draw into, bar chart then text (default: a new full-width figure).
        metric: the divergence column.
        prompt_id: the response's prompt; default the one `example_response` picks.
        sample_id: the response's sample; required with `prompt_id`.
        threshold: tokens strictly above it are marked.
        max_tokens: tokens shown; a longer response is cut there (and says so).
        label_top: the largest values labelled above their bars.

    Raises:
        DivscopeError: the response is not in the table.

    >>> tokens = pl.DataFrame({"prompt_id": "p0", "sample_id": 0, "position": range(6),
    ...     "n_tokens": 6, "token": [" 9", " +", " 3", " =", " 12", "."],
    ...     "js": [0.0, 0.01, 0.3, 0.0, 0.2, 0.0]})
    >>> token_trajectory(tokens).axes[0].get_xlabel()
    'token position t in the response'
    """
    required = ["prompt_id", "sample_id", "position", "n_tokens", "token", metric]
    lazy = checked_lazy(tokens, required, what="token_trajectory")
    if prompt_id is None:
        prompt_id, sample_id = analyses.example_response(
            lazy, metric, threshold=threshold, max_tokens=max_tokens
        )
    elif sample_id is None:
        raise DivscopeError("token_trajectory: give sample_id together with prompt_id.")
    response = (
        lazy.filter((pl.col("prompt_id") == prompt_id) & (pl.col("sample_id") == sample_id))
        .select("position", "n_tokens", "token", metric)
        .pipe(collect)
        .sort("position")
    )
    if response.is_empty():
        raise DivscopeError(
            f"token_trajectory: no response prompt_id={prompt_id!r}, sample_id={sample_id} "
            "in the token table."
        )
    length = response["n_tokens"][0]
    shown = response.head(max_tokens)
    values = shown[metric].fill_null(0).to_numpy()
    high = values > threshold
    pieces = [_display_piece(token) for token in shown["token"]]
    if ax is None:
        lines = _wrap(pieces, _columns(DOUBLE_COLUMN - 0.4))
        text_height = max(len(lines), 2) * LINE_HEIGHT + 0.35
        figure, (bars, text) = panels(
            None,
            2,
            rows=2,
            width=DOUBLE_COLUMN,
            height=2.3 + text_height,
            gridspec_kw={"height_ratios": [2.3 - 0.6, text_height]},
        )
    else:
        figure, (bars, text) = panels(ax, 2)
        width = text.get_position().width * figure.get_figwidth()
        lines = _wrap(pieces, _columns(width))
    positions = shown["position"].to_numpy()
    symbol = metric_symbol(metric)
    bars.bar(positions, values, width=0.85, color=np.where(high, RL_COLOR, BLUE), linewidth=0)
    bars.axhline(threshold, color=GREY, linestyle="--", linewidth=0.8)
    for index in np.argsort(-values, kind="stable")[:label_top]:
        if values[index] <= threshold:
            break
        bars.annotate(
            pieces[index].strip() or "␣",
            (positions[index], values[index]),
            xytext=(0, 2),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=6.5,
        )
    bars.set_xlim(-0.8, positions[-1] + 0.8)
    bars.set_ylim(0, max(float(values.max()), threshold) * 1.25)
    bars.set_xlabel("token position t in the response")
    bars.set_ylabel(metric_label(metric))
    handles = [
        Patch(color=RL_COLOR, label=f"{symbol} > {threshold:g}"),
        Patch(color=BLUE, label=f"{symbol} ≤ {threshold:g}"),
        Line2D([], [], color=GREY, linestyle="--", linewidth=0.8, label="threshold"),
    ]
    bars.legend(handles=handles, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncols=3)
    cut = f"; first {max_tokens} of {count(length)} tokens shown" if length > max_tokens else ""
    bars.set_title(f"prompt {prompt_id}, sample {sample_id}{cut}", loc="left")
    _draw_text(text, lines, high)
    text.set_title(
        f"response text: the {int(high.sum())} tokens with {symbol} > {threshold:g} highlighted "
        "(↵ = newline)",
        loc="left",
    )
    return figure


FONT_SIZE = 7.0
"""Font size in points of the response text."""
CHAR_WIDTH = 0.6 * FONT_SIZE / 72
"""Width in inches of one monospace character (DejaVu Sans Mono advances 0.6 em)."""
LINE_HEIGHT = 1.8 * FONT_SIZE / 72
"""Height in inches of one line of response text."""
TOKEN_GAP = 0.35
"""Space in characters between two tokens of the response text."""


def _columns(width_inches: float) -> int:
    return max(20, int(width_inches / CHAR_WIDTH) - 1)


def _wrap(pieces: list[str], columns: int) -> list[list[tuple[float, str, int]]]:
    """Monospace lines of (column, piece, index of the piece), wrapping at token boundaries.

    Tokens are set `TOKEN_GAP` characters apart, so that boundaries show even between tokens
    that carry no spaces.
    """
    lines: list[list[tuple[float, str, int]]] = [[]]
    used = 0.0
    for index, piece in enumerate(pieces):
        if used + len(piece) > columns and lines[-1]:
            lines.append([])
            used = 0.0
            piece = piece.lstrip()
        lines[-1].append((used, piece, index))
        used += len(piece) + TOKEN_GAP
    return lines


def _draw_text(axes: Axes, lines: list[list[tuple[float, str, int]]], marked: np.ndarray) -> None:
    """Draw the wrapped response from the top left of `axes`, placed in inches so that the
    monospace columns line up at any size; marked pieces are bold on a yellow box."""
    axes.set_axis_off()
    inches = axes.figure.dpi_scale_trans
    for row, line in enumerate(lines):
        for column, piece, index in line:
            word = piece.lstrip()
            if not word:
                continue
            offset = (column + len(piece) - len(word)) * CHAR_WIDTH
            place = axes.transAxes + ScaledTranslation(offset, -(row + 0.5) * LINE_HEIGHT, inches)
            is_marked = bool(marked[index])
            box = {"facecolor": YELLOW, "edgecolor": "none", "pad": 0.8} if is_marked else None
            axes.text(
                0,
                1,
                word,
                transform=place,
                family="monospace",
                fontsize=FONT_SIZE,
                va="center",
                ha="left",
                bbox=box,
                fontweight="bold" if is_marked else "normal",
                in_layout=False,
            )
