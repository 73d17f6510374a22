"""Estimators shared by grading and the analyses: pass@k, majority@k, AUROC and the problem
bootstrap.

Each is defined here once, on the ground floor (this module imports no other divscope module
but `divscope.errors`); grading, analyses and figures import them from `divscope.estimators`.
The bootstrap resamples *problems* (prompts) with replacement, never single responses: the
responses to one prompt are correlated, and the papers report intervals over problems. With
several benchmarks it resamples within each benchmark (stratified), so every resample keeps
each benchmark's size.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
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


def interval_columns(name: str, interval: Interval | None) -> dict[str, float | None]:
    """`name`, `name_low`, `name_high` of an interval, as a table row holds it (None when
    undefined).

    >>> interval_columns("accuracy", Interval(0.5, 0.25, 0.75, 0.95))
    {'accuracy': 0.5, 'accuracy_low': 0.25, 'accuracy_high': 0.75}
    """
    return {
        name: interval.estimate if interval else None,
        f"{name}_low": interval.low if interval else None,
        f"{name}_high": interval.high if interval else None,
    }


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


MAJORITY_SUBSETS = 1000
"""k-subsets per problem that `majority_at_k` scores: all of them when there are at most this
many, else this many drawn at random."""


def majority_at_k(
    answers: Sequence[str | None],
    correct: Sequence[bool],
    k: int,
    *,
    n_subsets: int = MAJORITY_SUBSETS,
    seed: int = 0,
) -> float:
    """Expected correctness of a majority vote over k of a problem's n responses (majority@k).

    A k-subset of the responses votes: each answered response votes for its answer, an
    unanswered one (None) for nothing. The answer with the most votes wins; a tie between m
    answers scores the share of them that are correct, and a subset without any answer scores
    0. An answer is correct when any of the n responses giving it is graded correct.

    The expectation is over the C(n, k) subsets of k responses drawn without replacement:
    exact (every subset scored; k = n is the single full set) when C(n, k) <= `n_subsets`,
    otherwise the mean over `n_subsets` subsets drawn uniformly at random with a NumPy
    generator seeded with `seed`.

    Args:
        answers: per response its answer (e.g. `divscope.answers.final_answer`), None when
            it gives none.
        correct: per response its grade.
        k: votes per subset, 1 <= k <= n.
        n_subsets: the most subsets scored (see above).
        seed: seed of the random subsets.

    Returns:
        majority@k in [0, 1].

    Raises:
        DivscopeError: `answers` and `correct` differ in length, or k is outside [1, n].

    >>> majority_at_k(["4", "4", "5", None], [True, True, False, False], 2)  # ties count 1/2
    0.6666666666666666
    """
    n = len(answers)
    if len(correct) != n:
        raise DivscopeError(
            f"majority_at_k: {n} answers but {len(correct)} grades; give one of each per response."
        )
    if not 1 <= k <= n:
        raise DivscopeError(
            f"majority_at_k: need 1 <= k <= n, got k={k} with n={n} responses; draw more "
            "samples or lower k."
        )
    distinct = list(dict.fromkeys(a for a in answers if a is not None))
    if not distinct:
        return 0.0
    code = {answer: i for i, answer in enumerate(distinct)}
    m = len(distinct)
    # Unanswered responses vote into an extra column m that is dropped before counting.
    votes_for = np.array([m if a is None else code[a] for a in answers])
    answer_correct = np.zeros(m, dtype=bool)
    for vote, verdict in zip(votes_for, correct, strict=True):
        if vote < m and verdict:
            answer_correct[vote] = True
    if math.comb(n, k) <= n_subsets:
        subsets = np.array(list(itertools.combinations(range(n), k)), dtype=np.int64)
    else:
        draws = np.random.default_rng(seed).random((n_subsets, n))
        subsets = np.argsort(draws, axis=1)[:, :k]
    rows = subsets.shape[0]
    cells = votes_for[subsets] + (m + 1) * np.arange(rows)[:, None]
    counts = np.bincount(cells.ravel(), minlength=rows * (m + 1)).reshape(rows, m + 1)[:, :m]
    top = counts.max(axis=1, keepdims=True)
    winners = (counts == top) & (top > 0)
    scores = (winners & answer_correct).sum(axis=1) / np.maximum(winners.sum(axis=1), 1)
    return float(scores.mean())


def problem_bootstrap_weights(
    n_problems: int, *, n_boot: int = 1000, seed: int = 0, strata: ArrayLike | None = None
) -> np.ndarray:
    """How many times each problem appears in each bootstrap resample.

    Resampling problems with replacement is the same as weighting each problem by a multinomial
    count; weights make every resample a matrix product, and the same weights reused across
    policies give a *paired* bootstrap. With `strata` (e.g. a benchmark code per problem) each
    stratum is resampled on its own, so every resample keeps each stratum's size; a single
    stratum draws exactly the unstratified weights.

    Args:
        n_problems: number of problems (prompts).
        n_boot: number of resamples.
        seed: seed of the NumPy generator; the same seed gives the same resamples.
        strata: optional, one label per problem; strata are drawn in sorted order.

    Returns:
        Integer array of shape [n_boot, n_problems]; every row sums to n_problems (and to each
        stratum's size over its problems).

    >>> weights = problem_bootstrap_weights(3, n_boot=2, seed=0)
    >>> weights.tolist(), weights.sum(axis=1).tolist()
    ([[1, 1, 1], [0, 0, 3]], [3, 3])
    """
    if n_problems < 1 or n_boot < 1:
        raise DivscopeError(
            f"bootstrap: need at least one problem and one resample, got n_problems={n_problems}, "
            f"n_boot={n_boot}."
        )
    rng = np.random.default_rng(seed)
    if strata is None:
        return rng.multinomial(n_problems, np.full(n_problems, 1.0 / n_problems), size=n_boot)
    labels = np.asarray(strata)
    if labels.shape != (n_problems,):
        raise DivscopeError(
            f"bootstrap: need one stratum per problem, got {labels.size} for {n_problems}."
        )
    weights = np.zeros((n_boot, n_problems), dtype=np.int64)
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        size = members.size
        weights[:, members] = rng.multinomial(size, np.full(size, 1.0 / size), size=n_boot)
    return weights


def percentile_interval(estimate: float, resamples: ArrayLike, confidence: float) -> Interval:
    """The percentile interval of bootstrap resamples; undefined (NaN) resamples are skipped.

    Args:
        estimate: the statistic on the full sample.
        resamples: the statistic on each resample.
        confidence: coverage, in (0, 1).

    >>> percentile_interval(0.5, [0.2, 0.4, 0.5, 0.6, 0.8, float("nan")], 0.5)
    Interval(estimate=0.5, low=0.4, high=0.6, confidence=0.5)
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


@dataclass(frozen=True, eq=False)
class Resampled:
    """A statistic on the full sample and on each bootstrap resample (NaN where undefined).

    Differences and ratios of `Resampled` values pair their resamples, so
    `(setting - base) / (reference - base)` is a paired bootstrap of a recovery.
    """

    estimate: float
    """The statistic on the full sample (NaN when undefined, e.g. no problem present)."""
    resamples: np.ndarray
    """Shape [n_boot]: the statistic on each resample."""

    def __sub__(self, other: Resampled) -> Resampled:
        return Resampled(self.estimate - other.estimate, self.resamples - other.resamples)

    def __truediv__(self, other: Resampled) -> Resampled:
        """The ratio, NaN where the denominator is 0."""
        with np.errstate(invalid="ignore", divide="ignore"):
            resamples = np.where(other.resamples != 0, self.resamples / other.resamples, np.nan)
        estimate = self.estimate / other.estimate if other.estimate != 0 else math.nan
        return Resampled(estimate, resamples)

    def interval(self, confidence: float) -> Interval | None:
        """The percentile interval, or None when the estimate is undefined."""
        if math.isnan(self.estimate):
            return None
        return percentile_interval(self.estimate, self.resamples, confidence)


@dataclass(frozen=True, eq=False)
class PairedBootstrap:
    """One set of problem weights shared by every statistic of an analysis: paired intervals.

    Values are per problem, in a fixed order of problems, NaN where a problem is absent (e.g.
    a setting not run on it); every mean skips the absent problems, in the estimate and in each
    resample alike.
    """

    weights: np.ndarray
    """Shape [n_boot, n_problems]: `problem_bootstrap_weights`."""
    strata: np.ndarray
    """Shape [n_problems]: the stratum (benchmark) code of each problem."""

    @classmethod
    def drawn(cls, strata: ArrayLike, *, n_boot: int = 1000, seed: int = 0) -> PairedBootstrap:
        """Weights for problems labelled by `strata`, resampled within each stratum.

        >>> PairedBootstrap.drawn([0, 0, 1], n_boot=4).weights[:, 2].tolist()
        [1, 1, 1, 1]
        """
        codes = np.unique(np.asarray(strata), return_inverse=True)[1].ravel()
        weights = problem_bootstrap_weights(codes.size, n_boot=n_boot, seed=seed, strata=codes)
        return cls(weights, codes)

    def mean(self, values: ArrayLike, *, macro: bool = False) -> Resampled:
        """The mean of per-problem values over the present problems, or with `macro` the mean of
        each stratum's mean (strata weighted equally; a resample that gives a stratum no weight
        is undefined).

        >>> bootstrap = PairedBootstrap.drawn(["a", "a", "b"], n_boot=10)
        >>> values = [1.0, 0.0, 1.0]
        >>> bootstrap.mean(values).estimate, bootstrap.mean(values, macro=True).estimate
        (0.6666666666666666, 0.75)
        """
        values = np.asarray(values, dtype=np.float64)
        present = ~np.isnan(values)
        groups = (
            [present & (self.strata == s) for s in np.unique(self.strata[present])]
            if macro
            else [present]
        )
        if not present.any():
            return Resampled(math.nan, np.full(self.weights.shape[0], np.nan))
        estimates, resamples = [], []
        for members in groups:
            weights = self.weights[:, members]
            total = weights.sum(axis=1)
            with np.errstate(invalid="ignore", divide="ignore"):
                resamples.append(np.where(total > 0, weights @ values[members] / total, np.nan))
            estimates.append(values[members].mean())
        return Resampled(float(np.mean(estimates)), np.mean(resamples, axis=0))

    def ratio(self, totals: ArrayLike, counts: ArrayLike) -> Resampled:
        """Σ totals / Σ counts over the problems (e.g. a mean over responses, from each
        problem's sum and number of responses); problems with count 0 add nothing.

        >>> PairedBootstrap.drawn([0, 0], n_boot=5).ratio([3.0, 1.0], [2, 2]).estimate
        1.0
        """
        totals = np.asarray(totals, dtype=np.float64)
        counts = np.asarray(counts, dtype=np.float64)
        denominator = self.weights @ counts
        with np.errstate(invalid="ignore", divide="ignore"):
            resamples = np.where(denominator > 0, self.weights @ totals / denominator, np.nan)
        estimate = totals.sum() / counts.sum() if counts.sum() > 0 else math.nan
        return Resampled(float(estimate), resamples)


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

    >>> weighted_auroc([0.9, 0.1, 0.2, 0.3], [True, False, True, False],
    ...                [[1, 1, 1, 1], [2, 1, 0, 1]]).tolist()
    [0.75, 1.0]
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
