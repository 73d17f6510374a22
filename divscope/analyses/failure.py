"""Does divergence predict a wrong answer? Failure-prediction AUROC (the takeover paper).

Each response is scored by the mean of its `top_n` largest divergence values; the AUROC of that
score for `correct == False` is compared with the same statistic of base entropy. Intervals come
from the problem-level bootstrap (responses to one prompt are resampled together); `failure_roc`
gives the ROC curves whose areas these AUROCs are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from divscope.analyses._frames import Frame, checked_lazy
from divscope.analyses._streaming import value_limit
from divscope.errors import DivscopeError
from divscope.estimators import (
    Interval,
    auroc,
    percentile_interval,
    problem_bootstrap_weights,
    weighted_auroc,
)


@dataclass(frozen=True)
class FailureAUROC:
    """AUROC of per-response scores for predicting a wrong answer."""

    metric: str
    """The divergence column."""
    top_n: int
    """Each response's score is the mean of its `top_n` largest values."""
    n_responses: int
    """Graded responses used."""
    n_failures: int
    """Responses with `correct == False` (the positive class)."""
    n_prompts: int
    """Prompts (the bootstrap's resampling unit)."""
    divergence: Interval
    """AUROC of the top-n mean of `metric`, with its bootstrap interval."""
    entropy: Interval
    """AUROC of the top-n mean of `entropy_base`, the baseline predictor."""


def response_scores(tokens: Frame, metric: str = "js", *, top_n: int = 100) -> pl.DataFrame:
    """Per response: the mean of its `top_n` largest `metric` and `entropy_base` values.

    Out of core: the table is read in batches, each cut to its `top_n` largest values per
    response, and the partial lists merged, so memory holds O(responses · top_n) values, never
    the rows. The means are summed in float64 and rounded as polars' own (Float32 for a Float32
    column).

    Args:
        tokens: a token table with the response key, `entropy_base` and `correct`.
        metric: the divergence column.
        top_n: values averaged per response (all of them in a shorter response).

    Returns:
        One row per response: `prompt_id`, `sample_id`, `correct`, `score` (from `metric`),
        `entropy_score` (from `entropy_base`), sorted by the key.

    >>> frame = pl.DataFrame({"prompt_id": ["a"] * 3, "sample_id": [0] * 3, "correct": [True] * 3,
    ...                       "js": [0.1, 0.5, 0.3], "entropy_base": [1.0, 1.0, 4.0]})
    >>> response_scores(frame, top_n=2).select("score", "entropy_score").row(0)
    (0.4, 2.5)
    """
    if top_n < 1:
        raise DivscopeError(f"failure_auroc: top_n must be >= 1, got {top_n}.")
    required = ["prompt_id", "sample_id", "correct", metric, "entropy_base"]
    lazy = checked_lazy(tokens, required, what="failure_auroc")
    key = ["prompt_id", "sample_id"]
    scored = {"score": metric, "entropy_score": "entropy_base"}

    def largest(lists: bool) -> list[pl.Expr]:
        """`correct` and the `top_n` largest values of each score per response, of the token
        rows or of lists of such values."""
        values = {
            name: pl.col(name).list.explode(keep_nulls=False, empty_as_null=False)
            if lists
            else pl.col(column).drop_nulls()
            for name, column in scored.items()
        }
        correct = pl.col("correct") if lists else pl.col("correct").cast(pl.Boolean)
        return [correct.first(), *(v.top_k(top_n).alias(name) for name, v in values.items())]

    # The top n of a response are the top n of its parts' top n: each batch of rows is cut down
    # to at most `top_n` values per response, and the partial lists are merged whenever they
    # outgrow the merged ones (so memory holds O(responses · top_n) values, never the rows).
    selected = lazy.select(required)
    merged = pl.DataFrame(schema=selected.collect_schema()).group_by(key).agg(largest(False))
    pending: list[pl.DataFrame] = []
    for batch in selected.collect_batches(chunk_size=min(1 << 17, value_limit())):
        pending.append(batch.group_by(key, maintain_order=True).agg(largest(False)))
        if sum(part.height for part in pending) > max(merged.height, value_limit() >> 12):
            merged = _merge([merged, *pending], key, largest(True))
            pending = []
    # Means as polars' own of a Float32 column: summed in float64, rounded to Float32.
    schema = selected.collect_schema()
    means = [
        pl.col(name)
        .cast(pl.List(pl.Float64))
        .list.sort(descending=True)
        .list.mean()
        .cast(pl.Float32 if schema[column] == pl.Float32 else pl.Float64)
        for name, column in scored.items()
    ]
    return _merge([merged, *pending], key, largest(True)).select(*key, "correct", *means).sort(key)


def _merge(parts: list[pl.DataFrame], key: list[str], aggs: list[pl.Expr]) -> pl.DataFrame:
    """Partial per-response top lists, merged into one row per response."""
    return pl.concat(parts).group_by(key, maintain_order=True).agg(aggs)


def graded_scores(
    tokens: Frame, metric: str, *, top_n: int, what: str
) -> tuple[pl.DataFrame, np.ndarray]:
    """`response_scores` of the graded responses, and which of them failed (`[n]` bool).

    Raises:
        DivscopeError: no graded responses, or all of them correct or all wrong (`what` names
            the caller).
    """
    scores = response_scores(tokens, metric, top_n=top_n).drop_nulls("correct")
    failed = (~scores["correct"]).to_numpy()
    n_failures = int(failed.sum())
    if n_failures in (0, scores.height):
        raise DivscopeError(
            f"{what}: needs both correct and wrong responses; got {scores.height} graded "
            f"responses, {n_failures} wrong. Grade the trajectories before scoring."
        )
    return scores, failed


def failure_auroc(
    tokens: Frame,
    metric: str = "js",
    *,
    top_n: int = 100,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> FailureAUROC:
    """AUROC of each response's top-n mean divergence for predicting `correct == False`.

    Args:
        tokens: a token table with `correct` filled in (ungraded responses are skipped).
        metric: the divergence column.
        top_n: values averaged per response.
        n_boot: bootstrap resamples of prompts.
        seed: seed of the bootstrap.
        confidence: coverage of the intervals.

    Returns:
        A `FailureAUROC` for the divergence and for base entropy.

    Raises:
        DivscopeError: no graded responses, or all of them correct or all wrong.

    >>> frame = pl.DataFrame({"prompt_id": ["a", "a", "b", "b"], "sample_id": [0, 1, 0, 1],
    ...     "correct": [True, False, True, False], "js": [0.1, 0.5, 0.2, 0.4],
    ...     "entropy_base": [1.0, 1.0, 1.0, 1.0]})
    >>> result = failure_auroc(frame, n_boot=10)
    >>> result.divergence.estimate, result.entropy.estimate
    (1.0, 0.5)
    """
    scores, failed = graded_scores(tokens, metric, top_n=top_n, what="failure_auroc")
    n_failures = int(failed.sum())
    prompt_index = scores["prompt_id"].rank("dense").cast(pl.Int64).to_numpy() - 1
    n_prompts = int(prompt_index.max()) + 1
    weights = problem_bootstrap_weights(n_prompts, n_boot=n_boot, seed=seed)[:, prompt_index]

    def interval(column: str) -> Interval:
        values = scores[column].to_numpy()
        resamples = weighted_auroc(values, failed, weights)
        return percentile_interval(auroc(values, failed), resamples, confidence)

    return FailureAUROC(
        metric=metric,
        top_n=top_n,
        n_responses=scores.height,
        n_failures=n_failures,
        n_prompts=n_prompts,
        divergence=interval("score"),
        entropy=interval("entropy_score"),
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
