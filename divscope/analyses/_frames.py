"""Small helpers shared by the analyses: input checking and exact top-share counts."""

from __future__ import annotations

import math
from collections.abc import Iterable

import polars as pl

from divscope.errors import DivscopeError
from divscope.schema import require_columns

Frame = pl.DataFrame | pl.LazyFrame

DEFAULT_PERCENTILES: tuple[float, ...] = (10, 25, 50, 75, 80, 90, 95, 98, 99, 99.9)
POSITION_KEY: tuple[str, ...] = ("prompt_id", "sample_id", "position")
"""The key of one token position of a token table."""


def checked_lazy(
    frame: Frame, required: Iterable[str], *, what: str, source: str = "token table"
) -> pl.LazyFrame:
    """`frame` as a LazyFrame, after checking that it has the `required` columns.

    Args:
        frame: the input table.
        required: the columns the caller needs.
        what: the caller's name, for the error message.
        source: what kind of table `frame` is, for the error message.
    """
    if not isinstance(frame, pl.DataFrame | pl.LazyFrame):
        raise DivscopeError(
            f"{what}: expected a polars DataFrame or LazyFrame, got {type(frame).__name__}."
        )
    lazy = frame.lazy()
    require_columns(lazy.collect_schema().names(), required, source=source, what=what)
    return lazy


def top_count(n: int, share: float) -> int:
    """Number of items in the top `share` of `n`: ceil(share · n), at least 1 when n > 0."""
    if not 0 < share <= 1:
        raise DivscopeError(f"top share must lie in (0, 1], got {share}.")
    # The small slack keeps 0.01 · 300 = 3.0000000000000004 from rounding up to 4.
    return min(n, max(1, math.ceil(share * n - 1e-9))) if n else 0


def percentile_label(q: float) -> str:
    """Column label of a percentile: 50 -> 'p50', 99.9 -> 'p99.9'."""
    return f"p{q:g}"


def as_float(value: object) -> float:
    """A polars scalar as a float: None (empty input) becomes NaN."""
    return math.nan if value is None else float(value)
