"""Seeded samples of rows, for figures that draw at most so many points and say so.

Every function takes a `seed` and reports how many rows qualified, so that a figure can say
that it shows a sample and of how many. A sample is uniform without replacement and its
memory is bounded by its size, not the table's: each row's number is hashed with the seed and
the rows of the `max_rows` smallest hashes are kept (a bottom-k sketch, which the streaming
engine computes in one pass), so a LazyFrame over a table of any size and the same table in
memory give the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from divscope.analyses._frames import Frame, checked_lazy
from divscope.analyses._streaming import collect
from divscope.errors import DivscopeError

_ROW = "__divscope_row"
"""The row-number column a sample is drawn by (dropped from what it returns)."""


@dataclass(frozen=True)
class Sample:
    """A seeded random sample of rows, and how many rows it was drawn from."""

    rows: pl.DataFrame
    """The sampled rows (all rows when there are at most `max_rows`)."""
    n_total: int
    """Rows that qualified before sampling."""
    seed: int
    """Seed of the sample."""

    @property
    def sampled(self) -> bool:
        """Whether `rows` is a strict subset of the qualifying rows."""
        return self.rows.height < self.n_total


def sample_rows(lazy: pl.LazyFrame, *, max_rows: int, seed: int) -> Sample:
    """At most `max_rows` rows of `lazy`, drawn uniformly without replacement with a fixed
    seed, in the table's order; memory bounded by `max_rows` (see the module's docstring).

    >>> sample_rows(pl.LazyFrame({"x": range(10)}), max_rows=3, seed=0).rows.height
    3
    """
    if max_rows < 1:
        raise DivscopeError(f"sample_rows: max_rows must be >= 1, got {max_rows}.")
    numbered = lazy.with_row_index(_ROW)
    kept = numbered.bottom_k(max_rows, by=[pl.col(_ROW).hash(seed), _ROW]).sort(_ROW)
    n_total = collect(lazy.select(pl.len())).item()
    return Sample(rows=collect(kept.drop(_ROW)), n_total=n_total, seed=seed)


def high_divergence_sample(
    tokens: Frame,
    columns: Sequence[str],
    metric: str = "js",
    *,
    threshold: float = 0.1,
    max_rows: int = 20_000,
    seed: int = 0,
) -> Sample:
    """A seeded sample of `columns` at positions whose metric is strictly above `threshold`.

    >>> frame = pl.DataFrame({"js": [0.0, 0.5, 0.7], "p_top1_rl": [0.9, 0.8, 0.6]})
    >>> high_divergence_sample(frame, ["p_top1_rl"]).n_total
    2
    """
    lazy = checked_lazy(tokens, [metric, *columns], what="high_divergence_sample")
    selected = lazy.filter(pl.col(metric) > threshold).select(columns).drop_nulls()
    return sample_rows(selected, max_rows=max_rows, seed=seed)
