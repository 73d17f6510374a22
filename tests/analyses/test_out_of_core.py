"""Same numbers out of core: the streaming statistics on a lazy scan of Parquet parts equal a
slow, obvious in-memory float64 reference (a full sort, np.quantile, polars' in-memory
group-by), counts exactly and floats within 1e-9 relative; and `summary`'s JSON on the scan
equals its JSON on the collected DataFrame. Each runs with the default value limit (a column
collected in one pass) and with a tiny one that forces histogram refinement and a streaming
sort in many blocks."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from divscope.analyses import (
    _streaming,
    early_density,
    histogram,
    lorenz,
    matched_thresholds,
    positional_profile,
    sparsity,
)
from divscope.analyses._frames import top_count
from divscope.analyses.summary import Metrics, core_thresholds, summary
from divscope.io import read_token_table, scan_token_table
from divscope.params import Recovery
from divscope.testing import token_rows

REL = 1e-9


@pytest.fixture(params=[None, 500], ids=["one-pass", "refined"])
def limit(request, monkeypatch):
    """The values one pass may collect: the default, or 500 (refinement, many sorted blocks)."""
    if request.param is not None:
        monkeypatch.setattr(_streaming, "_value_limit", request.param)
    return request.param


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    """A synthetic token table of 60 responses in 3 Parquet parts (base and rl trajectories),
    with ties: 5% exact zeros, and ce_base_rl rounded so that its top 1% threshold ties."""
    rng = np.random.default_rng(7)
    folder = tmp_path_factory.mktemp("parts")
    first = 0
    for i, source in enumerate(["rl", "base", "rl"]):
        lengths = rng.integers(40, 160, 20)
        frame = token_rows(lengths, rng, n_samples=4, first=first, source=source)
        frame = frame.with_columns((pl.col("ce_base_rl") * 4).round(0) / 4)
        frame.write_parquet(folder / f"part-{i:05d}.parquet")
        first += lengths.size
    return folder


def close(a, b) -> bool:
    """Equal counts, or floats within REL relative (NaN equals NaN)."""
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == pytest.approx(b, rel=REL, abs=1e-300)
    return a == b


def same_json(a, b, where="") -> None:
    """Assert two JSON-ready values are equal: counts exactly, floats within REL."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for key in a:
            same_json(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same_json(x, y, f"{where}[{i}]")
    else:
        assert close(a, b), f"{where}: {a!r} != {b!r}"


def same_frame(a: pl.DataFrame, b: pl.DataFrame) -> None:
    assert a.schema == b.schema
    same_json(a.to_dicts(), b.to_dicts())


# The slow, obvious references: everything in memory, sorted in full, in float64.


def reference_sparsity(frame, metric, thresholds, percentiles):
    values = frame[metric].drop_nulls().to_numpy().astype(np.float64)
    return (
        values.size,
        float(values.mean()),
        [float(np.mean(values < t)) for t in thresholds],
        np.quantile(values, np.asarray(percentiles) / 100).tolist(),
    )


def reference_lorenz(frame, metric, n_points=101, mass_shares=(0.5, 0.8, 0.9)):
    values = np.sort(frame[metric].drop_nulls().to_numpy().astype(np.float64))
    n, total = values.size, values.sum()
    cumulative = np.concatenate([[0.0], np.cumsum(values)]) / total
    share = np.linspace(0, 1, n_points)
    curve = np.interp(share * n, np.arange(n + 1), cumulative)
    ranks = np.arange(1, n + 1, dtype=np.float64)
    gini = 2 * float(ranks @ values) / (n * total) - (n + 1) / n
    from_top = np.cumsum(values[::-1])
    needed = np.searchsorted(from_top, np.asarray(mass_shares) * total * (1 - 1e-12)) + 1
    return gini, curve, {q: m / n for q, m in zip(mass_shares, needed, strict=True)}


def reference_histogram(frame, metric, bins):
    values = frame[metric].drop_nulls().to_numpy().astype(np.float64)
    positive = values[values > 0]
    edges = np.geomspace(positive.min(), positive.max(), bins + 1)
    index = np.searchsorted(edges, values, side="right") - 1
    index[values == edges[-1]] = bins - 1
    counts = np.bincount(index[(index >= 0) & (index < bins)], minlength=bins)
    return edges.tolist(), counts.tolist(), int((index < 0).sum()), int((index >= bins).sum())


def reference_matched(frame, metric, thresholds, reference="js"):
    both = frame.select(reference, metric).drop_nulls()
    values = np.sort(both[metric].to_numpy())  # in the column's dtype, as documented
    base = both[reference].to_numpy()
    n = values.size
    out = []
    for t in thresholds:
        k = int((base > t).sum())
        value = values[n - k - 1] if k < n else np.nextafter(values[0], -np.inf)
        out.append((k / n, float(value), float((values > value).sum()) / n))
    return out


def position_bins(frame, bins):
    return (frame["position"].cast(pl.Int64) * bins // frame["n_tokens"].cast(pl.Int64)).clip(
        0, bins - 1
    )


def reference_profile(frame, metric, bins=20):
    binned = frame.select(metric).with_columns(position_bins(frame, bins).alias("bin"))
    stats = (
        binned.drop_nulls(metric)
        .group_by("bin")
        .agg(
            pl.len().alias("count"),
            pl.col(metric).mean().alias("mean"),
            pl.col(metric).median().alias("median"),
            *(
                pl.col(metric).quantile(q / 100, interpolation="linear").alias(f"p{q}")
                for q in (10, 25, 75, 90)
            ),
        )
    )
    return {row["bin"]: row for row in stats.to_dicts()}


def reference_early(frame, metric, top_share=0.01, bins=20):
    rows = frame.select(metric).with_columns(position_bins(frame, bins).alias("bin"))
    rows = rows.drop_nulls(metric)
    # Sort by value descending, ties by row order (stable): the first n_top rows are the top.
    order = np.argsort(-rows[metric].to_numpy().astype(np.float64), kind="stable")
    n_top = top_count(rows.height, top_share)
    chosen = rows["bin"].to_numpy()[order[:n_top]]
    return np.bincount(chosen, minlength=bins).tolist(), n_top


# The tables: the synthetic parts, and the lab's first 8 trajectories.


@pytest.fixture(params=["synthetic", "lab"])
def table(request, parts, lab_head_tokens_path):
    path = parts if request.param == "synthetic" else lab_head_tokens_path
    return scan_token_table(path), read_token_table(path)


@pytest.mark.parametrize("metric", ["js", "ce_base_rl"])
def test_sparsity_equals_the_reference(table, metric, limit):
    lazy, frame = table
    thresholds, percentiles = (1e-4, 1e-3, 1e-2, 0.5), (0, 10, 25, 50, 90, 99, 99.9, 100)
    result = sparsity(lazy, metric, thresholds=thresholds, percentiles=percentiles)
    n, mean, shares, quantiles = reference_sparsity(frame, metric, thresholds, percentiles)
    assert result.n_tokens == n and close(result.mean, mean)
    assert list(result.share_below.values()) == shares
    assert list(result.percentiles.values()) == quantiles  # np.quantile's, bit for bit


@pytest.mark.parametrize("metric", ["js", "ce_base_rl"])
def test_lorenz_and_gini_equal_the_reference(table, metric, limit):
    lazy, frame = table
    result = lorenz(lazy, metric)
    gini, curve, shares = reference_lorenz(frame, metric)
    assert close(result.gini, gini)
    np.testing.assert_allclose(result.curve["mass_share"].to_numpy(), curve, rtol=REL, atol=0)
    assert result.token_share_for_mass == shares
    if limit is None:  # one block: NumPy's own sums of the sorted column, bit for bit
        assert result.curve["mass_share"].to_list() == curve.tolist()


def test_histogram_equals_the_reference(table, limit):
    lazy, frame = table
    result = histogram(lazy, "ce_base_rl", bins=40, log=True)
    edges, counts, below, above = reference_histogram(frame, "ce_base_rl", 40)
    assert (list(result.edges), list(result.counts)) == (edges, counts)
    assert (result.n_below, result.n_above) == (below, above)


@pytest.mark.parametrize("metric", ["kl_rl_base", "ce_base_rl"])
def test_matched_thresholds_equal_the_reference(table, metric, limit):
    lazy, frame = table
    thresholds = (0.0, 1e-4, 0.01, 0.1, 0.2, 10.0)
    result = matched_thresholds(lazy, metric, thresholds)
    expected = reference_matched(frame, metric, thresholds)
    assert [(m.share_above, m.value, m.metric_share_above) for m in result] == expected


@pytest.mark.parametrize("metric", ["js", "ce_base_rl"])
def test_positional_profile_equals_polars_in_memory(table, metric, limit):
    lazy, frame = table
    result = positional_profile(lazy, metric)
    expected = reference_profile(frame, metric)
    for row in result.to_dicts():
        if row["count"] == 0:
            assert row["bin"] not in expected and row["median"] is None
            continue
        reference = expected[row["bin"]]
        for name in ("count", "median", "p10", "p25", "p75", "p90"):
            assert row[name] == reference[name], name  # the exact quantiles, in float32
        assert close(row["mean"], reference["mean"])
    assert result["median"].dtype == frame[metric].dtype


def test_early_density_equals_a_stable_sort(table, limit):
    lazy, frame = table
    result = early_density(lazy, "ce_base_rl", top_share=0.01)
    counts, n_top = reference_early(frame, "ce_base_rl")
    assert result["count"].to_list() == counts
    np.testing.assert_allclose(result["density"].to_numpy(), np.array(counts) / n_top * 20)


def test_early_density_resolves_a_tie_at_the_threshold_to_the_first_rows(limit):
    # Six rows tie at 1.0 for the last four places of the top five: the first four win.
    frame = pl.DataFrame(
        {
            "position": [0, 1, 2, 3, 4, 5, 6, 7],
            "n_tokens": [8] * 8,
            "js": [0.0, 1.0, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0],
        }
    )
    for tokens in (frame, frame.lazy()):
        result = early_density(tokens, top_share=5 / 8, bins=8)
        assert result["count"].to_list() == [0, 1, 1, 1, 1, 1, 0, 0]


def test_core_thresholds_carried_out_of_core_equal_the_reference(table, limit):
    lazy, frame = table
    carried, mapping = core_thresholds(lazy, "kl_rl_base", rescale=True)
    expected = reference_matched(frame, "kl_rl_base", [m.threshold for m in mapping])
    assert [(m.share_above, m.value) for m in mapping] == [e[:2] for e in expected]
    assert carried.rank == dict((m.threshold, m.value) for m in mapping)[0.1]


def test_summary_json_of_a_scan_equals_the_in_memory_json(table, limit):
    lazy, frame = table
    recovery = Recovery(n_boot=20, seed=1)
    scanned = summary(lazy, recovery=recovery).to_dict()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_streaming, "_value_limit", _streaming.DEFAULT_VALUE_LIMIT)
        in_memory = summary(frame, recovery=recovery).to_dict()
    same_json(scanned, in_memory)
    assert scanned["n_tokens"] == frame.height
    assert scanned["n_responses"] == frame.select("prompt_id", "sample_id").unique().height


def test_summary_under_a_memory_cap_gives_the_same_json(parts):
    lazy = scan_token_table(parts)
    recovery = Recovery(n_boot=20, seed=1)
    capped = summary(lazy, Metrics(max_memory=1 << 20), recovery).to_dict()
    same_json(capped, summary(lazy, recovery=recovery).to_dict())
    assert _streaming.value_limit() == _streaming.DEFAULT_VALUE_LIMIT


@pytest.mark.slow
def test_summary_json_on_the_whole_lab_equals_the_in_memory_json(lab_tokens_path, monkeypatch):
    recovery = Recovery(n_boot=20, seed=1)
    in_memory = summary(read_token_table(lab_tokens_path), recovery=recovery).to_dict()
    monkeypatch.setattr(_streaming, "_value_limit", 2000)
    same_json(summary(scan_token_table(lab_tokens_path), recovery=recovery).to_dict(), in_memory)
