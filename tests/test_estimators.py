"""pass@k, majority@k, AUROC and the problem-level bootstrap (plain and stratified, paired)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.stats import mannwhitneyu

from divscope.errors import DivscopeError
from divscope.estimators import (
    PairedBootstrap,
    Resampled,
    auroc,
    bootstrap_ci,
    majority_at_k,
    pass_at_k,
    percentile_interval,
    problem_bootstrap_weights,
    weighted_auroc,
)


@pytest.mark.parametrize(
    "n,c,k,expected",
    [
        (1, 1, 1, 1.0),
        (1, 0, 1, 0.0),
        (4, 1, 1, 0.25),
        (4, 1, 2, 0.5),  # 1 - C(3,2)/C(4,2) = 1 - 3/6
        (4, 2, 2, 5 / 6),  # 1 - C(2,2)/C(4,2) = 1 - 1/6
        (5, 0, 3, 0.0),
        (5, 3, 3, 1.0),  # only 2 wrong samples: any 3 contain a correct one
        (10, 3, 5, 1 - 21 / 252),  # 1 - C(7,5)/C(10,5)
    ],
)
def test_pass_at_k_hand_computed(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_matches_brute_force_enumeration():
    for n in range(1, 8):
        for c in range(n + 1):
            samples = [True] * c + [False] * (n - c)
            for k in range(1, n + 1):
                draws = list(itertools.combinations(samples, k))
                expected = sum(any(draw) for draw in draws) / len(draws)
                assert pass_at_k(n, c, k) == pytest.approx(expected), (n, c, k)


def test_pass_at_k_large_n_is_exact():
    assert pass_at_k(4096, 1, 1) == pytest.approx(1 / 4096)
    assert pass_at_k(4096, 2, 1024) == pytest.approx(1 - (3072 * 3071) / (4096 * 4095))


@pytest.mark.parametrize("n,c,k", [(4, 5, 1), (4, -1, 1), (4, 1, 0), (4, 1, 5)])
def test_pass_at_k_rejects_invalid_counts(n, c, k):
    with pytest.raises(DivscopeError, match="pass_at_k"):
        pass_at_k(n, c, k)


@pytest.mark.parametrize(
    "scores,positive,expected",
    [
        ([0.1, 0.2, 0.8, 0.9], [False, False, True, True], 1.0),
        ([0.1, 0.2, 0.8, 0.9], [True, True, False, False], 0.0),
        ([0.5, 0.5, 0.5, 0.5], [True, False, True, False], 0.5),
        ([0.1, 0.4, 0.35, 0.8], [False, False, True, True], 0.75),
        ([0.3, 0.3, 0.1], [True, False, False], 0.75),  # one tie (½) and one win
    ],
)
def test_auroc_hand_computed(scores, positive, expected):
    assert auroc(scores, positive) == pytest.approx(expected)


def test_auroc_is_nan_with_one_class():
    assert math.isnan(auroc([0.1, 0.2], [True, True]))


@given(
    st.lists(st.tuples(st.integers(0, 6), st.booleans()), min_size=2, max_size=60).filter(
        lambda rows: 0 < sum(p for _, p in rows) < len(rows)
    )
)
def test_auroc_matches_mann_whitney_u_with_ties(rows):
    scores = np.array([s for s, _ in rows], dtype=float)
    positive = np.array([p for _, p in rows])
    u = mannwhitneyu(scores[positive], scores[~positive]).statistic
    assert auroc(scores, positive) == pytest.approx(u / (positive.sum() * (~positive).sum()))


def test_weighted_auroc_equals_auroc_of_repeated_rows():
    rng = np.random.default_rng(1)
    scores = rng.integers(0, 5, 30).astype(float)
    positive = rng.random(30) < 0.4
    counts = rng.integers(0, 4, 30)
    expected = auroc(np.repeat(scores, counts), np.repeat(positive, counts))
    assert weighted_auroc(scores, positive, counts[None, :])[0] == pytest.approx(expected)


def test_bootstrap_weights_resample_every_problem_count():
    weights = problem_bootstrap_weights(7, n_boot=50, seed=3)
    assert weights.shape == (50, 7)
    assert (weights.sum(axis=1) == 7).all()
    assert (weights == problem_bootstrap_weights(7, n_boot=50, seed=3)).all()


def test_bootstrap_ci_is_reproducible_and_seed_dependent():
    values = np.random.default_rng(0).random(30)
    first = bootstrap_ci(values, n_boot=200, seed=7)
    assert first == bootstrap_ci(values, n_boot=200, seed=7)
    assert first != bootstrap_ci(values, n_boot=200, seed=8)
    assert first.estimate == pytest.approx(values.mean())
    assert first.low < first.estimate < first.high
    assert first.confidence == 0.95


def test_bootstrap_ci_of_constant_values_is_a_point():
    interval = bootstrap_ci([0.5] * 10, n_boot=50)
    assert (interval.estimate, interval.low, interval.high) == (0.5, 0.5, 0.5)


def test_percentile_interval_skips_undefined_resamples():
    interval = percentile_interval(1.0, [np.nan, 0.0, 1.0, 2.0, np.nan], 0.5)
    assert (interval.low, interval.high) == (0.5, 1.5)
    assert math.isnan(percentile_interval(1.0, [np.nan], 0.95).low)


@pytest.mark.parametrize("confidence", [0.0, 1.0, 1.5])
def test_percentile_interval_rejects_bad_confidence(confidence):
    with pytest.raises(DivscopeError, match="confidence"):
        percentile_interval(0.0, [0.0], confidence)


@pytest.mark.parametrize(
    "answers,correct,k,expected",
    [
        # Every pair of 4: {4,4} right, {4,5} x2 a tie (1/2 right), {4,-} x2 right, {5,-} wrong.
        (["4", "4", "5", None], [True, True, False, False], 2, 4 / 6),
        (["4", "4", "5", None], [True, True, False, False], 4, 1.0),
        # A three-way tie with one right answer scores 1/3.
        (["1", "2", "3"], [False, True, False], 3, 1 / 3),
        # The majority is wrong although a right answer is present.
        (["1", "1", "2"], [False, False, True], 3, 0.0),
        # An answer is right when any response giving it is graded right.
        (["x", "x"], [False, True], 1, 1.0),
        ([None, None], [False, False], 2, 0.0),
        (["7"], [True], 1, 1.0),
    ],
)
def test_majority_at_k_hand_computed(answers, correct, k, expected):
    assert majority_at_k(answers, correct, k) == pytest.approx(expected)


def test_majority_at_k_samples_subsets_beyond_the_limit():
    rng = np.random.default_rng(1)
    answers = [str(a) for a in rng.integers(0, 3, 12)]
    correct = [a == "0" for a in answers]
    exact = majority_at_k(answers, correct, 5)  # C(12, 5) = 792 subsets, all scored
    sampled = majority_at_k(answers, correct, 5, n_subsets=400, seed=3)
    assert sampled == majority_at_k(answers, correct, 5, n_subsets=400, seed=3)
    assert sampled != exact and sampled == pytest.approx(exact, abs=0.05)


@pytest.mark.parametrize(
    "answers,correct,k,message",
    [(["a"], [True, False], 1, "1 answers but 2 grades"), (["a"], [True], 2, "k=2 with n=1")],
)
def test_majority_at_k_rejects_bad_input(answers, correct, k, message):
    with pytest.raises(DivscopeError, match=message):
        majority_at_k(answers, correct, k)


def test_stratified_weights_keep_each_stratum_size():
    strata = np.array([0, 1, 0, 1, 1, 2])
    weights = problem_bootstrap_weights(6, n_boot=50, seed=2, strata=strata)
    for label, size in ((0, 2), (1, 3), (2, 1)):
        assert (weights[:, strata == label].sum(axis=1) == size).all()
    one = problem_bootstrap_weights(4, n_boot=20, seed=5, strata=[7, 7, 7, 7])
    assert (one == problem_bootstrap_weights(4, n_boot=20, seed=5)).all()


def test_paired_bootstrap_means_skip_absent_problems():
    bootstrap = PairedBootstrap.drawn(["x", "x", "y"], n_boot=30, seed=0)
    values = np.array([1.0, np.nan, 0.0])
    pooled, macro = bootstrap.mean(values), bootstrap.mean(values, macro=True)
    assert (pooled.estimate, macro.estimate) == (0.5, 0.5)
    w = bootstrap.weights
    expected = np.where(w[:, 0] > 0, (w[:, 0] * 1.0) / (w[:, 0] + w[:, 2]), 0.0)
    assert pooled.resamples == pytest.approx(expected)
    ratio = bootstrap.ratio([3.0, 0.0, 1.0], [2, 0, 2])
    assert ratio.estimate == 1.0
    assert ratio.resamples == pytest.approx((3 * w[:, 0] + w[:, 2]) / (2 * w[:, 0] + 2 * w[:, 2]))


def test_resampled_ratios_are_undefined_where_the_denominator_is_zero():
    ratio = Resampled(1.0, np.array([1.0, 2.0])) / Resampled(0.0, np.array([2.0, 0.0]))
    assert math.isnan(ratio.estimate) and ratio.interval(0.95) is None
    assert ratio.resamples[0] == 0.5 and math.isnan(ratio.resamples[1])
