"""Accuracy-vs-budget curves of cross-sampling, the takeover knee, and pass@k curves (Table 1).

Input: cross-sample results, one row per generated response (docs/contracts.md, "Cross-sample
results").
A setting is a policy, a budget and the values of the `SETTING_COLUMNS` present (`eps` and the
policy parameters); responses of different settings are never pooled.
Accuracy is mean@n: the share of a prompt's responses that are correct, averaged over prompts.
Every interval resamples prompts with one shared set of bootstrap weights, so the intervals of
different policies and the recovery's base/RL controls are paired.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from divscope.analyses._frames import Frame, checked_lazy
from divscope.analyses.stats import (
    Interval,
    pass_at_k,
    percentile_interval,
    problem_bootstrap_weights,
)
from divscope.errors import DivscopeError
from divscope.schema import SETTING_COLUMNS

CURVE_COLUMNS: tuple[str, ...] = (
    "prompt_id", "policy", "budget", "correct", "n_tokens", "n_switches", "n_effective",
)  # fmt: skip


def _weighted_mean(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Row-wise weighted mean of `values` [n] under `weights` [rows, n]; NaN for zero weight."""
    total = weights.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, weights @ values / total, np.nan)


def cross_sampling_curve(
    results: Frame,
    *,
    base_policy: str = "base",
    rl_policy: str = "rl",
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> pl.DataFrame:
    """Per setting: accuracy, recovery of the RL gain, and switched-token shares.

    A setting is a policy, a budget and the values of every `SETTING_COLUMNS` column present
    (`eps`, `rate`, `tau`, ...; a null is a value of its own), so a policy run at two `eps`
    gives two rows per budget.

    recovery = (acc − acc_base) / (acc_rl − acc_base), where the controls are the responses of
    `base_policy` and `rl_policy` (all their budgets and settings pooled) on the same prompts;
    0 means no gain over the base model, 1 the full RL accuracy. Ungraded responses (`correct`
    null) are skipped.

    Args:
        results: cross-sample results with `prompt_id`, `policy`, `budget`, `correct`,
            `n_tokens`, `n_switches`, `n_effective`, and optionally setting columns.
        base_policy: the policy name of the base-model control.
        rl_policy: the policy name of the RL-model control.
        n_boot: bootstrap resamples of prompts.
        seed: seed of the bootstrap.
        confidence: coverage of the intervals.

    Returns:
        One row per setting, sorted by `policy`, the setting columns (nulls last) and
        `budget`: `policy`, `budget`, the setting columns present in `results` (in
        `SETTING_COLUMNS` order, with their input types), `n_prompts`, `n_responses`,
        `accuracy`, `accuracy_low`, `accuracy_high`, `recovery`, `recovery_low`,
        `recovery_high` (null without both controls or when they tie), `switch_share_pooled`
        (Σ n_switches / Σ n_tokens), `switch_share_mean` (mean of per-response shares), and
        `effective_share_pooled`, `effective_share_mean` (the same for `n_effective`).

    >>> results = pl.DataFrame({"prompt_id": ["a", "a", "b", "b"] * 3,
    ...     "policy": ["base"] * 4 + ["rl"] * 4 + ["forward"] * 4, "budget": [-1] * 8 + [2] * 4,
    ...     "correct": [False, False, True, False, True, True, True, True,
    ...                 True, False, True, True],
    ...     "n_tokens": [10] * 12, "n_switches": [0] * 8 + [1, 2, 0, 1], "n_effective": [0] * 12})
    >>> curve = cross_sampling_curve(results, n_boot=20)
    >>> curve.filter(policy="forward").select("accuracy", "recovery", "switch_share_pooled").row(0)
    (0.75, 0.6666666666666666, 0.1)
    """
    lazy = checked_lazy(
        results, CURVE_COLUMNS, what="cross_sampling_curve", source="cross-sample results"
    )
    settings = [c for c in SETTING_COLUMNS if c in lazy.collect_schema().names()]
    keys = ["policy", "budget", *settings]
    graded = lazy.select(*CURVE_COLUMNS, *settings).drop_nulls("correct")
    per_prompt = (
        graded.group_by(*keys, "prompt_id")
        .agg(
            pl.col("correct").mean().alias("accuracy"),
            pl.len().alias("n_responses"),
            pl.col("n_switches").sum().alias("switches"),
            pl.col("n_effective").sum().alias("effective"),
            pl.col("n_tokens").sum().alias("tokens"),
            (pl.col("n_switches") / pl.col("n_tokens")).filter(pl.col("n_tokens") > 0).alias("sw"),
            (pl.col("n_effective") / pl.col("n_tokens")).filter(pl.col("n_tokens") > 0).alias("ef"),
        )
        .collect()
    )
    if per_prompt.is_empty():
        raise DivscopeError("cross_sampling_curve: no graded responses (all `correct` are null).")
    prompts = per_prompt["prompt_id"].unique().sort()
    index = {p: i for i, p in enumerate(prompts.to_list())}
    weights = problem_bootstrap_weights(len(index), n_boot=n_boot, seed=seed)

    def accuracies(policy: str) -> np.ndarray:
        """Accuracy per prompt of a control policy (budgets and settings pooled), NaN where
        absent."""
        control = (
            graded.filter(pl.col("policy") == policy)
            .group_by("prompt_id")
            .agg(pl.col("correct").mean())
            .collect()
        )
        values = np.full(len(index), np.nan)
        for prompt_id, accuracy in control.iter_rows():
            values[index[prompt_id]] = accuracy
        return values

    base, rl = accuracies(base_policy), accuracies(rl_policy)
    rows = []
    for key, cell in per_prompt.group_by(*keys, maintain_order=True):
        where = np.array([index[p] for p in cell["prompt_id"]])
        accuracy = cell["accuracy"].to_numpy()
        acc = percentile_interval(
            accuracy.mean(), _weighted_mean(accuracy, weights[:, where]), confidence
        )
        recovery = _recovery(accuracy, base[where], rl[where], weights[:, where], confidence)
        switch_shares = cell["sw"].explode().drop_nulls()
        effective_shares = cell["ef"].explode().drop_nulls()
        tokens = cell["tokens"].sum()
        rows.append(
            {
                **dict(zip(keys, key, strict=True)),
                "n_prompts": cell.height,
                "n_responses": int(cell["n_responses"].sum()),
                "accuracy": acc.estimate,
                "accuracy_low": acc.low,
                "accuracy_high": acc.high,
                "recovery": recovery.estimate if recovery else None,
                "recovery_low": recovery.low if recovery else None,
                "recovery_high": recovery.high if recovery else None,
                "switch_share_pooled": cell["switches"].sum() / tokens if tokens else None,
                "switch_share_mean": switch_shares.mean(),
                "effective_share_pooled": cell["effective"].sum() / tokens if tokens else None,
                "effective_share_mean": effective_shares.mean(),
            }
        )
    types = {c: per_prompt.schema[c] for c in keys}
    return pl.DataFrame(rows, schema_overrides=types).sort(
        "policy", *settings, "budget", nulls_last=True
    )


def setting_labels(curve: pl.DataFrame, *, separator: str = "=") -> pl.Series:
    """Per row of a curve, the setting columns that vary within its policy, with their values.

    Only the columns of `SETTING_COLUMNS` that take more than one value (null counts as one)
    among the policy's rows are named, so a policy run at a single setting gets "".

    Args:
        curve: a frame with `policy` and setting columns, e.g. `cross_sampling_curve`'s.
        separator: between a column's name and its value.

    Returns:
        A String series `setting`, aligned with `curve`'s rows.

    >>> curve = pl.DataFrame({"policy": ["forward", "forward", "random"],
    ...     "eps": [0.01, 0.05, None], "rate": [None, None, 0.1]})
    >>> setting_labels(curve).to_list()
    ['eps=0.01', 'eps=0.05', '']
    """
    settings = [c for c in SETTING_COLUMNS if c in curve.columns]
    varying = {
        policy: [c for c in settings if rows[c].n_unique() > 1]
        for (policy,), rows in curve.group_by("policy")
    }
    labels = [
        ", ".join(f"{c}{separator}{_format_value(row[c])}" for c in varying[row["policy"]])
        for row in curve.iter_rows(named=True)
    ]
    return pl.Series("setting", labels, dtype=pl.String())


def _format_value(value: object) -> str:
    """A setting value as a label shows it: floats in short form, null as `none`."""
    if value is None:
        return "none"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _recovery(
    accuracy: np.ndarray,
    base: np.ndarray,
    rl: np.ndarray,
    weights: np.ndarray,
    confidence: float,
) -> Interval | None:
    """Recovery of the RL gain on the prompts that all three share, with a paired bootstrap."""
    shared = ~np.isnan(base) & ~np.isnan(rl)
    if not shared.any():
        return None
    accuracy, base, rl, weights = accuracy[shared], base[shared], rl[shared], weights[:, shared]
    gap = rl.mean() - base.mean()
    if gap == 0:
        return None
    resampled_gap = _weighted_mean(rl, weights) - _weighted_mean(base, weights)
    with np.errstate(invalid="ignore", divide="ignore"):
        resamples = np.where(
            resampled_gap != 0,
            (_weighted_mean(accuracy, weights) - _weighted_mean(base, weights)) / resampled_gap,
            np.nan,
        )
    return percentile_interval((accuracy.mean() - base.mean()) / gap, resamples, confidence)


def pooled_controls(results: Frame, controls: Sequence[str] = ("base", "rl")) -> pl.LazyFrame:
    """Cross-sample results with the control policies' budgets −1 and their settings null.

    `cross_sampling_curve` reports one row per setting (policy, budget, `SETTING_COLUMNS`); the
    single-model controls have no budget or policy parameter, so pooling them gives one
    reference accuracy per control, as the recovery uses.

    >>> frame = pl.DataFrame({"policy": ["base", "forward"], "budget": [4, 4]})
    >>> pooled_controls(frame).collect()["budget"].to_list()
    [-1, 4]
    """
    lazy = checked_lazy(results, ["policy", "budget"], what="pooled_controls", source="results")
    is_control = pl.col("policy").is_in(list(controls))
    schema = lazy.collect_schema()
    settings = [c for c in SETTING_COLUMNS if c in schema.names()]
    return lazy.with_columns(
        pl.when(is_control).then(-1).otherwise("budget").cast(schema["budget"]).alias("budget"),
        *(pl.when(is_control).then(None).otherwise(pl.col(c)).alias(c) for c in settings),
    )


@dataclass(frozen=True)
class TakeoverKnee:
    """Accuracy against the share of taken-over tokens, and where extra takeovers stop paying."""

    policy: str
    """The takeover policy, e.g. `gated`."""
    curve: pl.DataFrame
    """One row per setting: `budget` and the `SETTING_COLUMNS` present (`eps`, `tau`, ...),
    `switch_share` (Σ n_switches / Σ n_tokens), `accuracy`, `accuracy_low`, `accuracy_high`,
    `recovery`, `n_responses`; sorted by `switch_share`, then the setting."""
    knee_index: int | None
    """Row of `curve` at the knee; None with fewer than three settings or a flat curve."""
    base_accuracy: float | None
    """Accuracy of the base control (None when absent)."""
    rl_accuracy: float | None
    """Accuracy of the RL control (None when absent)."""


def takeover_knee(
    results: Frame,
    policy: str = "gated",
    *,
    base_policy: str = "base",
    rl_policy: str = "rl",
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> TakeoverKnee:
    """The takeover paper's knee: accuracy vs share of taken-over tokens across settings.

    Each setting of `policy` (its `budget` and the `SETTING_COLUMNS` present, as in
    `cross_sampling_curve`) is one point. The knee is the Kneedle point of the curve sorted
    by takeover share: with share and accuracy rescaled to [0, 1] between the first and the last
    point, the point furthest above the chord (largest accuracy − share).

    Args:
        results: cross-sample results (docs/contracts.md, "Cross-sample results"), holding
            `policy` rows and the controls.
        policy: the takeover policy.
        base_policy: the base-model control.
        rl_policy: the RL-model control.
        n_boot: bootstrap resamples of prompts.
        seed: seed of the bootstrap.
        confidence: coverage of the intervals.

    Returns:
        A `TakeoverKnee`.

    Raises:
        DivscopeError: no graded responses of `policy`.
    """
    lazy = checked_lazy(results, CURVE_COLUMNS, what="takeover_knee", source="cross-sample results")
    settings = [c for c in SETTING_COLUMNS if c in lazy.collect_schema().names()]
    graded = lazy.filter((pl.col("policy") == policy) & pl.col("correct").is_not_null())
    if graded.select(pl.len()).collect().item() == 0:
        present = lazy.select(pl.col("policy").unique().sort()).collect()["policy"].to_list()
        raise DivscopeError(
            f"takeover_knee: no graded responses of policy {policy!r} in the cross-sample "
            f"results (policies: {', '.join(map(str, present)) or 'none'}); pass `policy=`."
        )
    # The policy and both controls in one curve, so that one bootstrap pairs them all.
    chosen = lazy.filter(pl.col("policy").is_in([policy, base_policy, rl_policy]))
    curve = cross_sampling_curve(
        pooled_controls(chosen, (base_policy, rl_policy)),
        base_policy=base_policy,
        rl_policy=rl_policy,
        n_boot=n_boot,
        seed=seed,
        confidence=confidence,
    )
    points = (
        curve.filter(pl.col("policy") == policy)
        .select(
            "budget",
            *settings,
            pl.col("switch_share_pooled").alias("switch_share"),
            "accuracy",
            "accuracy_low",
            "accuracy_high",
            "recovery",
            "n_responses",
        )
        .sort("switch_share", "budget", *settings, nulls_last=True)
    )

    def control(name: str) -> float | None:
        rows = curve.filter(pl.col("policy") == name)
        return float(rows["accuracy"][0]) if rows.height else None

    return TakeoverKnee(
        policy=policy,
        curve=points,
        knee_index=_kneedle(points["switch_share"].to_numpy(), points["accuracy"].to_numpy()),
        base_accuracy=control(base_policy),
        rl_accuracy=control(rl_policy),
    )


def _kneedle(x: np.ndarray, y: np.ndarray) -> int | None:
    """Index of the point furthest above the chord of an increasing curve, rescaled to [0, 1]."""
    if x.size < 3 or x[-1] == x[0] or y[-1] == y[0]:
        return None
    gain = (y - y[0]) / (y[-1] - y[0]) - (x - x[0]) / (x[-1] - x[0])
    index = int(np.argmax(gain))
    return index if gain[index] > 0 else None


def pass_at_k_curve(
    results: Frame,
    ks: Sequence[int] | None = None,
    *,
    by: Sequence[str] = ("policy", "budget"),
) -> pl.DataFrame:
    """Mean unbiased pass@k over prompts, per group (e.g. per policy and budget).

    Args:
        results: graded responses with `prompt_id`, `correct` and the `by` columns.
        ks: the k values; default the powers of two up to the fewest samples of any prompt.
        by: the grouping columns (may be empty).

    Returns:
        One row per group and k: the `by` columns, `k`, `pass_at_k`, `n_prompts`.

    Raises:
        DivscopeError: a k exceeds the samples of some prompt in a group.

    >>> results = pl.DataFrame({"prompt_id": ["a"] * 4 + ["b"] * 4,
    ...                         "correct": [True, False, False, False] + [False] * 4})
    >>> pass_at_k_curve(results, by=())["pass_at_k"].to_list()
    [0.125, 0.25, 0.5]
    """
    lazy = checked_lazy(
        results, ["prompt_id", "correct", *by], what="pass_at_k_curve", source="results"
    )
    counts = (
        lazy.drop_nulls("correct")
        .group_by(*by, "prompt_id")
        .agg(pl.len().alias("n"), pl.col("correct").sum().alias("c"))
        .collect()
    )
    if counts.is_empty():
        raise DivscopeError("pass_at_k_curve: no graded responses (all `correct` are null).")
    if ks is None:
        fewest = int(counts["n"].min())
        ks = [2**i for i in range(fewest.bit_length())]
    rows = []
    groups = counts.group_by(*by, maintain_order=True) if by else [((), counts)]
    for key, group in groups:
        pairs = list(zip(group["n"].to_list(), group["c"].to_list(), strict=True))
        for k in ks:
            estimates = [pass_at_k(n, c, k) for n, c in pairs]
            rows.append(
                {
                    **dict(zip(by, key, strict=True)),
                    "k": k,
                    "pass_at_k": float(np.mean(estimates)),
                    "n_prompts": len(pairs),
                }
            )
    return pl.DataFrame(rows).sort(*by, "k") if by else pl.DataFrame(rows)
