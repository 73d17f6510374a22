"""Where in a response the divergence sits: profile over relative position (Fig. 3), and which
response to show token by token (Fig. 1).

Bins are computed exactly from the integer `position` and `n_tokens` (bin = ⌊position · bins /
n_tokens⌋), never from the float32 `rel_position`, so a token at t/T = 7/20 lands in bin 7.
"""

from __future__ import annotations

import polars as pl

from divscope.analyses._frames import Frame, checked_lazy, percentile_label, top_count
from divscope.analyses._streaming import collect, grouped_quantiles, top_rows
from divscope.errors import DivscopeError

PROFILE_PERCENTILES: tuple[float, ...] = (10, 25, 75, 90)


def _position_bin(bins: int) -> pl.Expr:
    if bins < 1:
        raise DivscopeError(f"positional bins must be >= 1, got {bins}.")
    exact = pl.col("position").cast(pl.Int64) * bins // pl.col("n_tokens").cast(pl.Int64)
    return exact.clip(0, bins - 1).cast(pl.Int32).alias("bin")


def _bin_frame(bins: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "bin": pl.Series(range(bins), dtype=pl.Int32),
            "bin_start": [b / bins for b in range(bins)],
            "bin_end": [(b + 1) / bins for b in range(bins)],
        }
    )


def positional_profile(tokens: Frame, metric: str = "js", *, bins: int = 20) -> pl.DataFrame:
    """Per bin of relative position: count, mean, median and p10/p25/p75/p90 of the metric.

    Args:
        tokens: a token table with `position` and `n_tokens`.
        metric: the column profiled.
        bins: number of equal-width bins over [0, 1).

    Returns:
        One row per bin, all bins present: `bin`, `bin_start`, `bin_end`, `count`, `mean`,
        `median`, `p10`, `p25`, `p75`, `p90` (null statistics in an empty bin).

    >>> frame = pl.DataFrame({"position": [0, 1, 2, 3], "n_tokens": [4] * 4,
    ...                       "js": [0.5, 0.25, 0.0, 0.0]})
    >>> positional_profile(frame, bins=2)["mean"].to_list()
    [0.375, 0.0]
    """
    required = ["position", "n_tokens", metric]
    lazy = checked_lazy(tokens, required, what="positional_profile")
    binned = lazy.select(_position_bin(bins), pl.col(metric)).drop_nulls(metric)
    stats = collect(
        binned.group_by("bin").agg(
            pl.len().cast(pl.Int64).alias("count"), pl.col(metric).mean().alias("mean")
        )
    )
    # The exact per-bin quantiles (`grouped_quantiles`), in polars' dtype of the statistic.
    labels = ["median", *(percentile_label(q) for q in PROFILE_PERCENTILES)]
    dtype = binned.select(pl.col(metric).median()).collect_schema()[metric]
    per_bin = grouped_quantiles(
        binned, metric, "bin", [0.5, *(q / 100 for q in PROFILE_PERCENTILES)]
    )
    quantiles = pl.DataFrame(
        {
            "bin": pl.Series(list(per_bin), dtype=pl.Int32),
            **{
                label: pl.Series([row[i] for row in per_bin.values()], dtype=pl.Float64).cast(dtype)
                for i, label in enumerate(labels)
            },
        }
    )
    return (
        _bin_frame(bins)
        .join(stats.join(quantiles, on="bin", how="left"), on="bin", how="left")
        .with_columns(pl.col("count").fill_null(0))
        .sort("bin")
    )


def early_density(
    tokens: Frame, metric: str = "js", *, top_share: float = 0.01, bins: int = 20
) -> pl.DataFrame:
    """Density over relative position of the most divergent tokens, beside that of all tokens.

    The top tokens are the ⌈top_share · n⌉ with the largest metric, ties at the threshold going
    to the first rows of the table (`top_rows`). A density of 1 everywhere means no positional
    preference; the paper finds the top 1% concentrated early.

    Args:
        tokens: a token table with `position` and `n_tokens`.
        metric: the column ranked.
        top_share: share of tokens selected, in (0, 1].
        bins: number of equal-width bins over [0, 1).

    Returns:
        One row per bin: `bin`, `bin_start`, `bin_end`, `count` (top tokens in the bin),
        `density` (= count / n_top · bins) and `density_all` (the same for all tokens).

    >>> frame = pl.DataFrame({"position": [0, 1, 2, 3], "n_tokens": [4] * 4,
    ...                       "js": [0.4, 0.2, 0.0, 0.0]})
    >>> early_density(frame, top_share=0.5, bins=2)["density"].to_list()
    [2.0, 0.0]
    """
    required = ["position", "n_tokens", metric]
    lazy = checked_lazy(tokens, required, what="early_density").drop_nulls(metric)
    binned = lazy.select(_position_bin(bins), pl.col(metric))
    counts_all = collect(binned.group_by("bin").agg(pl.len().cast(pl.Int64).alias("count_all")))
    n = int(counts_all["count_all"].sum())
    n_top = top_count(n, top_share)
    # Ties at the threshold go to the first rows (`top_rows`).
    top = top_rows(binned, metric, n_top)
    counts = collect(top.group_by("bin").agg(pl.len().cast(pl.Int64).alias("count")))
    return (
        _bin_frame(bins)
        .join(counts, on="bin", how="left")
        .join(counts_all, on="bin", how="left")
        .with_columns(pl.col("count", "count_all").fill_null(0))
        .with_columns(
            (pl.col("count") / max(n_top, 1) * bins).alias("density"),
            (pl.col("count_all") / max(n, 1) * bins).alias("density_all"),
        )
        .drop("count_all")
        .sort("bin")
    )


def example_response(
    tokens: Frame, metric: str = "js", *, threshold: float = 0.1, max_tokens: int = 80
) -> tuple[str, int]:
    """A response to show token by token: the one with most tokens above `threshold`.

    Only responses of at most `max_tokens` tokens compete (all of them when none is that short),
    and only their first `max_tokens` tokens count, as a figure shows no more; ties go to the
    shorter response, then to the smallest key, so the choice is deterministic.

    Args:
        tokens: a token table.
        metric: the divergence column.
        threshold: a token counts when its metric is strictly above.
        max_tokens: longest response considered readable.

    Returns:
        (prompt_id, sample_id) of the response.

    >>> frame = pl.DataFrame({"prompt_id": ["a", "a", "b", "b"], "sample_id": [0, 0, 0, 0],
    ...     "position": [0, 1, 0, 1], "n_tokens": [2, 2, 2, 2], "js": [0.0, 0.2, 0.3, 0.4]})
    >>> example_response(frame)
    ('b', 0)
    """
    required = ["prompt_id", "sample_id", "position", "n_tokens", metric]
    lazy = checked_lazy(tokens, required, what="example_response")
    responses = (
        lazy.group_by("prompt_id", "sample_id")
        .agg(
            pl.col("n_tokens").first().alias("length"),
            ((pl.col(metric) > threshold) & (pl.col("position") < max_tokens))
            .sum()
            .alias("n_high"),
        )
        .collect()
    )
    if responses.is_empty():
        raise DivscopeError("example_response: the token table is empty.")
    short = responses.filter(pl.col("length") <= max_tokens)
    candidates = short if short.height else responses
    best = candidates.sort(
        ["n_high", "length", "prompt_id", "sample_id"], descending=[True, False, False, False]
    ).row(0, named=True)
    return best["prompt_id"], int(best["sample_id"])
