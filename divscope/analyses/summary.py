"""The one-call digest of a token table that `divscope analyze` prints and saves."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from divscope.analyses._frames import Frame, checked_lazy
from divscope.analyses.cross_sampling import cross_sampling_curve, pass_at_k_curve
from divscope.analyses.distribution import Lorenz, Sparsity, compare, lorenz, sparsity
from divscope.analyses.failure import FailureAUROC, failure_auroc
from divscope.analyses.position import early_density, positional_profile
from divscope.analyses.shift import (
    RankReordering,
    TailPromotion,
    entropy_by_divergence,
    rank_reordering,
    tail_promotion,
    topk_overlap,
)
from divscope.analyses.tokens import PlanningEnrichment, planning_enrichment, word_frequencies
from divscope.errors import DivscopeError
from divscope.schema import OVERLAP_KS, SETTING_COLUMNS

SUMMARY_COLUMNS: tuple[str, ...] = (
    "prompt_id", "sample_id", "position", "n_tokens", "token", "entropy_base", "entropy_rl",
    "rl_top1_rank_in_base", "rl_top2_rank_in_base", "rl_top3_rank_in_base",
    "p_base_of_rl_top1", "p_top1_rl", *(f"overlap_{k}" for k in OVERLAP_KS), "correct",
)  # fmt: skip


@dataclass(frozen=True)
class Summary:
    """Every headline statistic of one token table, plus optional comparisons."""

    metric: str
    """The divergence column summarized."""
    n_tokens: int
    """Rows of the token table."""
    n_responses: int
    """Distinct (prompt_id, sample_id)."""
    n_prompts: int
    """Distinct prompt_id."""
    sparsity: Sparsity
    lorenz: Lorenz
    positional_profile: pl.DataFrame
    early_density: pl.DataFrame
    entropy_by_divergence: pl.DataFrame
    topk_overlap: pl.DataFrame
    rank_reordering: RankReordering
    tail_promotion: TailPromotion
    planning_enrichment: PlanningEnrichment
    word_frequencies: pl.DataFrame
    failure_auroc: FailureAUROC | None
    """None when the table is not graded with both outcomes (see `notes`)."""
    comparison: pl.DataFrame | None
    """`compare` of this table and the `compare` tables; None without them."""
    cross_sampling: pl.DataFrame | None
    """`cross_sampling_curve` of the cross-sample results; None without them."""
    pass_at_k: pl.DataFrame | None
    """`pass_at_k_curve` of the cross-sample results, per setting (as `cross_sampling`); None
    without them."""
    notes: tuple[str, ...]
    """Why a part was skipped."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: frames become lists of row dicts, NaN becomes None."""
        return to_jsonable(self)


def to_jsonable(value: Any) -> Any:
    """Convert analysis results (dataclasses, frames, dicts, floats) to JSON-ready values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, pl.DataFrame):
        return [to_jsonable(row) for row in value.to_dicts()]
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def summary(
    tokens: Frame,
    metric: str = "js",
    *,
    label: str = "main",
    compare_with: Mapping[str, Frame] | None = None,
    cross_sample: Frame | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> Summary:
    """Run every token-table analysis with its defaults, and the optional comparisons.

    The needed columns are read once into memory and shared by the analyses, so a LazyFrame
    over a Parquet table is scanned a single time.

    Args:
        tokens: the token table.
        metric: the divergence column.
        label: this table's label in `comparison`.
        compare_with: label -> other token tables (e.g. {"sft": sft_tokens}) for `compare`.
        cross_sample: cross-sample results for `cross_sampling_curve` and `pass_at_k_curve`.
        n_boot: bootstrap resamples for every interval.
        seed: seed of every bootstrap.

    Returns:
        A `Summary`.

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> frame = pl.DataFrame({"prompt_id": ["a"] * 50 + ["b"] * 50, "sample_id": [0] * 100,
    ...     "position": list(range(50)) * 2, "n_tokens": [50] * 100, "token": [" x"] * 100,
    ...     "js": rng.random(100) * 0.3, "entropy_base": rng.random(100),
    ...     "entropy_rl": rng.random(100), "rl_top1_rank_in_base": [2] * 100,
    ...     "rl_top2_rank_in_base": [1] * 100, "rl_top3_rank_in_base": [3] * 100,
    ...     "p_base_of_rl_top1": [0.2] * 100, "p_top1_rl": [0.7] * 100,
    ...     **{f"overlap_{k}": [1.0] * 100 for k in OVERLAP_KS}, "correct": [None] * 100})
    >>> result = summary(frame, n_boot=10)
    >>> result.n_responses, result.failure_auroc is None
    (2, True)
    """
    lazy = checked_lazy(tokens, [*SUMMARY_COLUMNS, metric], what="summary")
    frame = lazy.select(list(dict.fromkeys([*SUMMARY_COLUMNS, metric]))).collect(engine="streaming")
    counts = frame.select(
        pl.struct("prompt_id", "sample_id").n_unique().alias("responses"),
        pl.col("prompt_id").n_unique().alias("prompts"),
    ).row(0, named=True)
    notes = []
    try:
        failure = failure_auroc(frame, metric, n_boot=n_boot, seed=seed)
    except DivscopeError as error:
        failure = None
        notes.append(f"failure_auroc skipped: {error}")
    comparison = None
    if compare_with:
        comparison = compare({label: frame, **compare_with}, metric)
    curve = pass_at_k = None
    if cross_sample is not None:
        curve = cross_sampling_curve(cross_sample, n_boot=n_boot, seed=seed)
        names = cross_sample.lazy().collect_schema().names()
        settings = [c for c in SETTING_COLUMNS if c in names]
        pass_at_k = pass_at_k_curve(cross_sample, by=("policy", "budget", *settings))
    return Summary(
        metric=metric,
        n_tokens=frame.height,
        n_responses=int(counts["responses"]),
        n_prompts=int(counts["prompts"]),
        sparsity=sparsity(frame, metric),
        lorenz=lorenz(frame, metric),
        positional_profile=positional_profile(frame, metric),
        early_density=early_density(frame, metric),
        entropy_by_divergence=entropy_by_divergence(frame, metric),
        topk_overlap=topk_overlap(frame, metric),
        rank_reordering=rank_reordering(frame, metric),
        tail_promotion=tail_promotion(frame, metric),
        planning_enrichment=planning_enrichment(frame, metric),
        word_frequencies=word_frequencies(frame, metric, top=20),
        failure_auroc=failure,
        comparison=comparison,
        cross_sampling=curve,
        pass_at_k=pass_at_k,
        notes=tuple(notes),
    )
