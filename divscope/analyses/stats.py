"""Estimators shared by every analysis: pass@k, AUROC and the problem-level bootstrap.

Each is defined here once; grading, analyses and figures import them from `divscope.analyses`.
The bootstrap resamples *problems* (prompts) with replacement, never single responses: the
responses to one prompt are correlated, and the papers report intervals over problems.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from divscope.errors import DivscopeError


@dataclass(frozen=True)
class Interval:
    """A point estimate with a percentile-bootstrap confidence interval."""

    estimate: float
    """The statistic on the full sample."""
    low: float
    """Lower bound of the interval (the (1 - confidence)/2 quantile of the resamples)."""
    high: float
    """Upper bound of the interval (the (1 + confidence)/2 quantile of the resamples)."""
    confidence: float
    """Coverage of the interval, e.g. 0.95."""


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k estimator: 1 - C(n - c, k) / C(n, k) (Chen et al., 2021).

    The probability that at least one of k responses drawn without replacement from n samples,
    c of them correct, is correct. Exact integer binomials, so no overflow for large n.

    Args:
        n: samples drawn for the problem.
        c: correct samples among them.
        k: the k of pass@k, 1 <= k <= n.

    Returns:
        pass@k in [0, 1].

    Raises:
        DivscopeError: unless 0 <= c <= n and 1 <= k <= n.

    >>> pass_at_k(4, 1, 2)
    0.5
    """
    if not 0 <= c <= n:
        raise DivscopeError(f"pass_at_k: need 0 <= c <= n, got c={c}, n={n}.")
    if not 1 <= k <= n:
        raise DivscopeError(
            f"pass_at_k: need 1 <= k <= n, got k={k} with n={n} samples; draw more samples "
            "or lower k."
        )
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def problem_bootstrap_weights(n_problems: int, *, n_boot: int = 1000, seed: int = 0) -> np.ndarray:
    """How many times each problem appears in each bootstrap resample.

    Resampling problems with replacement is the same as weighting each problem by a multinomial
    count; weights make every resample a matrix product, and the same weights reused across
    policies give a *paired* bootstrap.

    Args:
        n_problems: number of problems (prompts).
        n_boot: number of resamples.
        seed: seed of the NumPy generator; the same seed gives the same resamples.

    Returns:
        Integer array of shape [n_boot, n_problems]; every row sums to n_problems.
    """
    if n_problems < 1 or n_boot < 1:
        raise DivscopeError(
            f"bootstrap: need at least one problem and one resample, got n_problems={n_problems}, "
            f"n_boot={n_boot}."
        )
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_problems, np.full(n_problems, 1.0 / n_problems), size=n_boot)


def percentile_interval(estimate: float, resamples: ArrayLike, confidence: float) -> Interval:
    """The percentile interval of bootstrap resamples; undefined (NaN) resamples are skipped.

    Args:
        estimate: the statistic on the full sample.
        resamples: the statistic on each resample.
        confidence: coverage, in (0, 1).
    """
    if not 0 < confidence < 1:
        raise DivscopeError(f"bootstrap: confidence must lie in (0, 1), got {confidence}.")
    values = np.asarray(resamples, dtype=np.float64)
    values = values[~np.isnan(values)]
    if values.size == 0:
        return Interval(float(estimate), math.nan, math.nan, confidence)
    low, high = np.quantile(values, [(1 - confidence) / 2, (1 + confidence) / 2])
    return Interval(float(estimate), float(low), float(high), confidence)


def bootstrap_ci(
    per_problem: ArrayLike, *, n_boot: int = 1000, seed: int = 0, confidence: float = 0.95
) -> Interval:
    """Mean over problems of a per-problem value, with a problem-level bootstrap interval.

    The per-problem value is typically mean@n accuracy (the share of a prompt's samples that are
    correct); the interval resamples problems with replacement.

    Args:
        per_problem: one value per problem.
        n_boot: number of resamples.
        seed: seed of the resampling; the same seed gives the same interval.
        confidence: coverage of the interval.

    Returns:
        The mean and its percentile interval.

    >>> interval = bootstrap_ci([0.0, 0.5, 1.0], seed=0)
    >>> interval.estimate, interval.low <= 0.5 <= interval.high
    (0.5, True)
    """
    values = np.asarray(per_problem, dtype=np.float64)
    weights = problem_bootstrap_weights(values.size, n_boot=n_boot, seed=seed)
    return percentile_interval(values.mean(), weights @ values / values.size, confidence)


def weighted_auroc(scores: ArrayLike, positive: ArrayLike, weights: ArrayLike) -> np.ndarray:
    """AUROC of `scores` for the `positive` class under each row of response weights.

    AUROC = P(score of a positive > score of a negative) + ½ P(tie), each pair weighted by the
    product of its weights: with unit weights it is the Mann–Whitney U / (n_pos · n_neg). One
    sort serves every row of weights, so a whole bootstrap costs one matrix pass.

    Args:
        scores: shape [n] scores, higher = more likely positive.
        positive: shape [n] booleans.
        weights: shape [n_rows, n] non-negative weights (bootstrap counts).

    Returns:
        Shape [n_rows] AUROCs; NaN for a row whose positive or negative weight is zero.
    """
    scores = np.asarray(scores, dtype=np.float64)
    positive = np.asarray(positive, dtype=bool)
    weights = np.atleast_2d(np.asarray(weights, dtype=np.float64))
    order = np.argsort(scores, kind="stable")
    sorted_scores = scores[order]
    group_starts = np.flatnonzero(np.r_[True, sorted_scores[1:] != sorted_scores[:-1]])
    sorted_weights = weights[:, order]
    sorted_positive = positive[order]
    # Weight of positives and negatives per distinct score: [n_rows, n_distinct].
    pos = np.add.reduceat(sorted_weights * sorted_positive, group_starts, axis=1)
    neg = np.add.reduceat(sorted_weights * ~sorted_positive, group_starts, axis=1)
    neg_below = np.cumsum(neg, axis=1) - neg
    wins = (pos * (neg_below + 0.5 * neg)).sum(axis=1)
    pairs = pos.sum(axis=1) * neg.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(pairs > 0, wins / pairs, np.nan)


def auroc(scores: ArrayLike, positive: ArrayLike) -> float:
    """AUROC of `scores` for the `positive` class (ties count ½).

    >>> auroc([0.1, 0.4, 0.35, 0.8], [False, False, True, True])
    0.75
    """
    n = np.asarray(scores).size
    return float(weighted_auroc(scores, positive, np.ones((1, n)))[0])
