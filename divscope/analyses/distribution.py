"""How a divergence metric is distributed over tokens: sparsity, histogram, Lorenz curve, Gini.

`metric` is any numeric token-table column; the divergences are `js` (the default, top-p
truncated), `js_full`, `kl_base_rl`, `kl_rl_base` and `ce_base_rl`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from divscope.analyses._frames import (
    DEFAULT_PERCENTILES,
    Frame,
    checked_lazy,
    percentile_label,
)
from divscope.analyses._streaming import (
    collect,
    exact_quantiles,
    order_statistics,
    sorted_blocks,
    value_limit,
)
from divscope.errors import DivscopeError

DEFAULT_SPARSITY_THRESHOLDS: tuple[float, ...] = (1e-4, 1e-3, 1e-2)
DEFAULT_MASS_SHARES: tuple[float, ...] = (0.5, 0.8, 0.9)


@dataclass(frozen=True)
class Sparsity:
    """How many tokens barely diverge, and the percentiles of the metric."""

    metric: str
    """The column summarized."""
    n_tokens: int
    """Tokens with a non-null value."""
    mean: float
    """Mean of the metric (NaN without tokens)."""
    share_below: dict[float, float]
    """Threshold -> share of tokens whose value is strictly below it."""
    percentiles: dict[float, float]
    """Percentile (0-100) -> value, linearly interpolated as NumPy's default."""


def sparsity(
    tokens: Frame,
    metric: str = "js",
    *,
    thresholds: Sequence[float] = DEFAULT_SPARSITY_THRESHOLDS,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
) -> Sparsity:
    """Share of tokens with the metric below near-zero thresholds, and its percentile table.

    Args:
        tokens: a token table (DataFrame or LazyFrame).
        metric: the column to summarize.
        thresholds: near-zero cut-offs; a token counts when its value is strictly below.
        percentiles: percentiles in [0, 100].

    Returns:
        A `Sparsity`; nulls are ignored, and an empty input gives NaN statistics.

    >>> frame = pl.DataFrame({"js": [0.0, 0.0, 0.0005, 0.2]})
    >>> result = sparsity(frame, thresholds=(1e-4, 1e-3))
    >>> result.share_below
    {0.0001: 0.5, 0.001: 0.75}
    """
    lazy = checked_lazy(tokens, [metric], what="sparsity")
    values = lazy.select(pl.col(metric).cast(pl.Float64)).drop_nulls()
    value = pl.col(metric)
    stats = collect(
        values.select(
            pl.len().alias("n"),
            value.mean().alias("mean"),
            *((value < t).sum().alias(f"below_{i}") for i, t in enumerate(thresholds)),
        )
    ).row(0, named=True)
    n = int(stats["n"])
    shares = [stats[f"below_{i}"] / n if n else math.nan for i in range(len(thresholds))]
    # Exact, out of core: np.quantile's linear interpolation (`exact_quantiles`).
    quantiles = exact_quantiles(values, metric, [q / 100 for q in percentiles])
    return Sparsity(
        metric=metric,
        n_tokens=n,
        mean=float(stats["mean"]) if n else math.nan,
        share_below={float(t): s for t, s in zip(thresholds, shares, strict=True)},
        percentiles={float(q): v for q, v in zip(percentiles, quantiles, strict=True)},
    )


@dataclass(frozen=True)
class Histogram:
    """Counts of a metric in bins; the last bin includes its right edge (NumPy's convention)."""

    metric: str
    """The column counted."""
    edges: tuple[float, ...]
    """Bin edges, length bins + 1, increasing."""
    counts: tuple[int, ...]
    """Tokens per bin, length bins."""
    n_below: int
    """Tokens below the first edge (with log bins: zeros and values under `low`)."""
    n_above: int
    """Tokens above the last edge."""


def histogram(
    tokens: Frame,
    metric: str = "js",
    *,
    bins: int = 50,
    log: bool = False,
    low: float | None = None,
    high: float | None = None,
) -> Histogram:
    """Bin edges and counts of a metric, linear or log-spaced (the paper's Fig. 2).

    Args:
        tokens: a token table.
        metric: the column to count.
        bins: number of bins.
        log: log-spaced edges (geometric), for metrics spanning orders of magnitude.
        low: first edge; default the minimum, or with `log` the smallest positive value.
        high: last edge; default the maximum.

    Returns:
        A `Histogram`; values outside [low, high] are counted in `n_below` / `n_above`.

    Raises:
        DivscopeError: no usable values, or `low` >= `high`.

    >>> histogram(pl.DataFrame({"js": [0.0, 0.1, 0.3, 0.4]}), bins=2).counts
    (2, 2)
    """
    if bins < 1:
        raise DivscopeError(f"histogram: bins must be >= 1, got {bins}.")
    lazy = checked_lazy(tokens, [metric], what="histogram")
    values = lazy.select(pl.col(metric).cast(pl.Float64)).drop_nulls()
    if low is None or high is None:
        usable = values.filter(pl.col(metric) > 0) if log else values
        extremes = collect(
            usable.select(
                pl.len(), pl.col(metric).min().alias("lo"), pl.col(metric).max().alias("hi")
            )
        ).row(0)
        if extremes[0] == 0:
            kind = "positive values" if log else "values"
            raise DivscopeError(f"histogram: column {metric!r} has no {kind} to bin.")
        low = float(extremes[1]) if low is None else low
        high = float(extremes[2]) if high is None else high
    if not low < high or (log and low <= 0):
        raise DivscopeError(
            f"histogram: need 0 < low < high for log bins or low < high, got low={low}, "
            f"high={high}; pass low= and high= explicitly."
        )
    edges = np.geomspace(low, high, bins + 1) if log else np.linspace(low, high, bins + 1)
    # Index of the bin holding each value: NumPy's searchsorted(edges, side="right") - 1, as
    # left-closed intervals (the first below edges[0]); values equal to `high` belong to the
    # last bin.
    intervals = pl.col(metric).bin_intervals(edges.tolist(), labels=False)
    index = intervals.cast(pl.Int64) - 1
    index = pl.when(pl.col(metric) == edges[-1]).then(bins - 1).otherwise(index)
    counted = collect(values.group_by(index.alias("bin")).agg(pl.len().alias("n")))
    per_bin = dict(zip(counted["bin"].to_list(), counted["n"].to_list(), strict=True))
    return Histogram(
        metric=metric,
        edges=tuple(float(e) for e in edges),
        counts=tuple(int(per_bin.get(b, 0)) for b in range(bins)),
        n_below=int(per_bin.get(-1, 0)),
        n_above=int(sum(c for b, c in per_bin.items() if b >= bins)),
    )


@dataclass(frozen=True)
class Lorenz:
    """Concentration of the divergence mass on few tokens."""

    metric: str
    """The column measured (must be non-negative)."""
    n_tokens: int
    """Tokens with a non-null value."""
    gini: float
    """Gini coefficient in [0, 1]: 0 = every token diverges equally."""
    curve: pl.DataFrame
    """Columns `token_share`, `mass_share`: the least divergent `token_share` of tokens hold
    `mass_share` of the total, sampled at evenly spaced token shares."""
    token_share_for_mass: dict[float, float]
    """Mass share q -> smallest share of tokens (most divergent first) holding q of the mass."""


def lorenz(
    tokens: Frame,
    metric: str = "js",
    *,
    n_points: int = 101,
    mass_shares: Sequence[float] = DEFAULT_MASS_SHARES,
) -> Lorenz:
    """Lorenz curve of a divergence column, its Gini coefficient, and top-token mass shares.

    With values sorted ascending x_1 <= ... <= x_n and total S, the curve joins (i/n, Σ_{j<=i}
    x_j / S) and Gini = 1 - 2 · (area under it) = 2 Σ i x_i / (n S) - (n + 1) / n. A column that
    sums to zero is perfectly equal: Gini 0 and the diagonal.

    Args:
        tokens: a token table.
        metric: a non-negative column.
        n_points: points sampled along the curve (token shares 0, 1/(n_points-1), ..., 1).
        mass_shares: shares of the total mass for `token_share_for_mass`.

    Returns:
        A `Lorenz`.

    Raises:
        DivscopeError: no values, or a negative value.

    >>> result = lorenz(pl.DataFrame({"js": [0.0, 0.0, 0.0, 1.0]}), n_points=5)
    >>> result.gini, result.token_share_for_mass[0.9]
    (0.75, 0.25)
    """
    if n_points < 2:
        raise DivscopeError(f"lorenz: n_points must be >= 2, got {n_points}.")
    lazy = checked_lazy(tokens, [metric], what="lorenz")
    values = lazy.select(pl.col(metric).cast(pl.Float64)).drop_nulls()
    n, smallest = collect(values.select(pl.len(), pl.col(metric).min())).row(0)
    if n == 0:
        raise DivscopeError(f"lorenz: column {metric!r} has no values.")
    if smallest < 0:
        raise DivscopeError(
            f"lorenz: column {metric!r} has a negative value ({smallest}); the Lorenz curve "
            "needs a non-negative divergence."
        )
    token_share = np.linspace(0.0, 1.0, n_points)
    # The curve's points sit between the cumulative sums at ranks i and i + 1 (i = ⌊share·n⌋).
    at = token_share * n
    lower = np.minimum(np.floor(at).astype(np.int64), n - 1)
    wanted = np.union1d(lower, lower + 1)
    if n <= value_limit():  # one block: sorted once, read both ways
        (block,) = sorted_blocks(values, metric)
        ascending, descending = iter([block]), iter([block[::-1]])
    else:
        ascending = sorted_blocks(values, metric)
        descending = sorted_blocks(values, metric, descending=True)
    cumulative, total, weighted = _sorted_sums(ascending, wanted)
    if total == 0:
        mass_share = token_share
        gini = 0.0
        shares = {float(q): float(q) for q in mass_shares}
    else:
        mass_share = np.array(
            [
                np.interp(x, [i, i + 1], [cumulative[i] / total, cumulative[i + 1] / total])
                for x, i in zip(at, lower, strict=True)
            ]
        )
        gini = float(np.clip(2 * weighted / (n * total) - (n + 1) / n, 0.0, 1.0))
        # Relative slack so that rounding in the cumulative sum cannot skip the exact hit.
        targets = np.asarray(mass_shares) * total * (1 - 1e-12)
        needed = _top_counts(descending, targets)
        shares = {float(q): float(m) / n for q, m in zip(mass_shares, needed, strict=True)}
    return Lorenz(
        metric=metric,
        n_tokens=n,
        gini=gini,
        curve=pl.DataFrame({"token_share": token_share, "mass_share": mass_share}),
        token_share_for_mass=shares,
    )


def _sorted_sums(
    blocks: Iterator[np.ndarray], ranks: np.ndarray
) -> tuple[dict[int, float], float, float]:
    """Over the values sorted ascending x_1 <= ... <= x_n, read block by block
    (`sorted_blocks`): the cumulative sums Σ_{j<=i} x_j at `ranks` i (0 at i = 0), the total,
    and Σ i x_i. On a column that fits in one block these are NumPy's own sums of the sorted
    array, bit for bit; across blocks, the same sums carried from block to block."""
    cumulative = {0: 0.0} if 0 in ranks else {}
    total = weighted = 0.0
    offset = 0
    for block in blocks:
        running = np.cumsum(block)
        running += total  # the sum of every earlier block (0.0 for the first: exact)
        inside = ranks[(ranks > offset) & (ranks <= offset + block.size)]
        cumulative.update({int(i): float(running[i - offset - 1]) for i in inside})
        first = offset + 1
        weighted += np.arange(first, first + block.size, dtype=np.float64) @ block
        total = float(block.sum()) if offset == 0 else total + float(block.sum())
        offset += block.size
    return cumulative, total, weighted


def _top_counts(blocks: Iterator[np.ndarray], targets: np.ndarray) -> list[int]:
    """Per target, the fewest largest values whose sum reaches it, summed from the largest over
    the descending `blocks`: `np.searchsorted(np.cumsum(values[::-1]), target) + 1`."""
    needed: list[int | None] = [None] * len(targets)
    running, count = 0.0, 0
    for block in blocks:
        from_top = np.cumsum(block)
        from_top += running
        for i, target in enumerate(targets):
            if needed[i] is None and from_top[-1] >= target:
                needed[i] = count + int(np.searchsorted(from_top, target)) + 1
        running, count = float(from_top[-1]), count + block.size
        if all(m is not None for m in needed):
            break
    # A target above the total (rounding) needs every value, as np.searchsorted's n + 1 - 1.
    return [count + 1 if m is None else m for m in needed]


def compare(
    tables: Mapping[str, Frame],
    metric: str = "js",
    *,
    thresholds: Sequence[float] = DEFAULT_SPARSITY_THRESHOLDS,
    percentiles: Sequence[float] = DEFAULT_PERCENTILES,
) -> pl.DataFrame:
    """Side-by-side sparsity of several labelled tables (RL vs the SFT control, Figs. 6 and 12).

    Args:
        tables: label -> token table, e.g. {"rl": rl_tokens, "sft": sft_tokens}.
        metric: the column compared.
        thresholds: near-zero cut-offs, as in `sparsity`.
        percentiles: percentiles, as in `sparsity`.

    Returns:
        One row per label, in the mapping's order: `label`, `n_tokens`, `mean`,
        `share_below_<t>` per threshold and `p<q>` per percentile.

    >>> tables = {"rl": pl.DataFrame({"js": [0.0, 0.3]}), "sft": pl.DataFrame({"js": [0.2, 0.3]})}
    >>> compare(tables, thresholds=(1e-3,), percentiles=(50,))["share_below_0.001"].to_list()
    [0.5, 0.0]
    """
    rows = []
    for label, table in tables.items():
        result = sparsity(table, metric, thresholds=thresholds, percentiles=percentiles)
        rows.append(
            {
                "label": label,
                "n_tokens": result.n_tokens,
                "mean": result.mean,
                **{f"share_below_{t:g}": s for t, s in result.share_below.items()},
                **{percentile_label(q): v for q, v in result.percentiles.items()},
            }
        )
    return pl.DataFrame(rows)


@dataclass(frozen=True)
class MatchedThreshold:
    """A threshold of the reference metric carried to another metric at the same quantile."""

    reference: str
    """The metric the threshold was set on (`js`)."""
    threshold: float
    """The threshold t on the reference."""
    share_above: float
    """Share of tokens with reference > t."""
    metric: str
    """The metric the threshold is carried to."""
    value: float
    """The matched threshold v on `metric`: exactly as many tokens have metric > v as have
    reference > t, unless values of `metric` tie at v."""
    metric_share_above: float
    """Share of tokens with metric > v: `share_above`, or less where values tie at v."""


def matched_thresholds(
    tokens: Frame, metric: str, thresholds: Sequence[float], *, reference: str = "js"
) -> tuple[MatchedThreshold, ...]:
    """Carry thresholds set on `reference` to `metric` at the same quantile of this table.

    For each threshold t, let k be the number of tokens with reference > t among the n tokens
    where both columns are non-null, and x_(1) <= ... <= x_(n) the sorted values of `metric`.
    The matched value is v = x_(n-k), the largest value outside the top k (so the k largest
    values, and only they, lie above it when no value ties at v); when k = n, the next float
    below x_(1). Quantile-matched thresholds make the share of tokens above (or below) each
    threshold the reference's by construction; what differs is which tokens they select.

    Args:
        tokens: a token table.
        metric: the column the thresholds are carried to.
        thresholds: thresholds on `reference`.
        reference: the column the thresholds were set on.

    Returns:
        One `MatchedThreshold` per threshold, in order.

    Raises:
        DivscopeError: a missing column, or no token with both values.

    >>> frame = pl.DataFrame({"js": [0.0, 0.05, 0.2, 0.3], "ce": [1.0, 4.0, 2.0, 3.0]})
    >>> [m.value for m in matched_thresholds(frame, "ce", (0.1, 0.25))]
    [2.0, 3.0]
    """
    lazy = checked_lazy(tokens, [reference, metric], what="matched_thresholds")
    both = lazy.select(reference, metric).drop_nulls()
    # Comparisons in the columns' own dtypes, as NumPy compares an array with a Python float.
    counts = collect(
        both.select(
            pl.len().alias("n"),
            *((pl.col(reference) > t).sum().alias(f"above_{i}") for i, t in enumerate(thresholds)),
        )
    ).row(0, named=True)
    n = int(counts["n"])
    if n == 0:
        raise DivscopeError(
            f"matched_thresholds: no token has both {reference!r} and {metric!r}; cannot carry "
            f"{reference} thresholds to {metric}."
        )
    above = [int(counts[f"above_{i}"]) for i in range(len(thresholds))]
    # v = x_(n-k), the (n-k)-th smallest (0-based rank n-k-1); with k = n the next float (in
    # the column's dtype) below the smallest.
    ranks = sorted({n - k - 1 for k in above if k < n} | ({0} if n in above else set()))
    at = dict(zip(ranks, order_statistics(both, metric, ranks), strict=True))
    smallest = at.get(0, math.nan)
    if both.collect_schema()[metric] == pl.Float32:
        below = float(np.nextafter(np.float32(smallest), np.float32(-np.inf)))
    else:
        below = float(np.nextafter(smallest, -np.inf))
    values = [at[n - k - 1] if k < n else below for k in above]
    larger = collect(
        both.select((pl.col(metric) > v).sum().alias(f"above_{i}") for i, v in enumerate(values))
    ).row(0)
    return tuple(
        MatchedThreshold(
            reference=reference,
            threshold=float(t),
            share_above=k / n,
            metric=metric,
            value=v,
            metric_share_above=float(m) / n,
        )
        for t, k, v, m in zip(thresholds, above, values, larger, strict=True)
    )
