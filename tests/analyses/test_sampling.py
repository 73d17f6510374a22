"""sample_rows and high_divergence_sample."""

from __future__ import annotations

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
