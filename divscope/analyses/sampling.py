"""Seeded samples of rows, for figures that draw at most so many points and say so.

Every function takes a `seed` and reports how many rows qualified, so that a figure can say
that it shows a sample and of how many.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from divscope.analyses._frames import Frame, checked_lazy
from divscope.analyses._streaming import collect
from divscope.errors import DivscopeError


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
    """At most `max_rows` rows of `lazy`, drawn without replacement with a fixed seed.

    A bottom-k sample: each row's index is hashed with the seed, and the `max_rows` rows of
    smallest hash are kept, in their order in `lazy`. Out of core (a count, then polars'
    streaming bottom-k, which holds `max_rows` rows), and the same rows whether `lazy` is a
    DataFrame's or a scan of the same rows in parts.

    >>> sample_rows(pl.LazyFrame({"x": range(10)}), max_rows=3, seed=0).rows.height
    3
    """
    if max_rows < 1:
        raise DivscopeError(f"sample_rows: max_rows must be >= 1, got {max_rows}.")
    n_total = collect(lazy.select(pl.len())).item()
    if n_total > max_rows:
        row, key = "_sample_row", "_sample_key"
        lazy = (
            lazy.with_row_index(row)
            .with_columns(pl.col(row).hash(seed).alias(key))
            .bottom_k(max_rows, by=[key, row])
            .sort(row)
            .drop(row, key)
        )
    return Sample(rows=collect(lazy), n_total=n_total, seed=seed)


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
