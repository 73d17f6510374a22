"""Word clouds: no two words overlap (short "x" and "2" beside long words), every word lies in its
panel, words that fit nowhere are counted, and the layout is deterministic."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from divscope import analyses, figures
from divscope.figures.gallery import PNG_DPI
from divscope.figures.tokens import MIN_FONT

SHORT = ["x", "2", "=", "a", "(", "1", "i", "-"]
LONG = ["alternatively", "substitute", "therefore", "verification", "consequently"]
COMMON = ["wait", "the", "so", "let", "we", "check", "but", "is", "hmm", "now", "then"]


def word_table(n_words: int, *, seed: int = 0) -> pl.DataFrame:
    """Tokens of `n_words` distinct words with Zipf-like counts, "wait" first and the short ones
    near the top, in both divergence groups (js 0.5 and 0)."""
    words = [COMMON[0], *SHORT, *COMMON[1:], *LONG]
    words += [f"word{i}" for i in range(n_words - len(words))]
    counts = np.maximum(1, (4000 / np.arange(1, n_words + 1) ** 1.1).astype(int))
    tokens = np.repeat([f" {w}" for w in words[:n_words]], counts)
    order = np.random.default_rng(seed).permutation(tokens.size)
    js = np.where(np.arange(tokens.size) % 2 == 0, 0.5, 0.0)
    return pl.DataFrame({"token": tokens[order], "js": js})


def drawn_boxes(figure: Figure, dpi: float) -> list[np.ndarray]:
    """Per panel, the (x0, x1, y0, y1) of every word as rendered at `dpi`, and the panel's box."""
    figure.set_dpi(dpi)
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    panels = []
    for axes in figure.axes:
        extents = [text.get_window_extent(renderer) for text in axes.texts]
        boxes = np.array([[b.x0, b.x1, b.y0, b.y1] for b in extents]).reshape(-1, 4)
        panel = axes.get_window_extent(renderer)
        panels.append((boxes, np.array([panel.x0, panel.x1, panel.y0, panel.y1])))
    return panels


def assert_disjoint(boxes: np.ndarray) -> None:
    x0, x1, y0, y1 = (boxes[:, i] for i in range(4))
    overlap = (
        (x0[:, None] < x1[None, :])
        & (x0[None, :] < x1[:, None])
        & (y0[:, None] < y1[None, :])
        & (y0[None, :] < y1[:, None])
    )
    np.fill_diagonal(overlap, False)
    pairs = np.argwhere(np.triu(overlap))
    assert pairs.size == 0, f"{len(pairs)} pairs of words overlap, e.g. boxes {boxes[pairs[0]]}"


@pytest.mark.parametrize("dpi", [100, PNG_DPI])
def test_no_two_words_overlap_and_all_lie_in_their_panel(dpi):
    frame = word_table(80)
    figure = figures.wordclouds(frame, top=80)
    panels = drawn_boxes(figure, dpi)
    for (boxes, panel), axes in zip(panels, figure.axes, strict=True):
        words = [text.get_text() for text in axes.texts]
        assert {"x", "2", "wait", "alternatively"} <= set(words)
        assert len(boxes) > 40
        assert_disjoint(boxes)
        x0, x1, y0, y1 = panel
        slack = 1.0  # a pixel of rounding
        assert (boxes[:, 0] >= x0 - slack).all() and (boxes[:, 1] <= x1 + slack).all()
        assert (boxes[:, 2] >= y0 - slack).all() and (boxes[:, 3] <= y1 + slack).all()


def test_the_overlap_check_would_see_a_word_inside_another():
    # The check itself: "x" drawn in the middle of "wait" is caught.
    figure = Figure(figsize=(3, 2))
    axes = figure.add_subplot()
    axes.text(0.5, 0.5, "wait", fontsize=40, ha="center", va="center")
    axes.text(0.5, 0.5, "x", fontsize=8, ha="center", va="center")
    ((boxes, _),) = drawn_boxes(figure, 100)
    with pytest.raises(AssertionError, match="1 pairs of words overlap"):
        assert_disjoint(boxes)


def test_sizes_follow_frequency_and_the_layout_is_deterministic():
    frame = word_table(40)
    first, second = figures.wordclouds(frame, top=40), figures.wordclouds(frame, top=40)
    expected = analyses.word_frequencies(frame, top=40).filter(group="high")
    texts = first.axes[0].texts
    assert [t.get_text() for t in texts] == expected["word"].to_list()  # most frequent first
    sizes = [t.get_fontsize() for t in texts]
    assert sizes[0] == max(sizes) and min(sizes) >= MIN_FONT
    assert sizes == sorted(sizes, reverse=True)  # no word had to shrink below a rarer one
    for a, b in zip(drawn_boxes(first, 100), drawn_boxes(second, 100), strict=True):
        assert np.array_equal(a[0], b[0])


def test_words_that_fit_nowhere_are_dropped_and_counted():
    frame = word_table(150)
    figure = figures.wordclouds(frame, top=150)
    for axes, (boxes, _) in zip(figure.axes, drawn_boxes(figure, 100), strict=True):
        n_drawn = len(axes.texts)
        assert 50 < n_drawn < 150
        note = f"150 most frequent words\n{150 - n_drawn} rarer did not fit"
        assert axes.get_title(loc="right") == note
        assert_disjoint(boxes)
