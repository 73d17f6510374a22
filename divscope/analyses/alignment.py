"""RAST's delta alignment: does the small pair's logit shift point where the large pair's does?

Input: cross-sample results decoded with `--delta-alignment` (docs/contracts.md, "Cross-sample
results"): `delta_cosine` holds, per decoding step, the cosine over the vocabulary between the
small pair's logit delta (rast_rl − rast_base) and the large pair's (rl − base), along each
response. RAST's premise is that the two deltas align; comparing `rast` trajectories with `base`
ones shows whether the alignment holds off RAST's own path too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from divscope.analyses._frames import Frame
from divscope.analyses.controls import Settings
from divscope.estimators import PairedBootstrap, interval_columns


@dataclass(frozen=True)
class DeltaAlignment:
    """Mean delta cosine per setting, and its profile over relative position."""

    summary: pl.DataFrame
    """One row per setting with cosines (its key columns): `n_responses`, `delta_cosine` (the
    mean over responses of each response's mean cosine), `delta_cosine_low`,
    `delta_cosine_high` (problem-bootstrap interval, paired across settings)."""
    profile: pl.DataFrame
    """Per setting and relative-position bin (`bin_start` = t / T rounded down to the bin):
    `delta_cosine` (mean over the steps in the bin), `n_steps`."""


def delta_alignment(
    results: Frame,
    *,
    bins: int = 20,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> DeltaAlignment:
    """The cosine between the small and the large pair's logit deltas, per setting.

    Steps without a cosine (null: a forced opening's positions, or a zero delta) are skipped;
    responses without any are left out. A response's position t of T steps falls in bin
    ⌊bins · t / T⌋.

    Args:
        results: cross-sample results with `prompt_id`, `policy`, `budget`, `delta_cosine`.
        bins: relative-position bins of the profile.
        n_boot: bootstrap resamples of prompts.
        seed: seed of the bootstrap.
        confidence: coverage of the intervals.

    Returns:
        A `DeltaAlignment`; empty frames when no response has a cosine.

    >>> results = pl.DataFrame({"prompt_id": ["a", "b"], "policy": ["rast"] * 2,
    ...     "budget": [-1, -1], "delta_cosine": [[1.0, 0.5], [0.0, None, 0.0]]})
    >>> alignment = delta_alignment(results, bins=2, n_boot=20)
    >>> alignment.summary["delta_cosine"].to_list()
    [0.375]
    >>> alignment.profile.select("bin_start", "delta_cosine").rows()
    [(0.0, 0.5), (0.5, 0.25)]
    """
    settings = Settings(
        results, what="delta_alignment", required=("delta_cosine",), graded=False, controls=()
    )
    steps = (
        settings.frame.select(
            *settings.keys,
            "prompt_id",
            pl.int_range(pl.len()).alias("_response"),
            pl.col("delta_cosine").list.len().alias("_steps"),
            pl.col("delta_cosine"),
        )
        .with_columns(pl.int_ranges(0, pl.col("_steps")).alias("_position"))
        .explode("delta_cosine", "_position")
        .drop_nulls("delta_cosine")
        .filter(pl.col("delta_cosine").is_not_nan())
        .with_columns(
            (
                (bins * pl.col("_position") // pl.col("_steps")).clip(upper_bound=bins - 1) / bins
            ).alias("bin_start")
        )
    )
    keys = settings.keys
    responses = steps.group_by(*keys, "prompt_id", "_response").agg(
        pl.col("delta_cosine").cast(pl.Float64).mean().alias("mean")
    )
    per_prompt = responses.group_by(*keys, "prompt_id").agg(
        pl.col("mean").sum().alias("total"), pl.len().alias("count")
    )
    prompts = per_prompt["prompt_id"].unique().sort().to_list()
    index = {p: i for i, p in enumerate(prompts)}
    bootstrap = PairedBootstrap.drawn(np.zeros(max(len(prompts), 1)), n_boot=n_boot, seed=seed)
    rows = []
    for key, group in per_prompt.group_by(keys, maintain_order=True):
        totals, counts = np.zeros(len(prompts)), np.zeros(len(prompts))
        where = [index[p] for p in group["prompt_id"]]
        totals[where], counts[where] = group["total"].to_numpy(), group["count"].to_numpy()
        row = {**dict(zip(keys, key, strict=True)), "n_responses": int(counts.sum())}
        row |= interval_columns(
            "delta_cosine", bootstrap.ratio(totals, counts).interval(confidence)
        )
        rows.append(row)
    types = {c: settings.frame.schema[c] for c in keys}
    summary = pl.DataFrame(
        rows,
        schema={
            **types,
            "n_responses": pl.Int64(),
            **{f"delta_cosine{e}": pl.Float64() for e in ("", "_low", "_high")},
        },
    ).sort("policy", *settings.settings, "budget", nulls_last=True)
    profile = (
        steps.group_by(*keys, "bin_start")
        .agg(pl.col("delta_cosine").cast(pl.Float64).mean(), pl.len().alias("n_steps"))
        .sort("policy", *settings.settings, "budget", "bin_start", nulls_last=True)
    )
    return DeltaAlignment(summary=summary, profile=profile)
