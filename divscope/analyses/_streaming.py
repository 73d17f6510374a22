"""Exact order statistics of a column that need not fit in memory, and the analyses' memory cap.

The analyses scan a token table lazily (one Parquet file or a directory of parts) with polars'
streaming engine and collect only aggregates. What needs the sorted order of a column
(percentiles, the ⌈share·n⌉ largest, the Lorenz curve) is computed exactly, out of core:

1. a histogram pass counts the values in buckets (logarithmic in |x| first, then linear inside
   a bucket), with each bucket's minimum and maximum;
2. the bucket holding a wanted order statistic is refined by another histogram pass while it
   holds more than `value_limit()` values; once it holds fewer (or a single repeated value), a
   pass collects only the values inside it and sorts them in memory.

Buckets are contiguous ranges of values (every bucket function used is non-decreasing in the
value, which is checked from the buckets' minima and maxima before it is relied on), so the
counts below a bucket are exact ranks and the result equals a full sort's. A typical column
needs two or three passes; memory holds one histogram and at most `value_limit()` values.

Nulls are dropped. NaN, which polars sorts above every number, ranks above +inf in
`order_statistics` and `sorted_blocks`; `exact_quantiles` follows `np.quantile` (a NaN makes
every quantile NaN) and `grouped_quantiles` follows polars' `quantile` (NaN as the largest
value).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from divscope.errors import DivscopeError

DEFAULT_VALUE_LIMIT = 1 << 24
"""Values one refinement pass may collect without a memory cap (128 MiB as float64)."""
BYTES_PER_VALUE = 64
"""Memory one collected value may cost at its peak: the frame, NumPy's copy and its sort."""
MIN_VALUE_LIMIT = 1 << 16
"""Values collected at once under any cap: below this a pass costs more than it saves."""
BUCKETS = 4096
"""Linear buckets of one refinement pass."""
_LOG_BUCKETS_PER_OCTAVE = 16
_NAN_BUCKET = 1 << 40
_G, _V, _B = "_g", "_v", "_b"

_value_limit = DEFAULT_VALUE_LIMIT


def value_limit() -> int:
    """Values one refinement pass may collect (and sort) at once, under the current cap.

    >>> value_limit() == DEFAULT_VALUE_LIMIT
    True
    """
    return _value_limit


@contextmanager
def memory_cap(max_memory: int | None) -> Iterator[None]:
    """Bound what the analyses hold at once by `max_memory` bytes while the block runs.

    The cap sets how many values a refinement pass collects (`value_limit`: max_memory / 64,
    at least 65,536) and polars' streaming chunk size, so that a pass's peak stays a small part
    of the cap; the histograms and per-response aggregates come on top. None keeps the
    defaults (16.8 M values, polars' own chunk size).

    Args:
        max_memory: bytes, or None.

    >>> with memory_cap(64 << 20):
    ...     value_limit()
    1048576
    """
    global _value_limit
    if max_memory is not None and max_memory <= 0:
        raise DivscopeError(f"max memory must be positive, got {max_memory} bytes.")
    previous = _value_limit
    if max_memory is None:
        yield
        return
    _value_limit = max(MIN_VALUE_LIMIT, max_memory // BYTES_PER_VALUE)
    # Rows per streaming chunk: a few MiB of a wide table at most.
    chunk = int(min(100_000, max(1_000, max_memory // 16_384)))
    try:
        with pl.Config(streaming_chunk_size=chunk):
            yield
    finally:
        _value_limit = previous


def collect(lazy: pl.LazyFrame) -> pl.DataFrame:
    """`lazy` collected with polars' streaming engine (under `memory_cap`'s chunk size).

    >>> collect(pl.LazyFrame({"a": [1, 2]}).select(pl.col("a").sum())).item()
    3
    """
    return lazy.collect(engine="streaming")


def _values(lazy: pl.LazyFrame, column: str, by: str | None) -> pl.LazyFrame:
    """Columns `_g` (the group, or 0) and `_v` (the value as float64), no nulls."""
    group = pl.col(by) if by is not None else pl.lit(0, dtype=pl.Int64)
    value = pl.col(column).cast(pl.Float64)
    return lazy.select(group.alias(_G), value.alias(_V)).drop_nulls()


def _log_bucket() -> pl.Expr:
    """A non-decreasing bucket of the value: sign and 1/16 octave of |x| (0 for 0); NaN last.

    Plain arithmetic, no branches: sign(x) · (20001 + clip(⌊16 log2 |x|⌋, ±20000))."""
    v = pl.col(_V)
    octave = (v.abs().log(2) * _LOG_BUCKETS_PER_OCTAVE).floor().clip(-20_000, 20_000)
    return (v.sign() * (octave + 20_001)).fill_nan(float(_NAN_BUCKET)).cast(pl.Int64)


def _linear_bucket(lo: float, hi: float) -> pl.Expr:
    """A non-decreasing bucket 0..BUCKETS-1 of the values in [lo, hi]."""
    v = pl.col(_V)
    width = hi - lo
    scaled = (v - lo) / width if math.isfinite(width) else (v / 2 - lo / 2) / (hi / 2 - lo / 2)
    return (scaled * BUCKETS).floor().clip(0, BUCKETS - 1).cast(pl.Int64)


@dataclass
class _Slot:
    """A contiguous range [lo, hi] of one group's values: `below` values lie under it, `count`
    inside; `ranks` are the group's wanted 0-based ranks that fall inside."""

    group: Hashable
    lo: float
    hi: float
    below: int
    count: int
    ranks: list[int] = field(default_factory=list)
    whole: bool = False
    """The slot holds every number of its group (no NaN)."""

    def holds(self) -> pl.Expr:
        inside = pl.col(_V).is_between(self.lo, self.hi)
        if math.isnan(self.lo):
            inside = pl.col(_V).is_nan()
        return (pl.col(_G) == self.group) & inside


def _histogram(values: pl.LazyFrame, slots: Sequence[_Slot] | None) -> pl.DataFrame:
    """Per group (or slot) and bucket: count, min and max. `slots` None: the log buckets."""
    if slots is None:
        keyed = values.with_columns(_log_bucket().alias(_B))
        key = _G
    else:
        slot_of = pl.when(slots[0].holds()).then(0)
        bucket = pl.when(slots[0].holds()).then(_linear_bucket(slots[0].lo, slots[0].hi))
        for i, slot in enumerate(slots[1:], start=1):
            slot_of = slot_of.when(slot.holds()).then(i)
            bucket = bucket.when(slot.holds()).then(_linear_bucket(slot.lo, slot.hi))
        keyed = values.with_columns(slot_of.alias("_s"), bucket.alias(_B)).drop_nulls("_s")
        key = "_s"
    return collect(
        keyed.group_by(key, _B).agg(
            pl.len().alias("n"), pl.col(_V).min().alias("lo"), pl.col(_V).max().alias("hi")
        )
    ).sort(key, _B)


def _split(parent: _Slot, buckets: pl.DataFrame) -> list[_Slot] | None:
    """`parent` cut along its buckets (sorted); None when the buckets are not ordered ranges."""
    lows, highs, counts = (buckets[c].to_list() for c in ("lo", "hi", "n"))
    for high, low in zip(highs, lows[1:], strict=False):
        # NaN's bucket is last; otherwise ranges must not overlap.
        if not (high < low or math.isnan(low)):
            return None
    slots, below = [], parent.below
    for low, high, count in zip(lows, highs, counts, strict=True):
        inside = [r for r in parent.ranks if below <= r < below + count]
        slots.append(_Slot(parent.group, low, high, below, count, inside))
        below += count
    return slots


def _refine(values: pl.LazyFrame, slots: list[_Slot], keep) -> list[_Slot]:
    """Split every slot in `slots` once more along linear buckets; keep(slot) filters."""
    table = _histogram(values, slots)
    out = []
    for i, slot in enumerate(slots):
        parts = _split(slot, table.filter(pl.col("_s") == i))
        if parts is None or len(parts) == 1:
            # Cannot happen with lo < hi: lo and hi fall in different linear buckets.
            raise AssertionError(f"refinement made no progress on [{slot.lo}, {slot.hi}]")
        out.extend(p for p in parts if keep(p))
    return out


def _first_slots(values: pl.LazyFrame, *, grouped: bool) -> dict[Hashable, list[_Slot]]:
    """Per group, its values as slots (ranks empty): one slot [min, max] of the numbers (and
    one of the NaN); a group of more than `value_limit()` numbers cut along its log buckets,
    unless they overlap.

    Ungrouped, one pass of plain aggregations gives the count, NaN count, min and max; the log
    histogram follows when the numbers do not fit. Grouped, the log histogram per group and
    bucket gives all of it in one pass (polars' streaming group-by holds only its groups
    there, where a group-by on the group alone with these aggregations held the column)."""
    v = pl.col(_V)
    limit = value_limit()
    if not grouped:
        # Polars' min and max skip NaN.
        aggregates = [v.is_nan().sum().alias("nan"), v.min().alias("lo"), v.max().alias("hi")]
        n, nan, lo, hi = collect(values.select(pl.len().alias("n"), *aggregates)).row(0)
        table = None
        if n - nan > limit:
            table = _histogram(values.filter(v.is_not_nan()), None)
        stats = {0: (n, nan, lo, hi, table)} if n else {}
    else:
        histogram = _histogram(values, None)
        stats = {}
        for part in histogram.partition_by(_G, maintain_order=True):
            numbers = part.filter(pl.col(_B) != _NAN_BUCKET)
            n, nan = int(part["n"].sum()), int(part["n"].sum() - numbers["n"].sum())
            lo, hi = numbers["lo"].min(), numbers["hi"].max()
            stats[part[_G][0]] = (n, nan, lo, hi, numbers)
    slots: dict[Hashable, list[_Slot]] = {}
    for group, (n, nan, lo, hi, table) in stats.items():
        finite = int(n) - int(nan)
        slots[group] = [_Slot(group, lo, hi, 0, finite, whole=True)] if finite else []
        if finite > limit and table is not None:
            split = _split(slots[group][0], table)
            if split is not None:
                slots[group][:1] = split
        if nan:
            slots[group].append(_Slot(group, math.nan, math.nan, finite, int(nan)))
    return slots


def _group_counts(slots: dict[Hashable, list[_Slot]]) -> dict[Hashable, tuple[int, int]]:
    """Per group: (values, NaN values)."""
    counts = {}
    for group, parts in slots.items():
        nan = sum(s.count for s in parts if math.isnan(s.lo))
        counts[group] = (sum(s.count for s in parts), nan)
    return counts


def _select(
    values: pl.LazyFrame, slots: dict[Hashable, list[_Slot]], wanted: dict[Hashable, set[int]]
) -> dict[tuple[Hashable, int], float]:
    """The values at the wanted 0-based ascending ranks of each group."""
    pending = []
    for group, ranks in wanted.items():
        for slot in slots.get(group, []):
            slot.ranks = sorted(r for r in ranks if slot.below <= r < slot.below + slot.count)
            if slot.ranks:
                pending.append(slot)
    found: dict[tuple[Hashable, int], float] = {}
    limit = value_limit()
    while pending:
        big = []
        batch: list[_Slot] = []
        size = 0
        for slot in pending:
            if slot.lo == slot.hi or math.isnan(slot.lo):
                found.update({(slot.group, r): slot.lo + 0.0 for r in slot.ranks})
            elif slot.count > limit:
                big.append(slot)
            else:
                if size + slot.count > limit:
                    _collect_ranks(values, batch, found)
                    batch, size = [], 0
                batch.append(slot)
                size += slot.count
        if batch:
            _collect_ranks(values, batch, found)
        pending = _refine(values, big, lambda s: bool(s.ranks)) if big else []
    return found


def _collect_ranks(
    values: pl.LazyFrame, batch: list[_Slot], found: dict[tuple[Hashable, int], float]
) -> None:
    """Collect the values of the slots in `batch` (one pass) and read their ranks."""
    if all(slot.whole for slot in batch):  # whole groups: no range to test
        groups = pl.Series([slot.group for slot in batch])
        inside = pl.col(_G).is_in(groups.implode()) & pl.col(_V).is_not_nan()
    else:
        inside = pl.any_horizontal([slot.holds() for slot in batch])
    rows = collect(values.filter(inside)).partition_by(_G, as_dict=True)
    for slot in batch:
        picked = rows[(slot.group,)][_V].to_numpy()
        if not slot.whole:
            picked = picked[(picked >= slot.lo) & (picked <= slot.hi)]
        local = [r - slot.below for r in slot.ranks]
        # np.partition puts each wanted rank where a full sort would.
        ordered = np.partition(picked, local)
        for r, k in zip(slot.ranks, local, strict=True):
            found[(slot.group, r)] = float(ordered[k]) + 0.0


def _ranked(
    values: pl.LazyFrame,
    wanted: Callable[[dict[Hashable, tuple[int, int]]], dict[Hashable, set[int]]],
    *,
    grouped: bool,
) -> tuple[dict[Hashable, tuple[int, int]], dict[tuple[Hashable, int], float]]:
    """Per group (values, NaN values), and the values at the ranks `wanted(counts)` asks for.

    Values that fit (at most `value_limit()`) come in one pass and are ranked in memory
    (`np.partition`); more take the histogram passes (`_first_slots`, `_select`). A rank at or
    above a group's count of numbers is NaN (NaN ranks last)."""
    limit = value_limit()
    rows = collect(values.head(limit + 1))
    if rows.height > limit:
        del rows
        slots = _first_slots(values, grouped=grouped)
        counts = _group_counts(slots)
        return counts, _select(values, slots, wanted(counts))
    everything = rows[_V].to_numpy()
    parts = {0: everything} if len(rows) else {}
    if grouped:
        keys = rows[_G].to_numpy()
        parts = {g: everything[keys == g] for g in rows[_G].unique().to_list()}
    numbers, counts = {}, {}
    for group, array in parts.items():
        nan = np.isnan(array)
        numbers[group] = array[~nan] if nan.any() else array
        counts[group] = (array.size, int(nan.sum()))
    found = {}
    for group, ranks in wanted(counts).items():
        array = numbers[group]
        inside = sorted(r for r in ranks if r < array.size)
        ordered = np.partition(array, inside) if inside else array
        # Adding 0.0 reads -0.0 as 0.0: equal values are one value.
        found.update(
            {(group, r): float(ordered[r]) + 0.0 if r < array.size else math.nan for r in ranks}
        )
    return counts, found


def order_statistics(
    lazy: pl.LazyFrame, column: str, ranks: Sequence[int], *, descending: bool = False
) -> list[float]:
    """The exact values at 0-based `ranks` of `column` sorted ascending (or descending).

    Rank k descending is the (k+1)-th largest value: with ties, the same value a full sort
    gives, whichever tied row holds it. Selecting "the ⌈share·n⌉ largest" rows needs, beside
    this threshold value, a rule for the rows tied at it: `top_rows`.

    Args:
        lazy: the table.
        column: a numeric column; nulls are dropped, NaN ranks above +inf (polars' order).
        ranks: 0-based ranks, each in [0, n) for the n non-null values.
        descending: rank from the largest.

    Returns:
        One value per rank, in order.

    Raises:
        DivscopeError: a rank outside [0, n).

    >>> frame = pl.LazyFrame({"x": [3.0, None, 1.0, 2.0, 2.0]})
    >>> order_statistics(frame, "x", [0, 1, 3]), order_statistics(frame, "x", [0], descending=True)
    ([1.0, 2.0, 3.0], [3.0])
    """
    n = 0

    def wanted(counts: dict[Hashable, tuple[int, int]]) -> dict[Hashable, set[int]]:
        nonlocal n
        n = counts.get(0, (0, 0))[0]
        bad = [r for r in ranks if not 0 <= r < n]
        if bad:
            raise DivscopeError(
                f"order_statistics: rank {bad[0]} of column {column!r} is outside [0, {n}) "
                f"({n} non-null values)."
            )
        return {0: {n - 1 - r if descending else r for r in ranks}}

    _, found = _ranked(_values(lazy, column, None), wanted, grouped=False)
    return [found[(0, n - 1 - r if descending else r)] for r in ranks]


def top_rows(lazy: pl.LazyFrame, column: str, count: int) -> pl.LazyFrame:
    """The `count` rows of `lazy` with the largest `column`, lazily, in bounded memory.

    The rows above the `count`-th largest value (`order_statistics`), and of the rows tied at
    that value the first ones in the table's order, as many as complete `count`: a
    deterministic rule (polars' in-memory `top_k_by` leaves the choice among ties to its
    partial sort). Rows with a null `column` never count.

    Args:
        lazy: the table.
        column: a numeric column.
        count: rows to keep, in [0, n] for the n non-null values.

    Returns:
        The rows, in the table's order, with `lazy`'s columns.

    >>> frame = pl.LazyFrame({"id": [0, 1, 2, 3, 4], "x": [1.0, 2.0, None, 2.0, 3.0]})
    >>> top_rows(frame, "x", 2).collect()["id"].to_list()
    [1, 4]
    """
    present = lazy.filter(pl.col(column).is_not_null())
    if count <= 0:
        return present.head(0)
    (threshold,) = order_statistics(present, column, [count - 1], descending=True)
    value = pl.col(column)
    counts = present.select((value > threshold).sum().alias("a"), (value == threshold).sum())
    above, tied = collect(counts).row(0)
    if above + tied == count:  # every tied row belongs: no row order needed
        return present.filter(value >= threshold)
    indexed = present.with_row_index("_row")
    (last,) = order_statistics(indexed.filter(value == threshold), "_row", [count - above - 1])
    chosen = (value > threshold) | ((value == threshold) & (pl.col("_row") <= last))
    return indexed.filter(chosen).drop("_row")


def _interpolate(n: int, probabilities: Sequence[float]) -> list[tuple[int, int, float]]:
    """Per probability: (lower rank, upper rank, weight), as np.quantile's linear method."""
    out = []
    for p in probabilities:
        if not 0 <= p <= 1:
            raise DivscopeError(f"quantile probabilities must lie in [0, 1], got {p}.")
        virtual = (n - 1) * p
        lower = math.floor(virtual)
        if virtual >= n - 1:
            lower = n - 1
        out.append((lower, min(lower + 1, n - 1), virtual - lower))
    return out


def _numpy_lerp(a: float, b: float, t: float) -> float:
    """NumPy's linear interpolation (`numpy.lib._function_base_impl._lerp`), for equal bits."""
    diff = b - a
    return b - diff * (1 - t) if t >= 0.5 else a + diff * t


def _polars_lerp(a: float, b: float, t: float) -> float:
    """Polars' linear interpolation of a quantile (in float64)."""
    return t * (b - a) + a


def _quantiles(
    values: pl.LazyFrame, probabilities: Sequence[float], *, nan_propagates: bool, grouped: bool
) -> dict[Hashable, list[float]]:
    plans: dict[Hashable, list[tuple[int, int, float]]] = {}

    def wanted(counts: dict[Hashable, tuple[int, int]]) -> dict[Hashable, set[int]]:
        plans.update({g: _interpolate(n, probabilities) for g, (n, _) in counts.items()})
        return {g: {r for lo, hi, _ in plan for r in (lo, hi)} for g, plan in plans.items()}

    counts, found = _ranked(values, wanted, grouped=grouped)
    out = {}
    for group, plan in plans.items():
        if nan_propagates and counts[group][1]:
            out[group] = [math.nan] * len(plan)
        else:
            lerp = _numpy_lerp if nan_propagates else _polars_lerp
            out[group] = [lerp(found[(group, lo)], found[(group, hi)], t) for lo, hi, t in plan]
    return out


def exact_quantiles(lazy: pl.LazyFrame, column: str, probabilities: Sequence[float]) -> list[float]:
    """Exactly `np.quantile(values, probabilities)` (linear interpolation), out of core.

    Args:
        lazy: the table.
        column: a numeric column; nulls are dropped; a NaN makes every quantile NaN, as in
            NumPy.
        probabilities: in [0, 1].

    Returns:
        One value per probability; NaN for every one when the column has no values.

    >>> frame = pl.LazyFrame({"x": [4.0, 1.0, None, 2.0, 3.0]})
    >>> exact_quantiles(frame, "x", [0.0, 0.5, 0.9])
    [1.0, 2.5, 3.7]
    """
    values = _values(lazy, column, None)
    result = _quantiles(values, probabilities, nan_propagates=True, grouped=False)
    return result.get(0, [math.nan] * len(probabilities))


def grouped_quantiles(
    lazy: pl.LazyFrame, column: str, by: str, probabilities: Sequence[float]
) -> dict[Hashable, list[float]]:
    """Per value of `by`, the linear-interpolated quantiles of `column`, out of core.

    Polars' `quantile(p, interpolation="linear")` per group, in float64 (polars rounds it to a
    float32 column's dtype after), computed by the same exact method as `exact_quantiles` for
    all groups at once: nulls dropped (rows with a null group too), NaN as the largest value
    (polars' order).

    Args:
        lazy: the table.
        column: a numeric column.
        by: the group column (few distinct values: positional bins, say).
        probabilities: in [0, 1].

    Returns:
        Group -> one value per probability; groups without values are absent.

    >>> frame = pl.LazyFrame({"bin": [0, 0, 1, 1, 1], "x": [1.0, 3.0, 5.0, 6.0, 7.0]})
    >>> dict(sorted(grouped_quantiles(frame, "x", "bin", [0.5]).items()))
    {0: [2.0], 1: [6.0]}
    """
    values = _values(lazy, column, by)
    return _quantiles(values, probabilities, nan_propagates=False, grouped=True)


def sorted_blocks(
    lazy: pl.LazyFrame, column: str, *, descending: bool = False
) -> Iterator[np.ndarray]:
    """The non-null values of `column`, sorted, in blocks of at most `value_limit()` values.

    A streaming sort: the histogram passes cut the values into contiguous ranges of at most
    `value_limit()` values (a single repeated value may fill several blocks), and each range is
    collected and sorted in its own pass; a column that fits is collected once. NaN comes last
    (first when descending).

    Args:
        lazy: the table.
        column: a numeric column.
        descending: largest first.

    Yields:
        float64 arrays; their concatenation is `np.sort` of the column (reversed when
        descending).

    >>> frame = pl.LazyFrame({"x": [3.0, None, 1.0, 2.0]})
    >>> [block.tolist() for block in sorted_blocks(frame, "x", descending=True)]
    [[3.0, 2.0, 1.0]]
    """
    values = _values(lazy, column, None)
    limit = value_limit()
    rows = collect(values.head(limit + 1))
    if rows.height <= limit:  # fits: one pass
        if rows.height:
            block = np.sort(rows[_V].to_numpy())
            yield block[::-1] if descending else block
        return
    del rows
    ranges: list[_Slot] = []
    pending = _first_slots(values, grouped=False).get(0, [])
    while pending:
        big = []
        for slot in pending:
            if slot.count > limit and slot.lo != slot.hi and not math.isnan(slot.lo):
                big.append(slot)
            else:
                ranges.append(slot)
        pending = _refine(values, big, lambda s: True) if big else []
    ranges.sort(key=lambda s: s.below, reverse=descending)

    def read(batch: list[_Slot]) -> np.ndarray:
        # Consecutive slots: the values between the lowest low and the highest high.
        low, high = (batch[-1], batch[0]) if descending else (batch[0], batch[-1])
        block = np.sort(collect(values.filter(pl.col(_V).is_between(low.lo, high.hi)))[_V])
        return block[::-1] if descending else block

    batch: list[_Slot] = []
    for slot in ranges:
        # One repeated value (or NaN) too many to read at once: no need to read it.
        repeated = slot.count > limit or math.isnan(slot.lo)
        if batch and (repeated or sum(s.count for s in batch) + slot.count > limit):
            yield read(batch)
            batch = []
        if repeated:
            for start in range(0, slot.count, limit):
                yield np.full(min(limit, slot.count - start), slot.lo)
        else:
            batch.append(slot)
    if batch:
        yield read(batch)
