"""sparsity, histogram, lorenz (Gini), compare and matched_thresholds."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from divscope.analyses import compare, histogram, lorenz, matched_thresholds, sparsity
from divscope.errors import DivscopeError


def js(values, dtype=pl.Float64) -> pl.DataFrame:
    return pl.DataFrame({"js": pl.Series(values, dtype=dtype)})


@pytest.mark.parametrize(
    "values,thresholds,expected",
    [
        ([0.0, 0.0, 0.0005, 0.2], (1e-4, 1e-3), {1e-4: 0.5, 1e-3: 0.75}),
        # A value equal to a threshold (the same float literal, no arithmetic) is not below it.
        ([0.0, 1e-4, 1e-3, 1e-2], (1e-4, 1e-3, 1e-2), {1e-4: 0.25, 1e-3: 0.5, 1e-2: 0.75}),
        ([0.3, 0.4], (1e-2,), {1e-2: 0.0}),
    ],
)
def test_sparsity_shares_are_strictly_below(values, thresholds, expected):
    assert sparsity(js(values), thresholds=thresholds).share_below == expected


def test_sparsity_percentiles_and_mean_match_numpy():
    values = np.random.default_rng(0).exponential(0.01, 1001)
    result = sparsity(js(values).lazy())
    assert result.n_tokens == 1001
    assert result.mean == pytest.approx(values.mean())
    for q, value in result.percentiles.items():
        assert value == pytest.approx(np.percentile(values, q)), q


def test_sparsity_hand_computed_percentiles_ignore_nulls():
    result = sparsity(js([0.0, None, 1.0, 2.0, 3.0]), percentiles=(50, 25))
    assert result.n_tokens == 4
    assert result.percentiles == {50.0: 1.5, 25.0: 0.75}


def test_sparsity_of_empty_table_is_nan():
    result = sparsity(js([]))
    assert result.n_tokens == 0
    assert math.isnan(result.mean) and math.isnan(result.percentiles[50.0])


def test_sparsity_of_another_metric():
    frame = pl.DataFrame({"js": [0.0, 0.0], "kl_base_rl": [0.5, 1.5]})
    assert sparsity(frame, "kl_base_rl").mean == 1.0


# The first and last edges are the data's minimum and maximum (or `low` / `high`), which NumPy's
# linspace and geomspace return exactly; every other value lies at least 0.02 from every edge, so
# no count depends on how an edge rounds.
@pytest.mark.parametrize(
    "kwargs,counts,n_below,n_above",
    [
        ({"bins": 2}, (3, 2), 0, 0),  # edges 0, 0.2, 0.4; 0.4 joins the last bin
        ({"bins": 4}, (2, 1, 1, 1), 0, 0),  # edges 0, 0.1, 0.2, 0.3, 0.4
        ({"bins": 2, "low": 0.05, "high": 0.3}, (2, 1), 1, 1),  # edges 0.05, 0.175, 0.3
        ({"bins": 2, "log": True}, (2, 2), 1, 0),  # edges 0.07, 0.167 (√0.028), 0.4; 0 below
    ],
)
def test_histogram_hand_computed(kwargs, counts, n_below, n_above):
    result = histogram(js([0.0, 0.07, 0.13, 0.26, 0.4]), **kwargs)
    assert (result.counts, result.n_below, result.n_above) == (counts, n_below, n_above)
    assert len(result.edges) == len(counts) + 1


def test_histogram_log_edges_are_geometric():
    result = histogram(js([1e-6, 1e-2]), bins=4, log=True)
    assert result.edges == pytest.approx((1e-6, 1e-5, 1e-4, 1e-3, 1e-2))
    assert result.counts == (1, 0, 0, 1)


@pytest.mark.parametrize(
    "values,kwargs", [([0.2, 0.2], {}), ([0.0, 0.0], {"log": True}), ([0.1], {"low": 0.2})]
)
def test_histogram_rejects_an_empty_range(values, kwargs):
    with pytest.raises(DivscopeError, match="histogram"):
        histogram(js(values), **kwargs)


@pytest.mark.parametrize(
    "values,gini,shares,curve",
    [
        ([0.0, 0.0, 0.0, 1.0], 0.75, {0.5: 0.25, 0.8: 0.25, 0.9: 0.25}, [0, 0, 0, 0, 1]),
        ([1.0, 2.0, 3.0, 4.0], 0.25, {0.5: 0.5, 0.8: 0.75, 0.9: 0.75}, [0, 0.1, 0.3, 0.6, 1]),
        ([2.0, 2.0, 2.0, 2.0], 0.0, {0.5: 0.5, 0.8: 1.0, 0.9: 1.0}, [0, 0.25, 0.5, 0.75, 1]),
        ([0.0, 0.0, 0.0, 0.0], 0.0, {0.5: 0.5, 0.8: 0.8, 0.9: 0.9}, [0, 0.25, 0.5, 0.75, 1]),
    ],
)
def test_lorenz_hand_computed(values, gini, shares, curve):
    result = lorenz(js(values), n_points=5)
    assert result.gini == pytest.approx(gini)
    assert result.token_share_for_mass == pytest.approx(shares)
    assert result.curve["token_share"].to_list() == [0, 0.25, 0.5, 0.75, 1]
    assert result.curve["mass_share"].to_list() == pytest.approx(curve)


non_negative = st.lists(
    st.floats(0, 1, allow_nan=False, allow_subnormal=False), min_size=1, max_size=40
)


@given(non_negative)
def test_gini_is_mean_absolute_difference_and_in_unit_interval(values):
    result = lorenz(js(values))
    x = np.asarray(values)
    expected = (
        0.0 if x.sum() == 0 else np.abs(x[:, None] - x[None, :]).sum() / (2 * x.size * x.sum())
    )
    assert result.gini == pytest.approx(expected, abs=1e-9)
    assert 0.0 <= result.gini <= 1.0


@given(non_negative, st.integers(2, 30))
def test_lorenz_curve_is_monotone_convex_and_spans_the_square(values, n_points):
    y = lorenz(js(values), n_points=n_points).curve["mass_share"].to_numpy()
    assert y[0] == 0.0 and y[-1] == pytest.approx(1.0)
    assert (np.diff(y) >= -1e-12).all()
    assert (np.diff(y, 2) >= -1e-9).all()


def test_lorenz_rejects_negative_values():
    with pytest.raises(DivscopeError, match="negative"):
        lorenz(js([0.1, -0.2]))


def test_compare_rows_follow_the_labels():
    tables = {"rl": js([0.0, 0.0, 0.5, 0.5]), "sft": js([0.2, 0.4]).lazy()}
    result = compare(tables, thresholds=(1e-3,), percentiles=(50,))
    assert result.columns == ["label", "n_tokens", "mean", "share_below_0.001", "p50"]
    assert result.rows() == [
        ("rl", 4, 0.25, 0.5, 0.25),
        ("sft", 2, pytest.approx(0.3), 0.0, pytest.approx(0.3)),
    ]


def test_matched_thresholds_hand_computed():
    frame = pl.DataFrame(
        {"js": [0.0, 0.02, 0.05, 0.15, 0.3], "ce_base_rl": [0.5, 0.1, 3.0, 2.0, 1.0]}
    )
    matched = matched_thresholds(frame, "ce_base_rl", (0.01, 0.1, 0.5, -1.0))
    # js > 0.01: 4 of 5 tokens; ce sorted 0.1 0.5 1.0 2.0 3.0: v = x_(1) = 0.1, 4 above it.
    # js > 0.1: 2 -> v = x_(3) = 1.0; js > 0.5: 0 -> v = the largest, 3.0.
    assert [m.value for m in matched[:3]] == [0.1, 1.0, 3.0]
    assert [m.share_above for m in matched] == [0.8, 0.4, 0.0, 1.0]
    assert [m.metric_share_above for m in matched] == [0.8, 0.4, 0.0, 1.0]
    # Every token above: the next float below the smallest value.
    assert matched[3].value == np.nextafter(0.1, -np.inf)
    assert {(m.reference, m.metric) for m in matched} == {("js", "ce_base_rl")}


def test_matched_thresholds_report_ties_at_the_value():
    frame = pl.DataFrame({"js": [0.0, 0.2, 0.3, 0.4], "kl_base_rl": [1.0, 2.0, 2.0, 5.0]})
    (matched,) = matched_thresholds(frame, "kl_base_rl", (0.25,))
    # Two tokens have js > 0.25, but 2.0 ties: only one token lies above v = 2.0.
    assert (matched.value, matched.share_above, matched.metric_share_above) == (2.0, 0.5, 0.25)


def test_matched_thresholds_on_float32_keep_the_share():
    rng = np.random.default_rng(0)
    frame = pl.DataFrame(
        {"js": rng.random(1000) ** 4 * 0.69, "ce_base_rl": rng.exponential(1.0, 1000)},
        schema={"js": pl.Float32, "ce_base_rl": pl.Float32},
    )
    for m in matched_thresholds(frame, "ce_base_rl", (1e-4, 0.01, 0.1, 0.2, 1.0)):
        above = frame.filter(pl.col("ce_base_rl") > m.value).height
        assert above == frame.filter(pl.col("js") > m.threshold).height
        assert m.metric_share_above == m.share_above == above / 1000


def test_matched_thresholds_need_both_columns():
    with pytest.raises(DivscopeError, match="no token has both"):
        matched_thresholds(pl.DataFrame({"js": [None], "ce_base_rl": [1.0]}), "ce_base_rl", (0.1,))
