"""What changes at divergent positions: entropy, top-k overlap, rank reordering, tail promotion,
and the overlap of the most divergent tokens with the base model's most uncertain ones.

"High-divergence" always means metric strictly above the threshold; "low" strictly below.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy.stats import gaussian_kde

from divscope.analyses._frames import POSITION_KEY, Frame, as_float, checked_lazy, top_count
from divscope.analyses._streaming import collect, grouped_quantiles, order_statistics
from divscope.analyses.sampling import sample_rows
from divscope.errors import DivscopeError
from divscope.schema import OVERLAP_KS

DEFAULT_OVERLAP_THRESHOLDS: tuple[float, ...] = (0.01, 0.05, 0.1, 0.2)
DEFAULT_IOU_SHARES: tuple[float, ...] = (0.01, 0.05, 0.1, 0.2)
DEFAULT_TAIL_CUTOFFS: tuple[float, ...] = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.05, 0.1, 0.2, 0.5, 1.0)
RL_TOKENS: tuple[int, ...] = (1, 2, 3)
ENTROPY_COLUMNS: tuple[str, ...] = ("entropy_base", "entropy_rl")


def entropy_groups(metric: str, split: float) -> dict[str, pl.Expr]:
    """The two token groups of the entropy analyses: low = metric < split, high = metric > split.

    >>> list(entropy_groups("js", 0.1))
    ['low', 'high']
    """
    return {"low": pl.col(metric) < split, "high": pl.col(metric) > split}


def entropy_by_divergence(tokens: Frame, metric: str = "js", *, split: float = 0.1) -> pl.DataFrame:
    """Base and RL entropy of low- and high-divergence tokens (Fig. 4).

    Args:
        tokens: a token table with `entropy_base` and `entropy_rl`.
        metric: the divergence column.
        split: low = metric < split, high = metric > split.

    Returns:
        Rows `low` then `high`: `group`, `count`, `mean_entropy_base`, `median_entropy_base`,
        `mean_entropy_rl`, `median_entropy_rl` (null for an empty group).

    >>> frame = pl.DataFrame({"js": [0.0, 0.5], "entropy_base": [0.1, 2.0],
    ...                       "entropy_rl": [0.2, 1.0]})
    >>> entropy_by_divergence(frame)["mean_entropy_rl"].to_list()
    [0.2, 1.0]
    """
    lazy = checked_lazy(tokens, [metric, *ENTROPY_COLUMNS], what="entropy_by_divergence")
    groups = entropy_groups(metric, split)
    exprs = []
    for name, condition in groups.items():
        exprs.append(condition.sum().cast(pl.Int64).alias(f"{name}|count"))
        exprs.extend(
            pl.col(column).filter(condition).mean().alias(f"{name}|mean_{column}")
            for column in ENTROPY_COLUMNS
        )
    row = collect(lazy.select(exprs)).row(0, named=True)
    schema = lazy.collect_schema()
    # The group as its index (an integer label groups faster than a string).
    label = pl.when(groups["low"]).then(pl.lit(0)).when(groups["high"]).then(pl.lit(1))
    grouped = lazy.select(label.alias("_group"), *ENTROPY_COLUMNS)
    for column in ENTROPY_COLUMNS:
        medians = grouped_quantiles(grouped, column, "_group", [0.5])
        for index, name in enumerate(groups):
            value = medians.get(index, [None])[0]
            row[f"{name}|median_{column}"] = _as_dtype(value, schema[column])
    fields = ["count"] + [f"{s}_{c}" for c in ENTROPY_COLUMNS for s in ("mean", "median")]
    return pl.DataFrame(
        [{"group": name, **{f: row[f"{name}|{f}"] for f in fields}} for name in groups],
        schema={"group": pl.String, "count": pl.Int64, **{f: pl.Float64 for f in fields[1:]}},
    )


def _as_dtype(value: float | None, dtype: pl.DataType) -> float | None:
    """An exact float64 statistic of a column rounded as polars' own (a Float32 column's median
    is a Float32)."""
    if value is None or dtype != pl.Float32:
        return value
    return float(np.float32(value))


@dataclass(frozen=True)
class EntropyDensity:
    """Kernel density estimates of base and RL entropy for low- and high-divergence tokens."""

    metric: str
    """The divergence column."""
    split: float
    """Low = metric < split, high = metric > split."""
    curves: pl.DataFrame
    """Columns `group` (low, high), `model` (base, rl), `entropy` (nats), `density` (1/nat)."""
    n_tokens: dict[str, int]
    """Group -> tokens in the group."""
    n_sampled: dict[str, int]
    """Group -> tokens the KDE was fitted on (a seeded sample when the group is large)."""
    seed: int
    """Seed of the samples."""


def entropy_density(
    tokens: Frame,
    metric: str = "js",
    *,
    split: float = 0.1,
    points: int = 200,
    max_samples: int = 20_000,
    seed: int = 0,
) -> EntropyDensity:
    """Gaussian KDEs (Scott's bandwidth) of `entropy_base` and `entropy_rl` per divergence group.

    The groups are those of `entropy_by_divergence`. Each curve is evaluated on one grid from 0
    to the largest sampled entropy, so the four curves share an axis. A group with fewer than two
    distinct values gets no curve.

    Args:
        tokens: a token table with `entropy_base` and `entropy_rl`.
        metric: the divergence column.
        split: low = metric < split, high = metric > split.
        points: grid points per curve.
        max_samples: tokens per group used to fit the KDE; larger groups are sampled.
        seed: seed of the samples.

    Returns:
        An `EntropyDensity`.

    >>> frame = pl.DataFrame({"js": [0.0, 0.0, 0.5, 0.5], "entropy_base": [0.1, 0.3, 2.0, 2.4],
    ...                       "entropy_rl": [0.1, 0.2, 1.0, 1.2]})
    >>> result = entropy_density(frame, points=5)
    >>> result.curves.height, result.n_tokens
    (20, {'low': 2, 'high': 2})
    """
    lazy = checked_lazy(tokens, [metric, *ENTROPY_COLUMNS], what="entropy_density")
    samples = {
        name: sample_rows(
            lazy.filter(condition).select(ENTROPY_COLUMNS).drop_nulls(),
            max_rows=max_samples,
            seed=seed,
        )
        for name, condition in entropy_groups(metric, split).items()
    }
    top = max((float(s.rows.max_horizontal().max() or 0.0) for s in samples.values()), default=0)
    grid = np.linspace(0.0, max(top, 1e-6), points)
    frames = []
    for name, sample in samples.items():
        for column in ENTROPY_COLUMNS:
            values = sample.rows[column].to_numpy().astype(np.float64)
            if np.unique(values).size < 2:
                continue
            frames.append(
                pl.DataFrame(
                    {
                        "group": name,
                        "model": column.removeprefix("entropy_"),
                        "entropy": grid,
                        "density": gaussian_kde(values)(grid),
                    }
                )
            )
    schema = {"group": pl.String, "model": pl.String, "entropy": pl.Float64, "density": pl.Float64}
    return EntropyDensity(
        metric=metric,
        split=split,
        curves=pl.concat(frames) if frames else pl.DataFrame(schema=schema),
        n_tokens={name: s.n_total for name, s in samples.items()},
        n_sampled={name: s.rows.height for name, s in samples.items()},
        seed=seed,
    )


def topk_overlap(
    tokens: Frame,
    metric: str = "js",
    *,
    thresholds: Sequence[float] = DEFAULT_OVERLAP_THRESHOLDS,
    ks: Sequence[int] = OVERLAP_KS,
) -> pl.DataFrame:
    """Mean top-k overlap of base and RL among tokens above each divergence threshold (Fig. 9).

    Args:
        tokens: a token table with the `overlap_<k>` columns.
        metric: the divergence column.
        thresholds: a token counts for a threshold when its metric is strictly above it.
        ks: which `overlap_<k>` columns to average.

    Returns:
        One row per threshold: `threshold`, `count`, and `overlap_<k>` (mean, null when no
        token passes the threshold).

    >>> frame = pl.DataFrame({"js": [0.0, 0.3], "overlap_1": [1.0, 0.0], "overlap_2": [1.0, 0.5]})
    >>> topk_overlap(frame, thresholds=(0.1,), ks=(1, 2)).row(0)
    (0.1, 1, 0.0, 0.5)
    """
    columns = [f"overlap_{k}" for k in ks]
    lazy = checked_lazy(tokens, [metric, *columns], what="topk_overlap")
    exprs = []
    for i, threshold in enumerate(thresholds):
        above = pl.col(metric) > threshold
        exprs.append(above.sum().cast(pl.Int64).alias(f"{i}|count"))
        exprs.extend(pl.col(c).filter(above).mean().alias(f"{i}|{c}") for c in columns)
    row = collect(lazy.select(exprs)).row(0, named=True) if exprs else {}
    return pl.DataFrame(
        [
            {"threshold": float(t), **{c: row[f"{i}|{c}"] for c in ["count", *columns]}}
            for i, t in enumerate(thresholds)
        ],
        schema={"threshold": pl.Float64, "count": pl.Int64, **{c: pl.Float64 for c in columns}},
    )


@dataclass(frozen=True)
class RankReordering:
    """Where the RL model's top tokens sit in the base ranking, at high-divergence positions."""

    metric: str
    """The divergence column."""
    threshold: float
    """Positions with metric strictly above this are counted."""
    n_positions: int
    """High-divergence positions."""
    distribution: pl.DataFrame
    """Columns `rl_token` (k of the RL model's k-th token), `base_rank` (1..max_rank, and
    max_rank + 1 for any rank beyond), `count`, `share` (of `n_positions`)."""
    within_base_top1: dict[int, float]
    """k -> share of positions where the RL k-th token is the base top-1."""
    within_base_top3: dict[int, float]
    """k -> share of positions where the RL k-th token is within the base top-3."""


def rank_reordering(
    tokens: Frame, metric: str = "js", *, threshold: float = 0.1, max_rank: int = 10
) -> RankReordering:
    """Distribution of `rl_top{1,2,3}_rank_in_base` at high-divergence positions (Fig. 22).

    Args:
        tokens: a token table with the `rl_top<k>_rank_in_base` columns.
        metric: the divergence column.
        threshold: positions with metric strictly above are counted.
        max_rank: ranks above it are pooled into the row `base_rank = max_rank + 1`.

    Returns:
        A `RankReordering`; shares are NaN when no position passes the threshold.

    >>> frame = pl.DataFrame({"js": [0.5, 0.5], "rl_top1_rank_in_base": [1, 4],
    ...                       "rl_top2_rank_in_base": [2, 1], "rl_top3_rank_in_base": [3, 2]})
    >>> rank_reordering(frame).within_base_top3
    {1: 0.5, 2: 1.0, 3: 1.0}
    """
    if max_rank < 3:
        raise DivscopeError(f"rank_reordering: max_rank must be >= 3, got {max_rank}.")
    columns = [f"rl_top{k}_rank_in_base" for k in RL_TOKENS]
    lazy = checked_lazy(tokens, [metric, *columns], what="rank_reordering")
    # One pass: counts of each combination of the three (clipped) ranks, at most (max_rank + 2)³.
    clipped = [pl.col(c).clip(upper_bound=max_rank + 1).cast(pl.Int32) for c in columns]
    combinations = collect(
        lazy.filter(pl.col(metric) > threshold)
        .group_by(clipped)
        .agg(pl.len().cast(pl.Int64).alias("count"))
    )
    n = int(combinations["count"].sum())
    grid = pl.DataFrame(
        {
            "rl_token": pl.Series(
                [k for k in RL_TOKENS for _ in range(max_rank + 1)], dtype=pl.Int32
            ),
            "base_rank": pl.Series(list(range(1, max_rank + 2)) * len(RL_TOKENS), dtype=pl.Int32),
        }
    )
    counts = pl.concat(
        [
            combinations.group_by(pl.col(c).alias("base_rank"))
            .agg(pl.col("count").sum())
            .with_columns(pl.lit(k, dtype=pl.Int32).alias("rl_token"))
            for k, c in zip(RL_TOKENS, columns, strict=True)
        ],
        how="diagonal",
    )
    distribution = (
        grid.join(counts, on=["rl_token", "base_rank"], how="left")
        .with_columns(pl.col("count").fill_null(0))
        .with_columns((pl.col("count") / n if n else pl.lit(float("nan"))).alias("share"))
        .sort("rl_token", "base_rank")
    )

    def share(column: str, hit: pl.Expr) -> float:
        """Share of the positions with a rank in `column` where `hit` holds."""
        ranked = combinations.filter(pl.col(column).is_not_null())
        total = int(ranked["count"].sum())
        return int(ranked.filter(hit)["count"].sum()) / total if total else float("nan")

    return RankReordering(
        metric=metric,
        threshold=threshold,
        n_positions=n,
        distribution=distribution,
        within_base_top1={
            k: share(c, pl.col(c) == 1) for k, c in zip(RL_TOKENS, columns, strict=True)
        },
        within_base_top3={
            k: share(c, pl.col(c) <= 3) for k, c in zip(RL_TOKENS, columns, strict=True)
        },
    )


@dataclass(frozen=True)
class TailPromotion:
    """How far down the base distribution the RL model's choice comes from (Fig. 10)."""

    metric: str
    """The divergence column."""
    threshold: float
    """Positions with metric strictly above this are counted."""
    n_positions: int
    """High-divergence positions."""
    curve: pl.DataFrame
    """Columns `cutoff`, `share`: share of positions whose `p_base_of_rl_top1` < cutoff."""
    tail_cutoff: float
    """Base probability below which the RL top-1 token counts as promoted from the tail."""
    n_tail: int
    """Positions whose RL top-1 token has base probability below `tail_cutoff`."""
    tail_rl_prob_mean: float
    """Mean RL probability (`p_top1_rl`) of those promoted tokens (NaN if none)."""
    tail_rl_prob_median: float
    """Median RL probability of those promoted tokens (NaN if none)."""


def tail_promotion(
    tokens: Frame,
    metric: str = "js",
    *,
    threshold: float = 0.1,
    cutoffs: Sequence[float] = DEFAULT_TAIL_CUTOFFS,
    tail_cutoff: float = 0.01,
) -> TailPromotion:
    """Cumulative share of high-divergence positions by base probability of the RL top-1 token.

    Args:
        tokens: a token table with `p_base_of_rl_top1` and `p_top1_rl`.
        metric: the divergence column.
        threshold: positions with metric strictly above are counted.
        cutoffs: sweep of base-probability cut-offs for the curve.
        tail_cutoff: the base probability that defines a promoted tail token.

    Returns:
        A `TailPromotion`.

    >>> frame = pl.DataFrame({"js": [0.5, 0.5], "p_base_of_rl_top1": [0.001, 0.3],
    ...                       "p_top1_rl": [0.9, 0.6]})
    >>> result = tail_promotion(frame, cutoffs=(0.01, 0.5))
    >>> result.curve["share"].to_list(), result.n_tail, result.tail_rl_prob_mean
    ([0.5, 1.0], 1, 0.9)
    """
    required = [metric, "p_base_of_rl_top1", "p_top1_rl"]
    lazy = checked_lazy(tokens, required, what="tail_promotion")
    high = lazy.filter(pl.col(metric) > threshold).select(required[1:])
    tail = pl.col("p_base_of_rl_top1") < tail_cutoff
    row = collect(
        high.select(
            pl.len().alias("n"),
            *[
                (pl.col("p_base_of_rl_top1") < c).mean().alias(f"cut_{i}")
                for i, c in enumerate(cutoffs)
            ],
            tail.sum().cast(pl.Int64).alias("n_tail"),
            pl.col("p_top1_rl").filter(tail).mean().alias("tail_mean"),
        )
    ).row(0, named=True)
    promoted = high.filter(tail).select("p_top1_rl", pl.lit(0).alias("_all"))
    median = grouped_quantiles(promoted, "p_top1_rl", "_all", [0.5]).get(0, [None])[0]
    row["tail_median"] = _as_dtype(median, lazy.collect_schema()["p_top1_rl"])
    curve = pl.DataFrame(
        {
            "cutoff": [float(c) for c in cutoffs],
            "share": [as_float(row[f"cut_{i}"]) for i in range(len(cutoffs))],
        },
        schema={"cutoff": pl.Float64, "share": pl.Float64},
    )
    return TailPromotion(
        metric=metric,
        threshold=threshold,
        n_positions=int(row["n"]),
        curve=curve,
        tail_cutoff=tail_cutoff,
        n_tail=int(row["n_tail"]),
        tail_rl_prob_mean=as_float(row["tail_mean"]),
        tail_rl_prob_median=as_float(row["tail_median"]),
    )


def _top_rows_by_key(lazy: pl.LazyFrame, column: str, counts: Sequence[int]) -> list[pl.Expr]:
    """Per count m, an expression true on exactly the m rows of `lazy` with the largest
    `column`: ties at the cut go to the smallest (prompt_id, sample_id, position).

    Out of core: the m-th largest value comes from `order_statistics`, one pass counts the rows
    above and at each cut, and where the tied rows do not all fit, the key of the last one taken
    is found by counting them per prompt, then per sample of that prompt, then collecting the
    positions of that one response. `lazy` holds no nulls in `column` and unique keys.

    >>> lazy = pl.LazyFrame({"prompt_id": ["a", "a", "b", "b"], "sample_id": [0, 1, 0, 0],
    ...     "position": [0, 0, 0, 1], "x": [1.0, 2.0, 2.0, 2.0]})
    >>> (expression,) = _top_rows_by_key(lazy, "x", [2])
    >>> lazy.filter(expression).collect()["sample_id"].to_list()
    [1, 0]
    """
    x = pl.col(column)
    wanted = sorted({m for m in counts if m > 0})
    if not wanted:
        return [pl.lit(False)] * len(counts)
    cuts = order_statistics(lazy, column, [m - 1 for m in wanted], descending=True)
    tallies = collect(
        lazy.select(
            *[(x > cut).sum().alias(f"above_{i}") for i, cut in enumerate(cuts)],
            *[(x == cut).sum().alias(f"tied_{i}") for i, cut in enumerate(cuts)],
        )
    ).row(0, named=True)
    chosen = {}
    for i, (m, cut) in enumerate(zip(wanted, cuts, strict=True)):
        left, tied = m - tallies[f"above_{i}"], tallies[f"tied_{i}"]
        if left == tied:
            chosen[m] = x >= cut
        else:
            last = _nth_key(lazy.filter(x == cut), left - 1)
            chosen[m] = (x > cut) | ((x == cut) & _key_at_most(last))
    return [chosen.get(m, pl.lit(False)) for m in counts]


def _nth_key(lazy: pl.LazyFrame, rank: int) -> tuple:
    """The position key at 0-based `rank` of `lazy`'s rows sorted by key, from counts per prompt
    and per sample, and the positions of one response."""
    prompt, rank = _nth_group(lazy, "prompt_id", rank)
    lazy = lazy.filter(pl.col("prompt_id") == prompt)
    sample, rank = _nth_group(lazy, "sample_id", rank)
    positions = collect(lazy.filter(pl.col("sample_id") == sample).select("position"))
    return prompt, sample, positions["position"].sort()[rank]


def _nth_group(lazy: pl.LazyFrame, column: str, rank: int) -> tuple[object, int]:
    """The value of `column` that holds the row at 0-based `rank` in `column` order, and the
    rank of that row among the value's rows."""
    sizes = collect(lazy.group_by(column).agg(pl.len().alias("n"))).sort(column)
    ends = sizes["n"].cum_sum().to_numpy()
    index = int(np.searchsorted(ends, rank, side="right"))
    return sizes[column][index], rank - (int(ends[index - 1]) if index else 0)


def _key_at_most(key: tuple) -> pl.Expr:
    """Rows whose (prompt_id, sample_id, position) is at most `key`, lexicographically."""
    prompt, sample, position = (pl.col(c) for c in POSITION_KEY)
    return (prompt < key[0]) | (
        (prompt == key[0]) & ((sample < key[1]) | ((sample == key[1]) & (position <= key[2])))
    )


def entropy_iou(
    tokens: Frame, metric: str = "js", *, shares: Sequence[float] = DEFAULT_IOU_SHARES
) -> pl.DataFrame:
    """Overlap of the most divergent tokens with the base model's most uncertain ones.

    For each share p, A is the top ⌈p · n⌉ token positions by `metric` and B the top ⌈p · n⌉
    by `entropy_base`, over the n positions where both are non-null; IoU = |A ∩ B| / |A ∪ B|
    (the takeover paper's alignment of the gap with base uncertainty). Where values tie at a
    cut, the positions with the smallest (prompt_id, sample_id, position) are taken, so the
    sets do not depend on the row order. Two random sets of the same size would overlap by
    `chance_iou` = (m² / n) / (2m − m² / n) in expectation, m = ⌈p · n⌉. Out of core: the cuts
    are exact order statistics and |A ∩ B| one streaming count (`_top_rows_by_key`).

    Args:
        tokens: a token table with the position key and `entropy_base`.
        metric: the divergence column.
        shares: the shares p, each in (0, 1].

    Returns:
        One row per share: `share`, `n_top` (m), `n_both` (|A ∩ B|), `iou`, `chance_iou`
        (null without tokens).

    >>> frame = pl.DataFrame({"prompt_id": ["a"] * 4, "sample_id": [0] * 4,
    ...     "position": [0, 1, 2, 3], "ce_base_rl": [3.0, 2.0, 1.0, 0.0],
    ...     "entropy_base": [0.5, 2.0, 1.0, 1.0]})
    >>> entropy_iou(frame, "ce_base_rl", shares=(0.25, 0.5))["iou"].to_list()
    [0.0, 0.3333333333333333]
    """
    required = [*POSITION_KEY, metric, "entropy_base"]
    lazy = checked_lazy(tokens, required, what="entropy_iou")
    lazy = lazy.select(required).drop_nulls([metric, "entropy_base"])
    n = collect(lazy.select(pl.len())).item()
    tops = [top_count(n, share) for share in shares]
    in_a, in_b = _top_rows_by_key(lazy, metric, tops), _top_rows_by_key(lazy, "entropy_base", tops)
    both = (
        collect(
            lazy.select(
                (a & b).sum().alias(str(i)) for i, (a, b) in enumerate(zip(in_a, in_b, strict=True))
            )
        ).row(0)
        if tops
        else ()
    )
    rows = []
    for share, m, n_both in zip(shares, tops, both, strict=True):
        expected = m * m / n if n else 0.0
        rows.append(
            {
                "share": float(share),
                "n_top": m,
                "n_both": int(n_both),
                "iou": n_both / (2 * m - n_both) if m else None,
                "chance_iou": expected / (2 * m - expected) if m else None,
            }
        )
    schema = {"share": pl.Float64, "n_top": pl.Int64, "n_both": pl.Int64}
    return pl.DataFrame(rows, schema={**schema, "iou": pl.Float64, "chance_iou": pl.Float64})
