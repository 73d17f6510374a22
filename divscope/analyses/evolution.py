"""How divergence grows over training: several checkpoints on the same trajectories (Fig. 11)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

from divscope.analyses._frames import POSITION_KEY, Frame, checked_lazy, percentile_label
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

    Every table scores the same reference trajectories with the base model against one RL
    checkpoint. A position is high-divergence when its metric is strictly above `threshold`;
    the Jaccard overlap |H_step ∩ H_final| / |H_step ∪ H_final| compares the sets of
    (prompt_id, sample_id, position) keys with the last step's.

    Args:
        tables: training step -> token table of that checkpoint.
        metric: the divergence column.
        threshold: the high-divergence cut-off.
        percentiles: percentiles of the metric reported per step (default the paper's 10, 25,
            50, 75, 90, 95 and 99).

    Returns:
        One row per step, ascending: `step`, `n_tokens`, `mean`, `p<q>` per percentile,
        `n_high`, `share_high`, `jaccard_with_final` (null when both sets are empty).

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
    high = {
        step: lazy.filter(pl.col(metric) > threshold).select(POSITION_KEY).unique().collect()
        for step, lazy in lazies.items()
    }
    final_high = high[final_step]
    rows = []
    for step in sorted(lazies):
        result = sparsity(lazies[step], metric, thresholds=(), percentiles=percentiles)
        n_high = high[step].height
        both = high[step].join(final_high, on=list(POSITION_KEY), how="inner").height
        union = n_high + final_high.height - both
        rows.append(
            {
                "step": step,
                "n_tokens": result.n_tokens,
                "mean": result.mean,
                **{percentile_label(q): v for q, v in result.percentiles.items()},
                "n_high": n_high,
                "share_high": n_high / result.n_tokens if result.n_tokens else None,
                "jaccard_with_final": both / union if union else None,
            }
        )
    return pl.DataFrame(rows)
