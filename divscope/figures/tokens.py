"""Which words diverge: word clouds of high- and low-divergence tokens (Fig. 5).

The clouds are laid out here rather than by an image library: every word is a text artist whose
extent the renderer measures, placed along a spiral from the centre where its box overlaps no
other word's box, so that no word sits inside another ("x" in the bowl of "wait") and the words
stay text in PDF and SVG.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.transforms import ScaledTranslation

from divscope import analyses
from divscope.analyses._frames import Frame
from divscope.figures.style import (
    DOUBLE_COLUMN,
    GREY,
    MODEL_COLORS,
    RL_COLOR,
    figure_function,
    header_note,
    metric_symbol,
    panels,
)

MAX_FONT = 36.0
"""Font size in points of the most frequent word, unless the cloud must be smaller to fit."""
MIN_FONT = 5.0
"""Smallest font size in points: rarer words are drawn at it, and words that fit nowhere even at
it are left out (and counted in the panel's note)."""
SHRINK = 0.85
"""Factor a word's font size is multiplied by when it fits nowhere at its size."""
FILL = 0.5
"""Share of the panel's area the words' boxes may cover at their nominal sizes."""
GAP = 0.02
"""Space in inches kept between two words' boxes and between a box and the panel's edge, plus
`GAP_EM` of the word's font size."""
GAP_EM = 0.15
"""Share of a word's font size added to `GAP` around it, so that large words stand apart."""
SPIRAL_STEP = 0.02
"""Distance in inches between two candidate centres along the spiral (and between its turns)."""


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

    A word's area is proportional to its frequency within its group (its font size to the square
    root, at least `MIN_FONT`); the whole cloud is scaled down when the words would not fit.
    Words are placed most frequent first, each at the first point of a spiral from the centre
    where its text box overlaps no other's; a word that fits nowhere is shrunk, and dropped below
    `MIN_FONT` (the panel says how many). The layout is deterministic.

    Args:
        tokens: a token table.
        ax: two axes to draw into, high then low (default: a new full-width figure).
        metric: the divergence column.
        high: the high group is metric > high (on the JS scale in the paper).
        low: the low group is metric < low (on the JS scale in the paper).
        top: words per cloud.

    >>> tokens = pl.DataFrame({"token": [" wait", " so", " the", " x"] * 50,
    ...                        "js": np.random.default_rng(0).exponential(0.05, 200)})
    >>> len(wordclouds(tokens).axes)  # high- and low-divergence words
    2
    """
    frequencies = analyses.word_frequencies(tokens, metric, high=high, low=low, top=top)
    figure, axes = panels(ax, 2, width=DOUBLE_COLUMN, height=2.0)
    symbol = metric_symbol(metric)
    groups = {
        "high": (f"(a) high divergence, {symbol} > {high:g}", RL_COLOR),
        "low": (f"(b) low divergence, {symbol} < {low:g}", MODEL_COLORS["base"]),
    }
    for panel, (group, (title, _)) in zip(axes, groups.items(), strict=True):
        panel.set_axis_off()
        panel.set_title(title, loc="left")
        n_words = frequencies.filter(pl.col("group") == group).height
        # Two lines from the start, so that the layout does not change once the count is known.
        header_note(panel, f"{n_words} most frequent words\nsized by frequency")
    if ax is None:
        # The panels' final size, which the words are fitted into (the words, left out of the
        # layout, do not change it again).
        figure.get_layout_engine().execute(figure)
    for panel, (group, (_, color)) in zip(axes, groups.items(), strict=True):
        words = frequencies.filter(pl.col("group") == group)
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
        cloud = layout_words(panel, words["word"].to_list(), words["count"].to_list(), color=color)
        if cloud.n_dropped:
            header_note(
                panel, f"{words.height} most frequent words\n{cloud.n_dropped} rarer did not fit"
            )
    return figure


@dataclass(frozen=True)
class Cloud:
    """The words `layout_words` drew."""

    texts: list[Text]
    """The text artists placed, most frequent word first."""
    n_dropped: int
    """Words that fit nowhere even at `MIN_FONT`."""


def layout_words(panel: Axes, words: Sequence[str], counts: Sequence[int], *, color: str) -> Cloud:
    """Place `words` in `panel` so that no two text boxes overlap or leave the panel.

    Font sizes are proportional to the square root of `counts`, so that a word's area is
    proportional to its count (at least `MIN_FONT`), scaled so that the boxes cover at most
    `FILL` of the panel and the largest word is at most `MAX_FONT` points and fits the panel's
    width. Words are placed in the given order (most frequent first): each at the first candidate
    of an Archimedean spiral from the panel's centre, stretched to the panel's aspect, where its
    box, measured by the renderer and padded by `GAP` and `GAP_EM`, overlaps no placed box and
    lies inside the panel; where there is none the word is shrunk by `SHRINK`, and dropped once
    below `MIN_FONT`. Positions are offsets in inches from the panel's centre, so the cloud keeps
    its shape (and stays overlap-free) when the panel later moves or the figure is saved at
    another resolution.

    Args:
        panel: the axes to draw into (its current size is the room).
        words: the words, most frequent first.
        counts: each word's count.
        color: colour of the words.

    Returns:
        A `Cloud`: the text artists drawn and the number of words left out.
    """
    figure = panel.figure
    renderer = RendererAgg(1, 1, figure.dpi)
    box = panel.get_window_extent()
    width = box.width / figure.dpi - 2 * GAP
    height = box.height / figure.dpi - 2 * GAP
    centre = panel.transAxes
    texts = [
        panel.text(
            0.5, 0.5, word, ha="center", va="center", color=color, parse_math=False,
            in_layout=False, clip_on=False,
        )
        for word in words
    ]  # fmt: skip

    def extent(text: Text, size: float) -> tuple[float, float]:
        """Width and height in inches of `text` at `size` points."""
        text.set_fontsize(size)
        bbox = text.get_window_extent(renderer)
        return bbox.width / figure.dpi, bbox.height / figure.dpi

    weights = np.sqrt(np.asarray(counts, dtype=np.float64) / max(counts))
    unit = np.array([extent(text, 10.0) for text in texts]) / 10  # inches per point of size
    area = float((unit[:, 0] * unit[:, 1] * np.maximum(weights, MIN_FONT / MAX_FONT) ** 2).sum())
    largest = min(MAX_FONT, np.sqrt(FILL * width * height / area), 0.95 * width / unit[0, 0])
    candidates = _spiral(width, height)
    placed = np.empty((0, 4))  # x0, x1, y0, y1 of each placed box, padded
    # Half sizes of boxes that fit nowhere: as boxes are only added, no box at least as wide and
    # as tall can fit later either.
    failed: list[tuple[float, float]] = []
    kept: list[Text] = []
    for text, weight in zip(texts, weights, strict=True):
        size = max(MIN_FONT, largest * weight)
        while size >= MIN_FONT:
            pad = GAP + GAP_EM * size / 72
            half_w, half_h = (np.array(extent(text, size)) + pad) / 2
            at = None
            if not any(half_w >= w and half_h >= h for w, h in failed):
                at = _first_free(candidates, placed, half_w, half_h, width / 2, height / 2)
            if at is None:
                failed.append((half_w, half_h))
            else:
                x, y = candidates[at]
                text.set_transform(centre + ScaledTranslation(x, y, figure.dpi_scale_trans))
                placed = np.vstack([placed, [x - half_w, x + half_w, y - half_h, y + half_h]])
                kept.append(text)
                break
            size *= SHRINK
        else:
            text.remove()
    return Cloud(texts=kept, n_dropped=len(texts) - len(kept))


def _spiral(width: float, height: float) -> np.ndarray:
    """Candidate centres (inches from the centre) along an Archimedean spiral stretched to the
    width/height aspect, `SPIRAL_STEP` apart, out to the corners."""
    aspect = width / height
    # r = b·θ with turns SPIRAL_STEP apart (in the squeezed coordinate), points SPIRAL_STEP apart
    # along the curve: θ_n ≈ sqrt(2·n·SPIRAL_STEP / b).
    b = SPIRAL_STEP / (2 * np.pi)
    reach = np.hypot(width / aspect, height) / 2
    n = int((reach / b) ** 2 * b / (2 * SPIRAL_STEP)) + 1
    theta = np.sqrt(2 * np.arange(n) * SPIRAL_STEP / b)
    radius = b * theta
    return np.column_stack([radius * np.cos(theta) * aspect, radius * np.sin(theta)])


def _first_free(
    candidates: np.ndarray,
    placed: np.ndarray,
    half_w: float,
    half_h: float,
    room_w: float,
    room_h: float,
) -> int | None:
    """Index of the first candidate centre where a box of the given half sizes lies within
    ±room and overlaps no placed box; None when there is none."""
    x, y = candidates[:, 0], candidates[:, 1]
    free = np.flatnonzero((np.abs(x) + half_w <= room_w) & (np.abs(y) + half_h <= room_h))
    if placed.size and free.size:
        x, y = x[free, None], y[free, None]
        x0, x1, y0, y1 = placed.T
        hits = (x - half_w < x1) & (x + half_w > x0) & (y - half_h < y1) & (y + half_h > y0)
        free = free[~hits.any(axis=1)]
    return int(free[0]) if free.size else None
