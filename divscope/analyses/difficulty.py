"""Divergence by problem difficulty: is RL's divergence sparser on the problems the base model
already solves?

Difficulty is the base model's pass@1 on a prompt, the share of its graded base responses that
are correct (unbiased pass@1 = mean@n), split into tertiles: `hard` (lowest pass@1), `medium`,
`easy`. With a handful of samples per prompt many prompts share a pass@1 (4 samples give five
values), so the split has a rule for ties: by default (`ties="together"`) prompts of equal pass@1
stay in one tertile, the tertile of their mid-rank, and the tertiles' sizes then differ;
`ties="split"` ranks equal prompts by `prompt_id` and cuts three equal thirds instead.

`by_difficulty` reports, per tertile, the token table's sparsity (share of tokens with the
metric above thresholds, its mean and percentiles), positional statistics (`positional_profile`,
`early_density`) and, with cross-sample results, `cross_sampling_curve` on the tertile's prompts.
Intervals resample prompts within each tertile (a problem bootstrap stratified by tertile, one
set of weights for every statistic), so `easy − hard` differences are paired.

Tertiles taken from the same base responses that a recovery is computed on condition on them:
prompts whose base responses failed by chance land in `hard`, and that tertile's base score is
biased low. Independent graded base samples (another seed of `divscope generate` + `divscope
grade`, or the reference trajectories' base samples) avoid it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import polars as pl

from divscope.analyses._frames import Frame, checked_lazy, percentile_label
from divscope.analyses._streaming import collect
from divscope.analyses.controls import SAMPLING_COLUMNS, format_value
from divscope.analyses.cross_sample import Reference, cross_sampling_curve
from divscope.analyses.distribution import sparsity
from divscope.analyses.position import early_density, positional_profile
from divscope.errors import DivscopeError
from divscope.estimators import PairedBootstrap, Resampled, interval_columns
from divscope.params import Recovery

DIFFICULTY_LEVELS: tuple[str, ...] = ("hard", "medium", "easy")
"""The tertiles from the lowest base pass@1 to the highest."""
DIFFICULTY = pl.Enum(DIFFICULTY_LEVELS)
"""The dtype of a `difficulty` column: sorts hard, medium, easy."""
DIFFICULTY_THRESHOLDS: tuple[float, ...] = (1e-3, 1e-2, 1e-1)
"""Shares of tokens with the metric strictly above each: near-zero, low and the core paper's
high-divergence cut (JS > 0.1)."""
DIFFICULTY_PERCENTILES: tuple[float, ...] = (50, 90, 99)
"""Percentiles of the metric per tertile (point estimates, without intervals)."""
TIES: tuple[str, ...] = ("together", "split")


def difficulty_tertiles(
    graded: Frame,
    *,
    model: str | None = None,
    base_policy: str = "base",
    ties: Literal["together", "split"] = "together",
) -> pl.DataFrame:
    """Per prompt, the base model's pass@1 and its difficulty tertile.

    The base responses are, in `graded`: with a `policy` column (cross-sample results), the
    `base_policy` control's rows (no forced opening), which must be at one sampling; else with
    `model` given, the rows whose `model` is it; else every row (a `divscope grade` output of
    the base model's samples; a `model` column with several values then needs `model`).
    Ungraded rows (`correct` null) are skipped.

    Tertiles: prompts sorted by (pass@1, prompt_id) take positions i = 0..N−1; a prompt's
    tertile is ⌊3 (r + ½) / N⌋ + 1 (1 = hard, 3 = easy), where r is its position with
    `ties="split"` and the mean position of the prompts sharing its pass@1 with
    `ties="together"` (so equal prompts never straddle a cut; a pass@1 shared by every prompt
    puts all of them in `medium`).

    Args:
        graded: graded responses with `prompt_id` and `correct` (`divscope grade` output,
            trajectories with `correct`, or cross-sample results).
        model: the base model's `model` value, for a table holding several models' responses.
        base_policy: the base control's policy in cross-sample results.
        ties: `together` (mid-rank: equal pass@1, same tertile) or `split` (equal thirds).

    Returns:
        One row per prompt, sorted by pass@1 then prompt_id: `prompt_id`, `n_samples`,
        `n_correct`, `pass_at_1`, `tertile` (Int32, 1..3) and `difficulty` (`hard`, `medium`,
        `easy`; an Enum in that order).

    Raises:
        DivscopeError: missing columns, an unknown `ties`, `model` without a `model` column,
            several models or samplings without a choice, or no graded base response.

    >>> graded = pl.DataFrame({"prompt_id": ["a", "a", "b", "b", "c", "c", "d", "d"],
    ...     "correct": [False, False, True, False, True, False, True, True]})
    >>> difficulty_tertiles(graded)["difficulty"].to_list()
    ['hard', 'medium', 'medium', 'easy']
    >>> difficulty_tertiles(graded, ties="split")["tertile"].to_list()
    [1, 2, 2, 3]
    """
    what = "difficulty_tertiles"
    if ties not in TIES:
        raise DivscopeError(f"{what}: ties must be one of {', '.join(TIES)}, got {ties!r}.")
    lazy = checked_lazy(graded, ["prompt_id", "correct"], what=what, source="graded base responses")
    names = lazy.collect_schema().names()
    if "policy" in names:
        lazy = lazy.filter(pl.col("policy") == base_policy)
        if "force_prefix" in names:
            lazy = lazy.filter(pl.col("force_prefix").is_null())
        sampling = [c for c in SAMPLING_COLUMNS if c in names]
        samplings = collect(lazy.select(sampling).unique()) if sampling else pl.DataFrame()
        if samplings.height > 1:
            shown = "; ".join(
                ", ".join(f"{c}={format_value(v)}" for c, v in row.items())
                for row in samplings.sort(pl.all(), nulls_last=True).iter_rows(named=True)
            )
            raise DivscopeError(
                f"{what}: the `{base_policy}` control of the cross-sample results was run at "
                f"{samplings.height} samplings ({shown}); keep one sampling in the results."
            )
    elif model is not None or "model" in names:
        lazy = _one_model(lazy, names, model, what=what)
    counts = collect(
        lazy.drop_nulls("correct")
        .group_by("prompt_id")
        .agg(
            pl.len().cast(pl.Int64).alias("n_samples"),
            pl.col("correct").cast(pl.Int64).sum().alias("n_correct"),
        )
    )
    if counts.is_empty():
        where = f"`{base_policy}` control rows" if "policy" in names else "rows"
        raise DivscopeError(
            f"{what}: no graded base response ({where} with a non-null `correct`); grade the "
            "base model's samples (divscope grade) or pass cross-sample results with the "
            f"`{base_policy}` control."
        )
    n = counts.height
    rank = pl.col("_rank").mean().over("pass_at_1") if ties == "together" else pl.col("_rank")
    tertile = ((3 * (rank + 0.5) / n).floor().cast(pl.Int32) + 1).clip(1, 3)
    return (
        counts.with_columns((pl.col("n_correct") / pl.col("n_samples")).alias("pass_at_1"))
        .sort("pass_at_1", "prompt_id")
        .with_columns(pl.int_range(pl.len(), dtype=pl.Int64).cast(pl.Float64).alias("_rank"))
        .select(pl.exclude("_rank"), tertile.alias("tertile"))
        .with_columns(
            pl.col("tertile")
            .replace_strict([1, 2, 3], list(DIFFICULTY_LEVELS), return_dtype=DIFFICULTY)
            .alias("difficulty")
        )
    )


def _one_model(lazy: pl.LazyFrame, names: Sequence[str], model: str | None, *, what: str):
    """The rows of one model of a table with a `model` column."""
    if "model" not in names:
        raise DivscopeError(
            f"{what}: model={model!r} was given but the graded responses have no `model` "
            "column; leave it out when the table holds only the base model's responses."
        )
    present = collect(lazy.select(pl.col("model").unique())).sort("model")["model"].to_list()
    if model is None:
        if len(present) <= 1:
            return lazy
        raise DivscopeError(
            f"{what}: the graded responses hold several models ({', '.join(map(str, present))});"
            " name the base model (model=, --difficulty-model)."
        )
    if model not in present:
        raise DivscopeError(
            f"{what}: no response of model {model!r} in the graded responses (models: "
            f"{', '.join(map(str, present))})."
        )
    return lazy.filter(pl.col("model") == model)


@dataclass(frozen=True)
class Difficulty:
    """Sparsity, position and recovery of each difficulty tertile."""

    metric: str
    """The divergence column."""
    thresholds: tuple[float, ...]
    """The `share_above_<t>` thresholds."""
    percentiles: tuple[float, ...]
    """The `p<q>` percentiles."""
    sparsity: pl.DataFrame
    """One row per tertile present in the token table: `difficulty`, `n_prompts`,
    `pass_at_1_min`, `pass_at_1_max` (base pass@1 range of those prompts), `n_responses`,
    `n_tokens`, `mean` (+ `_low`, `_high`), per threshold t `share_above_<t>` (+ `_low`,
    `_high`: share of tokens with metric > t, pooled over the tertile's tokens) and the
    percentiles `p<q>`."""
    contrast: pl.DataFrame
    """`easy − hard` of each statistic with an interval: `statistic` (`mean`,
    `share_above_<t>`), `easy`, `hard`, `difference`, `difference_low`, `difference_high`
    (null when a tertile is absent)."""
    positional: pl.DataFrame
    """`positional_profile` per tertile: `difficulty`, then its columns."""
    early_density: pl.DataFrame
    """`early_density` of each tertile's own top 1%: `difficulty`, then its columns."""
    recovery: pl.DataFrame | None
    """`cross_sampling_curve` on each tertile's prompts: `difficulty`, then its columns; None
    without cross-sample results."""
    n_unrated_prompts: int
    """Prompts of the token table without a tertile (left out)."""
    notes: tuple[str, ...]
    """What was left out, and why."""


def by_difficulty(
    tokens: Frame,
    tertiles: pl.DataFrame,
    *,
    results: Frame | None = None,
    metric: str = "js",
    thresholds: Sequence[float] = DIFFICULTY_THRESHOLDS,
    percentiles: Sequence[float] = DIFFICULTY_PERCENTILES,
    bins: int = 5,
    reference: Reference = None,
    recovery: Recovery = Recovery(),  # noqa: B008 (frozen, hashable)
) -> Difficulty:
    """Sparsity, positional statistics and recovery per difficulty tertile.

    A prompt's tertile comes from `tertiles` (`difficulty_tertiles`); prompts without one are
    left out and counted. Shares and means pool the tertile's tokens (Σ over prompts / Σ
    tokens); their intervals resample the token table's prompts within each tertile, one set of
    weights for every statistic (so `contrast` is paired). Percentiles have no interval. The
    recovery of a tertile is `cross_sampling_curve` on its prompts (its own bootstrap of them).

    Args:
        tokens: a token table with `prompt_id`, `sample_id`, `position`, `n_tokens`, `metric`.
        tertiles: per prompt its `difficulty` (`difficulty_tertiles`).
        results: cross-sample results for the recovery per tertile.
        metric: the divergence column.
        thresholds: a token counts as divergent when its metric is strictly above.
        percentiles: percentiles of the metric per tertile.
        bins: relative-position bins of `positional_profile` and `early_density`.
        reference: the recovery's upper bound, as in `cross_sampling_curve`.
        recovery: the recovery's measure and controls, and the bootstrap of prompts (its
            resamples, seed and coverage) of every interval.

    Returns:
        A `Difficulty`.

    Raises:
        DivscopeError: missing columns, or no prompt of the token table with a tertile.

    >>> tertiles = pl.DataFrame({"prompt_id": ["a", "b"],
    ...     "difficulty": pl.Series(["hard", "easy"], dtype=DIFFICULTY)})
    >>> tokens = pl.DataFrame({"prompt_id": ["a", "a", "b", "b"], "sample_id": [0] * 4,
    ...     "position": [0, 1, 0, 1], "n_tokens": [2] * 4, "js": [0.3, 0.0, 0.0, 0.0]})
    >>> result = by_difficulty(tokens, tertiles, recovery=Recovery(n_boot=10))
    >>> result.sparsity.select("difficulty", "share_above_0.1").rows()
    [('hard', 0.5), ('easy', 0.0)]
    """
    what = "by_difficulty"
    checked_lazy(tertiles, ["prompt_id", "difficulty"], what=what, source="difficulty tertiles")
    levels = tertiles.select(
        "prompt_id", pl.col("difficulty").cast(pl.String).cast(DIFFICULTY)
    ).unique()
    repeated = levels.filter(pl.col("prompt_id").is_duplicated())["prompt_id"].sort()
    if repeated.len():
        raise DivscopeError(
            f"{what}: prompt {repeated[0]!r} has several tertiles in the difficulty tertiles; "
            "give each prompt one (difficulty_tertiles)."
        )
    required = ["prompt_id", "sample_id", "position", "n_tokens", metric]
    lazy = checked_lazy(tokens, required, what=what).select(required).drop_nulls(metric)
    # Only the prompts are collected; the tokens stay a (streamed) LazyFrame with a tertile.
    prompts = collect(lazy.select(pl.col("prompt_id").unique()))
    if prompts.is_empty():
        raise DivscopeError(f"{what}: the token table has no value of {metric!r}.")
    known = prompts.join(levels, on="prompt_id", how="inner")
    n_unrated = prompts.height - known.height
    if known.is_empty():
        raise DivscopeError(
            f"{what}: no prompt of the token table has a difficulty tertile; compute the "
            "tertiles from graded base responses to the same prompts."
        )
    tertile = pl.coalesce(
        pl.when(pl.col("prompt_id").is_in(part["prompt_id"].implode())).then(
            pl.lit(level, dtype=DIFFICULTY)
        )
        for (level,), part in known.partition_by("difficulty", as_dict=True).items()
    )
    rated = lazy.with_columns(tertile.alias("difficulty")).drop_nulls("difficulty")
    notes = []
    if n_unrated:
        notes.append(f"{n_unrated} prompt(s) of the token table have no tertile: left out.")
    pass_rates = (
        tertiles.select("prompt_id", "pass_at_1") if "pass_at_1" in tertiles.columns else None
    )
    table, contrast = _sparsity(
        rated,
        pass_rates,
        metric,
        thresholds,
        percentiles,
        recovery.n_boot,
        recovery.seed,
        recovery.confidence,
    )
    present = [level for level in DIFFICULTY_LEVELS if level in set(known["difficulty"])]
    parts = {level: rated.filter(pl.col("difficulty") == level) for level in present}
    positional = _per_level(parts, lambda part: positional_profile(part, metric, bins=bins))
    early = _per_level(parts, lambda part: early_density(part, metric, top_share=0.01, bins=bins))
    recovered = None
    if results is not None:
        recovered, recovery_notes = _recovery(
            results,
            levels,
            reference=reference,
            recovery_at=recovery.recovery_at,
            base_policy=recovery.base_policy,
            rl_policy=recovery.rl_policy,
            n_boot=recovery.n_boot,
            seed=recovery.seed,
            confidence=recovery.confidence,
        )
        notes += recovery_notes
    return Difficulty(
        metric=metric,
        thresholds=tuple(thresholds),
        percentiles=tuple(percentiles),
        sparsity=table,
        contrast=contrast,
        positional=positional,
        early_density=early,
        recovery=recovered,
        n_unrated_prompts=n_unrated,
        notes=tuple(notes),
    )


def _per_level(
    parts: dict[str, pl.LazyFrame], analysis: Callable[[pl.LazyFrame], pl.DataFrame]
) -> pl.DataFrame:
    """`analysis` of each tertile's tokens, stacked under a `difficulty` column."""
    return pl.concat(
        [
            analysis(part).select(pl.lit(level, DIFFICULTY).alias("difficulty"), pl.all())
            for level, part in parts.items()
        ]
    )


def _sparsity(
    rated: pl.LazyFrame,
    pass_rates: pl.DataFrame | None,
    metric: str,
    thresholds: Sequence[float],
    percentiles: Sequence[float],
    n_boot: int,
    seed: int,
    confidence: float,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The per-tertile sparsity table and the paired `easy − hard` contrasts."""
    names = ["mean", *(f"share_above_{t:g}" for t in thresholds)]
    sums = [pl.col(metric).cast(pl.Float64).sum().alias("mean")]
    sums += [(pl.col(metric) > t).sum().cast(pl.Float64).alias(n) for t, n in
             zip(thresholds, names[1:], strict=True)]  # fmt: skip
    per_prompt = collect(
        rated.group_by("prompt_id", "difficulty").agg(
            pl.len().cast(pl.Float64).alias("_tokens"),
            pl.col("sample_id").n_unique().alias("_responses"),
            *sums,
        )
    ).sort("prompt_id")
    codes = per_prompt["difficulty"].to_physical().to_numpy()
    bootstrap = PairedBootstrap.drawn(codes, n_boot=n_boot, seed=seed)
    counts = per_prompt["_tokens"].to_numpy()
    resampled: dict[tuple[str, str], Resampled] = {}
    rows = []
    for code, level in enumerate(DIFFICULTY_LEVELS):
        members = codes == code
        if not members.any():
            continue
        part = per_prompt.filter(members)
        tokens = rated.filter(pl.col("difficulty") == level)
        row = {
            "difficulty": level,
            "n_prompts": part.height,
            "pass_at_1_min": None,
            "pass_at_1_max": None,
            "n_responses": int(part["_responses"].sum()),
            "n_tokens": int(part["_tokens"].sum()),
        }
        if pass_rates is not None:
            rates = pass_rates.join(part.select("prompt_id"), on="prompt_id")["pass_at_1"]
            row |= {"pass_at_1_min": rates.min(), "pass_at_1_max": rates.max()}
        for name in names:
            totals = np.where(members, per_prompt[name].to_numpy(), 0.0)
            value = bootstrap.ratio(totals, np.where(members, counts, 0.0))
            resampled[level, name] = value
            row |= interval_columns(name, value.interval(confidence))
        quantiles = sparsity(tokens, metric, thresholds=(), percentiles=percentiles).percentiles
        row |= {percentile_label(q): v for q, v in quantiles.items()}
        rows.append(row)
    schema = {
        "difficulty": DIFFICULTY,
        "n_prompts": pl.Int64(),
        "pass_at_1_min": pl.Float64(),
        "pass_at_1_max": pl.Float64(),
        "n_responses": pl.Int64(),
        "n_tokens": pl.Int64(),
    }
    for name in names:
        schema |= {f"{name}{end}": pl.Float64() for end in ("", "_low", "_high")}
    schema |= {percentile_label(q): pl.Float64() for q in percentiles}
    contrast = []
    for name in names:
        easy, hard = resampled.get(("easy", name)), resampled.get(("hard", name))
        difference = None if easy is None or hard is None else (easy - hard).interval(confidence)
        contrast.append(
            {
                "statistic": name,
                "easy": None if easy is None else easy.estimate,
                "hard": None if hard is None else hard.estimate,
                **interval_columns("difference", difference),
            }
        )
    contrast_schema = {"statistic": pl.String(), "easy": pl.Float64(), "hard": pl.Float64()}
    contrast_schema |= {f"difference{end}": pl.Float64() for end in ("", "_low", "_high")}
    return pl.DataFrame(rows, schema=schema), pl.DataFrame(contrast, schema=contrast_schema)


def _recovery(
    results: Frame, levels: pl.DataFrame, **curve_options
) -> tuple[pl.DataFrame | None, list[str]]:
    """`cross_sampling_curve` of each tertile's prompts, stacked; notes on what was left out."""
    lazy = checked_lazy(results, ["prompt_id"], what="by_difficulty", source="cross-sample results")
    prompts = collect(lazy.select(pl.col("prompt_id").unique()))
    rated = prompts.join(levels, on="prompt_id", how="inner")
    notes = []
    unrated = prompts.height - rated.height
    if unrated:
        notes.append(f"{unrated} prompt(s) of the cross-sample results have no tertile: left out.")
    curves = []
    for level in DIFFICULTY_LEVELS:
        chosen = rated.filter(pl.col("difficulty") == level)["prompt_id"]
        if chosen.is_empty():
            notes.append(f"recovery: no prompt of the cross-sample results is {level}.")
            continue
        subset = lazy.filter(pl.col("prompt_id").is_in(chosen.implode()))
        curve = cross_sampling_curve(subset, **curve_options)
        curves.append(curve.select(pl.lit(level, DIFFICULTY).alias("difficulty"), pl.all()))
    return (pl.concat(curves, how="diagonal_relaxed") if curves else None), notes
