"""The figures drawn from a lazily scanned table of parts are those drawn from it in memory.

`divscope plot` and `divscope report` hand the figures a LazyFrame over the token table's parts
(never the table in memory); a library user hands them a DataFrame. On the lab's token table,
written as parts that cut responses in two, every token-table figure holds the same data both
ways: the same lines, points, bars and texts (floats within 1e-9 relative), the samples of the
KDEs and of the tail-promotion scatter included (they are drawn by hashed row numbers, the
same in memory and streamed).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
from matplotlib.collections import Collection
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from divscope.figures.gallery import FIGURES, PlotInputs, drawn_figures
from divscope.io import read_token_table, scan_token_table
from divscope.params import Recovery

TOKEN_FIGURES = [name for name, spec in FIGURES.items() if spec.needs == "tokens"]


def write_parts(table: Path, directory: Path, n_parts: int = 3) -> Path:
    """The token table `table` as `n_parts` part files of about equal rows in `directory`,
    cutting responses in two, each with the table's metadata (models, sources)."""
    directory.mkdir()
    whole = pq.read_table(table)
    size = -(-whole.num_rows // n_parts)
    for i in range(n_parts):
        pq.write_table(whole.slice(i * size, size), directory / f"part-{i:05d}.parquet")
    return directory


def fingerprint(figure: Figure) -> list:
    """What a figure shows: per axes its lines' data, collections' offsets and paths, bars,
    and every text of the figure (titles, labels, ticks, notes, legends, the words of a word
    cloud) with where it stands."""
    shown: list = []
    for axes in figure.axes:
        shown += [("line", line.get_xydata()) for line in axes.get_lines()]
        for collection in axes.findobj(Collection):
            shown.append(("offsets", np.asarray(collection.get_offsets())))
            shown += [("path", path.vertices) for path in collection.get_paths()]
        shown += [
            ("bar", np.array([p.get_x(), p.get_y(), p.get_width(), p.get_height()]))
            for p in axes.patches
            if isinstance(p, Rectangle)
        ]
    texts = [t for t in figure.findobj(Text) if t.get_text()]
    shown.append(("texts", [t.get_text() for t in texts]))
    places = [t.get_transform().transform(t.get_position()) for t in texts]
    return [*shown, ("places", np.array(places, dtype=float))]


def assert_same(left: list, right: list, name: str) -> None:
    assert len(left) == len(right), name
    for (kind, a), (other, b) in zip(left, right, strict=True):
        assert kind == other, name
        if kind == "texts":
            assert a == b, name
        else:
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=0, equal_nan=True, err_msg=name)


@pytest.fixture(scope="module")
def lab(lab_head_tokens_path, tmp_path_factory):
    parts = write_parts(lab_head_tokens_path, tmp_path_factory.mktemp("lab") / "parts")
    return read_token_table(lab_head_tokens_path), scan_token_table(parts)


def test_every_token_figure_is_the_same_from_parts_scanned_lazily(lab):
    frame, lazy = lab
    assert isinstance(lazy, pl.LazyFrame)
    # Small samples, so that the KDEs and the scatter draw one (the lab head has 731 tokens).
    options = {"recovery": Recovery(n_boot=50), "max_samples": 60, "max_points": 20}
    in_memory = drawn_figures(PlotInputs(frame, **options), TOKEN_FIGURES)
    streamed = drawn_figures(PlotInputs(lazy, **options), TOKEN_FIGURES)
    drawn = []
    for (name, figure, reason), (same, other, why) in zip(in_memory, streamed, strict=True):
        assert (name, reason) == (same, why)
        if figure is not None:
            assert_same(fingerprint(figure), fingerprint(other), name)
            drawn.append(name)
    assert drawn == TOKEN_FIGURES
