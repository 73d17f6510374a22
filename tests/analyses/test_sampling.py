"""sample_rows and high_divergence_sample."""

from __future__ import annotations

import numpy as np
import polars as pl

from divscope.analyses import high_divergence_sample, sample_rows


def test_sample_rows_is_seeded_and_reports_the_total():
    lazy = pl.LazyFrame({"x": range(100)})
    first = sample_rows(lazy, max_rows=10, seed=3)
    again = sample_rows(lazy, max_rows=10, seed=3)
    assert first.rows.equals(again.rows)
    assert (first.n_total, first.rows.height, first.sampled) == (100, 10, True)
    whole = sample_rows(lazy, max_rows=1000, seed=3)
    assert (whole.rows.height, whole.sampled) == (100, False)


def test_high_divergence_sample_keeps_only_rows_strictly_above():
    frame = pl.DataFrame({"js": [0.1, 0.2, 0.05], "p": [1.0, 2.0, 3.0]})
    assert high_divergence_sample(frame, ["p"], threshold=0.1).rows["p"].to_list() == [2.0]


def test_sample_rows_is_uniform_and_the_same_streamed_from_parts(tmp_path):
    """Every row is kept with probability max_rows / n (over seeds: each of 200 rows 10/200 of
    2,000 draws, 100 expected, binomial sd 9.7), in the table's order; and a scan of parts
    draws the rows the table in memory draws."""
    frame = pl.DataFrame({"x": range(200)})
    kept = np.zeros(200)
    for seed in range(2000):
        rows = sample_rows(frame.lazy(), max_rows=10, seed=seed).rows["x"].to_numpy()
        assert rows.size == 10 and np.all(np.diff(rows) > 0)
        kept[rows] += 1
    assert kept.sum() == 20_000 and kept.min() > 55 and kept.max() < 145
    assert abs(kept[:100].sum() - kept[100:].sum()) < 600  # no drift along the table
    for i in range(4):
        frame.slice(i * 50, 50).write_parquet(tmp_path / f"part-{i}.parquet")
    scanned = pl.scan_parquet(sorted(tmp_path.glob("part-*.parquet")))
    for seed in range(5):
        streamed = sample_rows(scanned, max_rows=7, seed=seed)
        assert streamed.rows.equals(sample_rows(frame.lazy(), max_rows=7, seed=seed).rows)
        assert streamed.n_total == 200
