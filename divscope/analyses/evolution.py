"""How divergence grows over training: several checkpoints on the same trajectories (Fig. 11)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

from divscope.analyses._frames import POSITION_KEY, Frame, checked_lazy, percentile_label
from divscope.analyses._streaming import collect, value_limit
from divscope.analyses.distribution import sparsity
from divscope.errors import DivscopeError

DEFAULT_EVOLUTION_PERCENTILES: tuple[float, ...] = (10, 25, 50, 75, 90, 95, 99)
"""The percentiles of the paper's Fig. 11."""


def evolution(
    tables: Mapping[int, Frame],
    metric: str = "js",
    *,
    threshold: float = 0.1,
    percentiles: Sequence[float] = DEFAULT_EVOLUTION_PERCENTILES,
) -> pl.DataFrame:
    """Percentiles per training step and how each step's divergent positions match the final's.

    Each table scores trajectories with the base model against one RL checkpoint. A position is
    high-divergence when its metric is strictly above `threshold`; where a step's table scores
    the same trajectories as the final step's (`shared_trajectories`: the papers' Fig. 11, all
    checkpoints teacher-forced on one set of responses), the Jaccard overlap
    |H_step ∩ H_final| / |H_step ∪ H_final| compares the sets of (prompt_id, sample_id,
    position) keys with the final step's. Where it scores others (a monitor that samples the
    current policy at each step), positions of different responses do not correspond: the
    overlap is null and `same_trajectories` false. Out of core: the key sets are compared in
    hash buckets of bounded size (`_key_overlap`).

    Args:
        tables: training step -> token table of that checkpoint.
        metric: the divergence column.
        threshold: the high-divergence cut-off.
        percentiles: percentiles of the metric reported per step (default the paper's 10, 25,
            50, 75, 90, 95 and 99).

    Returns:
        One row per step, ascending: `step`, `n_tokens`, `mean`, `p<q>` per percentile,
        `n_high`, `share_high`, `same_trajectories`, `jaccard_with_final` (null when both sets
        are empty or the trajectories differ).

    >>> key = {"prompt_id": ["a"] * 3, "sample_id": [0] * 3, "position": [0, 1, 2]}
    >>> tables = {0: pl.DataFrame({**key, "js": [0.2, 0.0, 0.0]}),
    ...           100: pl.DataFrame({**key, "js": [0.3, 0.5, 0.0]})}
    >>> evolution(tables, percentiles=(50,))["jaccard_with_final"].to_list()
    [0.5, 1.0]
    """
    if not tables:
        raise DivscopeError("evolution: no tables given; pass {step: token table, ...}.")
    final_step = max(tables)
    lazies = {
        step: checked_lazy(table, [*POSITION_KEY, metric], what="evolution")
        for step, table in tables.items()
    }
    shared = shared_trajectories(lazies)
    high = {
        step: lazy.filter(pl.col(metric) > threshold).select(POSITION_KEY)
        for step, lazy in lazies.items()
    }
    rows = []
    for step in sorted(lazies):
        result = sparsity(lazies[step], metric, thresholds=(), percentiles=percentiles)
        ours, final, both = _key_overlap(high[step], high[final_step], POSITION_KEY)
        n_high, union = ours + both, ours + final + both
        rows.append(
            {
                "step": step,
                "n_tokens": result.n_tokens,
                "mean": result.mean,
                **{percentile_label(q): v for q, v in result.percentiles.items()},
                "n_high": n_high,
                "share_high": n_high / result.n_tokens if result.n_tokens else None,
                "same_trajectories": shared[step],
                "jaccard_with_final": both / union if union and shared[step] else None,
            }
        )
    return pl.DataFrame(rows)


def shared_trajectories(tables: Mapping[int, Frame]) -> dict[int, bool]:
    """Training step -> whether its table scores the same trajectories as the final step's:
    the same (prompt_id, sample_id, position) keys, and the same `token_id` at each where both
    tables have the column.

    Checkpoints teacher-forced on one set of responses share them; a monitor that samples the
    current policy at each step scores other responses at each step (unless the policy drew
    the very same tokens).

    >>> key = {"prompt_id": ["a", "a"], "sample_id": [0, 0], "position": [0, 1]}
    >>> shared_trajectories({10: pl.DataFrame({**key, "token_id": [5, 6]}),
    ...     20: pl.DataFrame({**key, "token_id": [5, 7]})})
    {10: False, 20: True}
    """
    if not tables:
        return {}
    lazies = {step: checked_lazy(t, POSITION_KEY, what="evolution") for step, t in tables.items()}
    final_step = max(lazies)
    names = {step: set(lazy.collect_schema().names()) for step, lazy in lazies.items()}
    shared = {}
    for step, lazy in lazies.items():
        key = [
            *POSITION_KEY,
            *(["token_id"] if "token_id" in names[step] & names[final_step] else []),
        ]
        shared[step] = step == final_step or _key_overlap(lazy, lazies[final_step], key)[:2] == (
            0,
            0,
        )
    return dict(sorted(shared.items()))


def _key_overlap(
    first: pl.LazyFrame, second: pl.LazyFrame, key: Sequence[str]
) -> tuple[int, int, int]:
    """How many distinct `key`s lie only in `first`, only in `second`, and in both.

    Out of core: the keys of both tables are hashed into buckets of at most `value_limit() / 4`
    rows, and each bucket is grouped in one streaming pass (a table that fits is one bucket).

    >>> first = pl.LazyFrame({"k": [1, 2, 2, 3]})
    >>> _key_overlap(first, pl.LazyFrame({"k": [3, 4]}), ["k"])
    (2, 1, 1)
    """
    key = list(key)
    sides = pl.concat(
        [
            lazy.select(key).with_columns(pl.lit(side, dtype=pl.Int8).alias("_side"))
            for side, lazy in enumerate((first, second))
        ],
        how="vertical_relaxed",
    )
    n = collect(sides.select(pl.len())).item()
    buckets = max(1, -(-n // max(1, value_limit() // 4)))
    totals = [0, 0, 0]
    for bucket in range(buckets):
        part = sides if buckets == 1 else sides.filter(pl.struct(key).hash(0) % buckets == bucket)
        low, high = pl.col("low"), pl.col("high")
        counts = collect(
            part.group_by(key)
            .agg(pl.col("_side").min().alias("low"), pl.col("_side").max().alias("high"))
            .select(
                (high == 0).sum().alias("first"),
                (low == 1).sum().alias("second"),
                (low != high).sum().alias("both"),
            )
        ).row(0)
        totals = [t + int(c) for t, c in zip(totals, counts, strict=True)]
    return totals[0], totals[1], totals[2]
