"""The out-of-core order statistics: exact against a full in-memory sort (np.sort, np.quantile,
polars' quantile), with ties, NaN, nulls, negative values and tiny or empty inputs, and with a
value limit small enough that every refinement path runs."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from divscope.analyses import _streaming
from divscope.analyses._streaming import (
    collect,
    exact_quantiles,
    grouped_quantiles,
    memory_cap,
    order_statistics,
    sorted_blocks,
    top_rows,
    value_limit,
)
from divscope.errors import DivscopeError

PROBABILITIES = (0.0, 0.001, 0.1, 0.25, 0.5, 0.75, 0.8, 0.9, 0.95, 0.98, 0.99, 0.999, 1.0)


@pytest.fixture(params=[None, 7, 1000], ids=["default", "limit7", "limit1000"])
def limit(request, monkeypatch):
    """The values one pass may collect: the default, or small enough to force refinement."""
    if request.param is not None:
        monkeypatch.setattr(_streaming, "_value_limit", request.param)
    return request.param


def mixed(n: int = 20_000, seed: int = 0) -> np.ndarray:
    """Skewed divergences with many exact zeros, heavy ties and a few negatives."""
    rng = np.random.default_rng(seed)
    parts = [
        rng.exponential(0.01, n),
        np.zeros(n // 3),
        rng.integers(0, 5, n // 4) * 0.1,
        -rng.random(n // 100),
        rng.random(20) * 1e-300,
        np.array([1e300, -1e300]),
    ]
    values = np.concatenate(parts)
    rng.shuffle(values)
    return values


def test_quantiles_equal_numpy_bit_for_bit(limit):
    values = mixed()
    result = exact_quantiles(pl.LazyFrame({"x": values}), "x", PROBABILITIES)
    assert result == np.quantile(values, PROBABILITIES).tolist()


def test_order_statistics_equal_a_sort(limit):
    values = mixed(seed=1)
    ordered = np.sort(values)
    ranks = [0, 1, 17, 5000, len(values) // 2, len(values) - 2, len(values) - 1]
    lazy = pl.LazyFrame({"x": values})
    assert order_statistics(lazy, "x", ranks) == ordered[ranks].tolist()
    assert order_statistics(lazy, "x", ranks, descending=True) == ordered[::-1][ranks].tolist()


def test_sorted_blocks_concatenate_to_a_sort(limit):
    values = mixed(seed=2)
    blocks = list(sorted_blocks(pl.LazyFrame({"x": values}), "x"))
    assert np.array_equal(np.concatenate(blocks), np.sort(values))
    assert max(len(b) for b in blocks) <= value_limit()


def test_a_tie_run_longer_than_the_limit_fills_blocks_without_being_read(monkeypatch):
    monkeypatch.setattr(_streaming, "_value_limit", 10)
    values = np.concatenate([np.zeros(35), [1.0, 2.0, 3.0], np.full(12, 0.5)])
    blocks = list(sorted_blocks(pl.LazyFrame({"x": values}), "x"))
    assert [len(b) for b in blocks] == [10, 10, 10, 5, 10, 2, 3]
    assert np.array_equal(np.concatenate(blocks), np.sort(values))


def test_nulls_are_dropped_and_float32_is_widened(limit):
    lazy = pl.LazyFrame({"x": pl.Series([0.3, None, 0.1, None, 0.2], dtype=pl.Float32)})
    expected = np.quantile(np.array([0.3, 0.1, 0.2], dtype=np.float32).astype(np.float64), [0.5])
    assert exact_quantiles(lazy, "x", [0.5]) == expected.tolist()
    assert order_statistics(lazy, "x", [2]) == [float(np.float32(0.3))]


def test_nan_follows_numpy_in_quantiles_and_ranks_last_elsewhere(limit):
    values = [0.5, math.nan, 0.1, 0.2]
    lazy = pl.LazyFrame({"x": values})
    assert all(math.isnan(v) for v in exact_quantiles(lazy, "x", [0.0, 0.5]))
    assert all(math.isnan(v) for v in np.quantile(values, [0.0, 0.5]))
    assert order_statistics(lazy, "x", [0, 2]) == [0.1, 0.5]
    assert math.isnan(order_statistics(lazy, "x", [0], descending=True)[0])
    blocks = np.concatenate(list(sorted_blocks(lazy, "x")))
    assert blocks[:3].tolist() == [0.1, 0.2, 0.5] and math.isnan(blocks[3])


def test_minus_zero_is_zero():
    lazy = pl.LazyFrame({"x": [-0.0, 0.0, -0.0]})
    assert [math.copysign(1, v) for v in order_statistics(lazy, "x", [0, 1, 2])] == [1, 1, 1]


@pytest.mark.parametrize("values", [[], [None, None]])
def test_empty_input(values):
    lazy = pl.LazyFrame({"x": pl.Series(values, dtype=pl.Float64)})
    assert all(math.isnan(v) for v in exact_quantiles(lazy, "x", [0.1, 0.5]))
    assert list(sorted_blocks(lazy, "x")) == []
    with pytest.raises(DivscopeError, match=r"rank 0 of column 'x' is outside \[0, 0\)"):
        order_statistics(lazy, "x", [0])


def test_single_value_and_constant_columns(limit):
    assert exact_quantiles(pl.LazyFrame({"x": [2.5]}), "x", PROBABILITIES) == [2.5] * 13
    constant = pl.LazyFrame({"x": [0.25] * 50})
    assert exact_quantiles(constant, "x", [0.3, 0.7]) == [0.25, 0.25]


def test_bad_arguments_are_refused():
    lazy = pl.LazyFrame({"x": [1.0, 2.0]})
    with pytest.raises(DivscopeError, match=r"rank 2 of column 'x' is outside \[0, 2\)"):
        order_statistics(lazy, "x", [2])
    with pytest.raises(DivscopeError, match="must lie in"):
        exact_quantiles(lazy, "x", [1.5])
    with pytest.raises(DivscopeError, match="max memory must be positive"), memory_cap(0):
        pass


# Generation can be slow on a loaded machine: that is no failure of the code under test.
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(
        st.one_of(
            st.floats(allow_nan=False, allow_infinity=True, width=32),
            st.sampled_from([0.0, 0.1, 1.0]),
        ),
        min_size=1,
        max_size=60,
    ),
    probabilities=st.lists(st.floats(0, 1), min_size=1, max_size=5),
    limit=st.sampled_from([1, 3, 1000]),
)
def test_quantiles_and_ranks_equal_numpy_on_any_input(values, probabilities, limit):
    _streaming._value_limit = limit
    try:
        lazy = pl.LazyFrame({"x": pl.Series(values, dtype=pl.Float64)})
        expected = np.quantile(np.asarray(values, dtype=np.float64), probabilities)
        result = exact_quantiles(lazy, "x", probabilities)
        np.testing.assert_array_equal(result, expected)
        ranks = list(range(len(values)))
        assert order_statistics(lazy, "x", ranks) == np.sort(values).tolist()
    finally:
        _streaming._value_limit = _streaming.DEFAULT_VALUE_LIMIT


def test_grouped_quantiles_equal_polars_per_group(limit):
    values = mixed(seed=3)
    groups = np.random.default_rng(3).integers(0, 20, len(values))
    lazy = pl.LazyFrame({"bin": groups, "x": values})
    result = grouped_quantiles(lazy, "x", "bin", [0.1, 0.25, 0.5, 0.75, 0.9])
    expected = (
        lazy.group_by("bin")
        .agg(pl.col("x").quantile(q, interpolation="linear").alias(f"q{q}") for q in (0.1, 0.25))
        .collect()
    )
    for row in expected.iter_rows():
        assert result[row[0]][:2] == list(row[1:])
    for group in range(20):
        reference = np.quantile(values[groups == group], [0.1, 0.25, 0.5, 0.75, 0.9])
        np.testing.assert_allclose(result[group], reference, rtol=1e-14, atol=0)


def test_memory_cap_sets_the_value_limit_and_restores_it():
    assert value_limit() == _streaming.DEFAULT_VALUE_LIMIT
    with memory_cap(1 << 30):
        assert value_limit() == (1 << 30) // _streaming.BYTES_PER_VALUE
        assert collect(pl.LazyFrame({"a": [1, 2, 3]}).select(pl.col("a").sum())).item() == 6
    with memory_cap(1 << 10):
        assert value_limit() == _streaming.MIN_VALUE_LIMIT
    with memory_cap(None):
        assert value_limit() == _streaming.DEFAULT_VALUE_LIMIT
    assert value_limit() == _streaming.DEFAULT_VALUE_LIMIT


def test_parquet_parts_are_read_as_one_column(tmp_path, limit):
    values = mixed(seed=4)
    for i, part in enumerate(np.array_split(values, 3)):
        pl.DataFrame({"x": part}).write_parquet(tmp_path / f"part-{i}.parquet")
    lazy = pl.scan_parquet(tmp_path / "*.parquet")
    assert exact_quantiles(lazy, "x", PROBABILITIES) == np.quantile(values, PROBABILITIES).tolist()


@pytest.mark.parametrize("count", [0, 1, 40, 333, 1000, 2000])
def test_top_rows_are_a_stable_sorts_first_rows(count, limit):
    # Values on a coarse grid: the count-th largest ties with many rows.
    rng = np.random.default_rng(5)
    values = rng.integers(0, 12, 2000) / 4
    values[rng.random(2000) < 0.1] = np.nan  # nulls below, never counted
    frame = pl.DataFrame({"id": np.arange(2000), "x": values}).with_columns(
        pl.col("x").fill_nan(None)
    )
    present = frame.drop_nulls("x")
    count = min(count, present.height)
    order = np.argsort(-present["x"].to_numpy(), kind="stable")
    expected = np.sort(present["id"].to_numpy()[order[:count]]).tolist()
    assert collect(top_rows(frame.lazy(), "x", count))["id"].to_list() == expected


@pytest.mark.parametrize("descending", [False, True])
def test_sorted_blocks_put_a_few_nan_last_across_blocks(monkeypatch, descending):
    monkeypatch.setattr(_streaming, "_value_limit", 3)
    values = [0.5, math.nan, 0.1, 0.7, 0.2, math.nan, 0.3, 0.3, 0.9, 0.0]
    blocks = np.concatenate(
        list(sorted_blocks(pl.LazyFrame({"x": values}), "x", descending=descending))
    )
    expected = np.sort(values)[::-1] if descending else np.sort(values)
    np.testing.assert_array_equal(blocks, expected)  # NaN equal to NaN, in place
