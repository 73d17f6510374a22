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

    Each table scores trajectories with the base model against one RL checkpoint. A position is
    high-divergence when its metric is strictly above `threshold`; where a step's table scores
    the same trajectories as the final step's (`shared_trajectories`: the papers' Fig. 11, all
    checkpoints teacher-forced on one set of responses), the Jaccard overlap
    |H_step ∩ H_final| / |H_step ∪ H_final| compares the sets of (prompt_id, sample_id,
    position) keys with the final step's. Where it scores others (a monitor that samples the
    current policy at each step), positions of different responses do not correspond: the
    overlap is null and `same_trajectories` false.

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
    final = lazies[max(lazies)]
    names = {step: set(lazy.collect_schema().names()) for step, lazy in lazies.items()}
    final_names = names[max(lazies)]
    final_rows = {}
    shared = {}
    for step, lazy in lazies.items():
        key = [*POSITION_KEY, *(["token_id"] if "token_id" in names[step] & final_names else [])]
        if tuple(key) not in final_rows:
            final_rows[tuple(key)] = final.select(key).unique().collect()
        rows = lazy.select(key).unique().collect()
        ours = final_rows[tuple(key)]
        shared[step] = rows.height == ours.height and rows.join(ours, on=key).height == rows.height
    return dict(sorted(shared.items()))
