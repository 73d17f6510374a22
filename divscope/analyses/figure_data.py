"""Small analyses that feed the figures: KDE curves, ROC curves, the takeover knee, samples.

They follow the package's rules (frame in, frame or frozen dataclass out, no I/O) and exist so
that `divscope.figures` only draws. Everything that samples rows takes a `seed` and reports how
many rows it sampled, so that a figure can say so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy.stats import gaussian_kde

from divscope.analyses._frames import Frame, checked_lazy
from divscope.analyses.cross_sampling import CURVE_COLUMNS, cross_sampling_curve
from divscope.analyses.failure import graded_scores
from divscope.analyses.shift import ENTROPY_COLUMNS, entropy_groups
from divscope.analyses.tokens import _ranked_words
from divscope.errors import DivscopeError
from divscope.schema import SETTING_COLUMNS


@dataclass(frozen=True)
class Sample:
    """A seeded random sample of rows, and how many rows it was drawn from."""

    rows: pl.DataFrame
    """The sampled rows (all rows when there are at most `max_rows`)."""
    n_total: int
    """Rows that qualified before sampling."""
    seed: int
    """Seed of the sample."""

    @property
    def sampled(self) -> bool:
        """Whether `rows` is a strict subset of the qualifying rows."""
        return self.rows.height < self.n_total


def sample_rows(lazy: pl.LazyFrame, *, max_rows: int, seed: int) -> Sample:
    """At most `max_rows` rows of `lazy`, drawn without replacement with a fixed seed.

    >>> sample_rows(pl.LazyFrame({"x": range(10)}), max_rows=3, seed=0).rows.height
    3
    """
    if max_rows < 1:
        raise DivscopeError(f"sample_rows: max_rows must be >= 1, got {max_rows}.")
    frame = lazy.collect()
    rows = frame.sample(max_rows, seed=seed) if frame.height > max_rows else frame
    return Sample(rows=rows, n_total=frame.height, seed=seed)


def high_divergence_sample(
    tokens: Frame,
    columns: Sequence[str],
    metric: str = "js",
    *,
    threshold: float = 0.1,
    max_rows: int = 20_000,
    seed: int = 0,
) -> Sample:
    """A seeded sample of `columns` at positions whose metric is strictly above `threshold`.

    >>> frame = pl.DataFrame({"js": [0.0, 0.5, 0.7], "p_top1_rl": [0.9, 0.8, 0.6]})
    >>> high_divergence_sample(frame, ["p_top1_rl"]).n_total
    2
    """
    lazy = checked_lazy(tokens, [metric, *columns], what="high_divergence_sample")
    selected = lazy.filter(pl.col(metric) > threshold).select(columns).drop_nulls()
    return sample_rows(selected, max_rows=max_rows, seed=seed)


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


def roc_points(scores: np.ndarray, positive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """False- and true-positive rates at every distinct score threshold, from (0, 0) to (1, 1).

    >>> fpr, tpr = roc_points(np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1], bool))
    >>> fpr.tolist(), tpr.tolist()
    ([0.0, 0.0, 0.5, 0.5, 1.0], [0.0, 0.5, 0.5, 1.0, 1.0])
    """
    order = np.argsort(-scores, kind="stable")
    ordered_scores, ordered_positive = scores[order], positive[order]
    # The last index of each run of equal scores: ties move the curve diagonally.
    ends = np.flatnonzero(np.r_[ordered_scores[1:] != ordered_scores[:-1], True])
    true_positives = np.cumsum(ordered_positive)[ends]
    false_positives = (ends + 1) - true_positives
    n_positive, n_negative = positive.sum(), (~positive).sum()
    if n_positive == 0 or n_negative == 0:
        raise DivscopeError("roc_points: needs both positive and negative examples.")
    return (
        np.r_[0.0, false_positives / n_negative],
        np.r_[0.0, true_positives / n_positive],
    )


def failure_roc(tokens: Frame, metric: str = "js", *, top_n: int = 100) -> pl.DataFrame:
    """ROC curves for predicting a wrong answer: the divergence score and base entropy.

    The scores are those of `failure_auroc` (`response_scores`); the area under each curve is
    its AUROC.

    Args:
        tokens: a token table with `correct` filled in (ungraded responses are skipped).
        metric: the divergence column.
        top_n: values averaged per response.

    Returns:
        Columns `predictor` (`metric` or `entropy_base`), `false_positive_rate`,
        `true_positive_rate`; failures are the positive class.

    Raises:
        DivscopeError: no graded responses, or all of them correct or all wrong.

    >>> frame = pl.DataFrame({"prompt_id": ["a", "b"], "sample_id": [0, 0],
    ...     "correct": [True, False], "js": [0.1, 0.5], "entropy_base": [1.0, 1.0]})
    >>> failure_roc(frame).filter(predictor="js")["true_positive_rate"].to_list()
    [0.0, 1.0, 1.0]
    """
    scores, failed = graded_scores(tokens, metric, top_n=top_n, what="failure_roc")
    frames = []
    for predictor, column in ((metric, "score"), ("entropy_base", "entropy_score")):
        fpr, tpr = roc_points(scores[column].to_numpy(), failed)
        frames.append(
            pl.DataFrame(
                {"predictor": predictor, "false_positive_rate": fpr, "true_positive_rate": tpr}
            )
        )
    return pl.concat(frames)


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
        results: cross-sample results (DESIGN contract), holding `policy` rows and the controls.
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


def most_frequent_words(tokens: Frame, *, top: int = 3) -> list[str]:
    """The `top` most frequent words (normalized as in `word_frequencies`), ties by word.

    >>> frame = pl.DataFrame({"token": [" the", "The", " x", "\\n", " y", " x"]})
    >>> most_frequent_words(frame, top=2)
    ['the', 'x']
    """
    lazy = checked_lazy(tokens, ["token"], what="most_frequent_words").select("token")
    return _ranked_words(lazy).head(top).collect()["word"].to_list()
