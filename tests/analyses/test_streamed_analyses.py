"""The analyses of shift, tokens, failure, coverage, evolution and difficulty out of core (issue
32): given a LazyFrame over a multi-part Parquet table they give what they give for the same
rows as a DataFrame (counts exact, floats within 1e-9 relative), their own queries run on
polars' streaming engine without an in-memory fallback, and the statistics that need a sort or a
cut (medians, top-n means, top shares with ties) equal slow obvious references."""

from __future__ import annotations

import dataclasses
import math
import traceback
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from divscope import analyses
from divscope.analyses import _streaming
from divscope.analyses.evolution import _key_overlap
from divscope.analyses.shift import _top_rows_by_key
from divscope.analyses.tokens import normalized_token
from divscope.errors import DivscopeError
from divscope.params import Recovery
from divscope.testing import synthetic_tokens

OWN = ("shift", "tokens", "failure", "coverage", "evolution", "difficulty", "sampling")
"""The modules whose queries this file checks (the others' have their own tests)."""
FALLBACK = 'fillcolor="0.0 0.3 1.0"'
"""How polars' physical plan graph marks a node that falls back to the in-memory engine."""


def in_parts(frame: pl.DataFrame, folder: Path, n_parts: int = 3) -> pl.LazyFrame:
    """`frame` written as `n_parts` Parquet parts of uneven sizes that cut through responses,
    scanned lazily (the parts in order: the same rows in the same order)."""
    folder.mkdir(parents=True, exist_ok=True)
    cuts = [0, *sorted({frame.height * (2 * i + 1) // (2 * n_parts) for i in range(n_parts)})]
    for i, (start, end) in enumerate(zip(cuts, [*cuts[1:], frame.height], strict=True)):
        frame.slice(start, end - start).write_parquet(folder / f"part-{i:03d}.parquet")
    return pl.scan_parquet(folder / "*.parquet")


def tied(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with its divergences and entropies rounded coarsely: large ties at every cut."""
    rounded = [
        (pl.col(c) * 20).round().truediv(20).cast(pl.Float32)
        for c in ("js", "ce_base_rl", "entropy_base", "entropy_rl", "p_top1_rl")
    ]
    return frame.with_columns(rounded)


@pytest.fixture(params=["synthetic", "ties", "lab"])
def tables(request, tmp_path) -> tuple[pl.DataFrame, pl.LazyFrame]:
    """One token table as a DataFrame and as a scan of its parts: synthetic (`token_rows`), the
    same with heavy ties, and the lab's scored head (731 tokens)."""
    if request.param == "lab":
        frame = pl.read_parquet(request.getfixturevalue("lab_head_tokens_path"))
    else:
        frame = synthetic_tokens(n_prompts=10, n_samples=4, length=240, seed=3)
        frame = tied(frame) if request.param == "ties" else frame
    return frame, in_parts(frame, tmp_path / request.param)


@pytest.fixture(params=[None, 997], ids=["default", "limit997"])
def limit(request, monkeypatch):
    """The values one pass may hold: the default, or small enough that the order statistics
    refine, `response_scores` merges batch by batch and `evolution` groups in buckets."""
    if request.param is not None:
        monkeypatch.setattr(_streaming, "_value_limit", request.param)


@pytest.fixture
def streamed(monkeypatch) -> list[str]:
    """Every collect of a LazyFrame made from the modules of `OWN`, checked: the streaming
    engine and no in-memory fallback in its physical plan. Yields the offending call sites."""
    collect = pl.LazyFrame.collect
    offending = []

    def checked(self, *args, **kwargs):
        frames = [f for f in traceback.extract_stack() if "/divscope/analyses/" in f.filename]
        caller = Path(frames[-2 if frames[-1].name == "collect" else -1].filename).stem
        if caller in OWN:
            graph = self.show_graph(
                engine="streaming", plan_stage="physical", raw_output=True, show=False
            )
            if kwargs.get("engine") != "streaming" or FALLBACK in graph:
                offending.append(f"{caller}: {frames[-1].name}:{frames[-1].lineno}")
        return collect(self, *args, **kwargs)

    monkeypatch.setattr(pl.LazyFrame, "collect", checked)
    return offending


def assert_same(ours, theirs, where: str = "result") -> None:
    """Equal results: frames and dataclasses field by field, counts exact, floats within 1e-9
    relative (NaN equal to NaN)."""
    if isinstance(ours, pl.DataFrame):
        assert_frame_equal(ours, theirs, rel_tol=1e-9, abs_tol=0)
    elif dataclasses.is_dataclass(ours):
        for field in dataclasses.fields(ours):
            assert_same(getattr(ours, field.name), getattr(theirs, field.name), field.name)
    elif isinstance(ours, dict | list | tuple):
        assert type(ours) is type(theirs) and len(ours) == len(theirs), where
        pairs = ours.items() if isinstance(ours, dict) else enumerate(ours)
        for key, value in pairs:
            assert_same(value, theirs[key], f"{where}[{key}]")
    elif isinstance(ours, float):
        assert ours == pytest.approx(theirs, rel=1e-9, abs=0, nan_ok=True), where
    else:
        assert ours == theirs, where


def outcome(analysis, table):
    """The analysis of `table`, or the message of the DivscopeError it raises."""
    try:
        return analysis(table)
    except DivscopeError as error:
        return f"DivscopeError: {error}"


ANALYSES = {
    "entropy_by_divergence": lambda t: analyses.entropy_by_divergence(t, split=0.05),
    "entropy_density": lambda t: analyses.entropy_density(t, split=0.05, max_samples=300),
    "topk_overlap": lambda t: analyses.topk_overlap(t, thresholds=(0.0, 0.05, 0.1)),
    "rank_reordering": lambda t: analyses.rank_reordering(t, threshold=0.05),
    "tail_promotion": lambda t: analyses.tail_promotion(t, threshold=0.05, tail_cutoff=0.1),
    "entropy_iou": lambda t: analyses.entropy_iou(t, shares=(0.001, 0.01, 0.1, 0.5, 1.0)),
    "entropy_iou_ce": lambda t: analyses.entropy_iou(t, "ce_base_rl", shares=(0.02, 0.3)),
    "word_frequencies": lambda t: analyses.word_frequencies(t, high=0.05, low=0.01, top=5),
    "planning_enrichment": lambda t: [
        analyses.planning_enrichment(t, top_share=share) for share in (0.001, 0.01, 0.2, 1.0)
    ],
    "planning_enrichment_ce": lambda t: analyses.planning_enrichment(t, "ce_base_rl"),
    "token_profile": lambda t: analyses.token_profile(t, " so", percentiles=(50, 90)),
    "most_frequent_words": lambda t: analyses.most_frequent_words(t, top=4),
    "response_scores": lambda t: [analyses.response_scores(t, top_n=n) for n in (1, 7, 100)],
    "failure_auroc": lambda t: analyses.failure_auroc(t, n_boot=50),
    "failure_roc": lambda t: analyses.failure_roc(t, top_n=5),
    "path_coverage": lambda t: analyses.path_coverage(t, n_boot=50),
    "high_divergence_sample": lambda t: analyses.high_divergence_sample(
        t, ["p_top1_rl", "entropy_base"], threshold=0.01, max_rows=50, seed=4
    ),
}


@pytest.mark.parametrize("name", list(ANALYSES))
def test_a_lazy_table_in_parts_gives_the_dataframes_result(name, tables, limit, streamed):
    frame, lazy = tables
    ours = outcome(ANALYSES[name], lazy)
    assert not streamed, streamed
    assert_same(ours, outcome(ANALYSES[name], frame))


def test_evolution_over_tables_in_parts(tables, limit, streamed, tmp_path):
    frame, _ = tables
    # Three checkpoints on the same trajectories (divergence growing), and one that sampled
    # other responses (the last response left out).
    steps = {0: 0.2, 50: 0.6, 100: 1.0}
    frames = {s: frame.with_columns(pl.col("js") * scale) for s, scale in steps.items()}
    frames[25] = frames[50].filter(pl.col("sample_id") != pl.col("sample_id").max())
    lazies = {s: in_parts(f, tmp_path / f"step{s}") for s, f in frames.items()}
    ours = analyses.evolution(lazies, threshold=0.05, percentiles=(50, 99))
    assert not streamed, streamed
    assert_same(ours, analyses.evolution(frames, threshold=0.05, percentiles=(50, 99)))
    assert ours["same_trajectories"].to_list() == [True, False, True, True]
    assert_same(analyses.shared_trajectories(lazies), analyses.shared_trajectories(frames))


def test_by_difficulty_over_a_table_in_parts(tables, limit, streamed):
    frame, lazy = tables
    responses = frame.group_by("prompt_id", "sample_id").agg(pl.col("correct").first())
    tertiles = analyses.difficulty_tertiles(responses.filter(pl.col("sample_id") > 0))
    tertiles = tertiles.filter(pl.col("prompt_id") != tertiles["prompt_id"][0])  # one unrated
    recovery = Recovery(n_boot=30)
    ours = outcome(lambda t: analyses.by_difficulty(t, tertiles, recovery=recovery), lazy)
    assert not streamed, streamed
    theirs = outcome(lambda t: analyses.by_difficulty(t, tertiles, recovery=recovery), frame)
    assert_same(ours, theirs)


# ------------------------------------------------------------ slow obvious references


def test_medians_equal_numpys_of_the_float32_values(tables):
    frame, lazy = tables
    result = analyses.entropy_by_divergence(lazy, split=0.05)
    for group, selected in (("low", frame["js"] < 0.05), ("high", frame["js"] > 0.05)):
        row = result.filter(group=group).row(0, named=True)
        for column in ("entropy_base", "entropy_rl"):
            values = frame.filter(selected)[column].drop_nulls().to_numpy()
            assert row[f"median_{column}"] == (float(np.median(values)) if values.size else None)
    tail = analyses.tail_promotion(lazy, threshold=0.05, tail_cutoff=0.1)
    promoted = frame.filter((pl.col("js") > 0.05) & (pl.col("p_base_of_rl_top1") < 0.1))
    values = promoted["p_top1_rl"].to_numpy()
    expected = float(np.median(values)) if values.size else math.nan
    assert tail.tail_rl_prob_median == pytest.approx(expected, rel=0, abs=0, nan_ok=True)


def test_rank_reordering_counts_and_shares_by_hand(tables):
    frame, lazy = tables
    result = analyses.rank_reordering(lazy, threshold=0.05, max_rank=4)
    high = frame.filter(pl.col("js") > 0.05)
    assert result.n_positions == high.height
    for k in (1, 2, 3):
        ranks = high[f"rl_top{k}_rank_in_base"].drop_nulls().to_numpy()
        counts = result.distribution.filter(rl_token=k)["count"].to_list()
        assert counts == [int((ranks == r).sum()) for r in range(1, 5)] + [int((ranks > 4).sum())]
        assert result.within_base_top1[k] == pytest.approx(np.mean(ranks == 1), rel=1e-12)
        assert result.within_base_top3[k] == pytest.approx(np.mean(ranks <= 3), rel=1e-12)


def test_response_scores_equal_a_sort_of_each_response(tables, limit):
    frame, lazy = tables
    for top_n in (1, 3, 100):
        result = analyses.response_scores(lazy, top_n=top_n)
        for row in result.iter_rows(named=True):
            response = frame.filter(prompt_id=row["prompt_id"], sample_id=row["sample_id"])
            for column, score in (("js", "score"), ("entropy_base", "entropy_score")):
                values = np.sort(response[column].drop_nulls().to_numpy().astype(np.float64))
                expected = np.float32(values[::-1][:top_n].mean())
                assert row[score] == pytest.approx(float(expected), rel=1e-6)


def test_planning_enrichment_takes_the_first_tied_rows(tables, limit):
    frame, lazy = tables
    planning = frame.select(normalized_token())["token"].is_in(list(analyses.PLANNING_WORDS))
    values = frame["js"].to_numpy()
    for share in (0.001, 0.01, 0.2):
        result = analyses.planning_enrichment(lazy, top_share=share)
        top = np.lexsort((np.arange(values.size), -values))[: result.n_top]  # a stable sort
        assert result.share_top == pytest.approx(planning.to_numpy()[top].mean(), rel=1e-12)
        assert result.share_all == pytest.approx(planning.mean(), rel=1e-12)


def test_iou_top_rows_by_key_take_the_smallest_keys_at_the_cut(tables, limit):
    frame, lazy = tables
    keyed = frame.with_row_index("row")
    order = keyed.sort(
        ["js", "prompt_id", "sample_id", "position"], descending=[True] + [False] * 3
    )
    counts = [1, 17, frame.height // 3, frame.height]
    for m, chosen in zip(counts, _top_rows_by_key(lazy, "js", counts), strict=True):
        ours = sorted(keyed.filter(chosen)["row"].to_list())
        assert ours == sorted(order["row"].head(m).to_list())


def test_key_overlap_equals_sets(limit):
    rng = np.random.default_rng(5)
    first = pl.DataFrame({"k": rng.integers(0, 3000, 4000), "p": rng.integers(0, 2, 4000)})
    second = pl.DataFrame({"k": rng.integers(1000, 5000, 3000), "p": rng.integers(0, 2, 3000)})
    a, b = set(first.rows()), set(second.rows())
    counts = _key_overlap(first.lazy(), second.lazy(), ["k", "p"])
    assert counts == (len(a - b), len(b - a), len(a & b))


def test_sample_rows_are_a_seeded_subset_whatever_the_parts(tmp_path):
    frame = pl.DataFrame({"x": np.arange(10_000)})
    lazy = in_parts(frame, tmp_path, n_parts=4)
    sample = analyses.sample_rows(lazy, max_rows=300, seed=9)
    assert (sample.n_total, sample.rows.height, sample.sampled) == (10_000, 300, True)
    assert sample.rows.equals(analyses.sample_rows(frame.lazy(), max_rows=300, seed=9).rows)
    values = sample.rows["x"].to_numpy()
    assert np.all(np.diff(values) > 0)  # distinct, in table order
    assert abs(values.mean() - 5000) < 600  # spread over the table, not its head
    other = analyses.sample_rows(lazy, max_rows=300, seed=10).rows["x"].to_numpy()
    assert len(np.intersect1d(values, other)) < 60  # another seed, another sample


# ------------------------------------------------------------------ memory, measured

WRITE = """
import sys
import numpy as np, polars as pl

rows, folder = int(sys.argv[1]), sys.argv[2]
rng = np.random.default_rng(0)
size = 125_000  # rows per part: one size at every table size (polars decodes a part at once)
for part in range(rows // size):
    response = np.arange(part * size, (part + 1) * size) // (rows // 1000)  # 1000 responses
    js = rng.lognormal(-5, 2, response.size).astype(np.float32)
    pl.DataFrame({
        "prompt_id": np.char.add("p", (response // 8).astype(str)),
        "sample_id": response % 8,
        "position": np.arange(part * size, (part + 1) * size) % (rows // 1000),
        "token": rng.choice([" wait", " so", " the", " x", " =", " 2"], response.size),
        "js": js,
        "entropy_base": (rng.exponential(0.5, response.size) + 3 * js).astype(np.float32),
        "correct": response % 3 == 0,
    }).write_parquet(f"{folder}/part-{part:03d}.parquet")
"""
ANALYZE = """
import resource, sys
import polars as pl
from divscope import analyses

lazy = pl.scan_parquet(f"{sys.argv[1]}/*.parquet")
analyses.entropy_iou(lazy)
analyses.planning_enrichment(lazy)
analyses.word_frequencies(lazy)
analyses.response_scores(lazy)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


@pytest.mark.slow
def test_peak_memory_stays_flat_as_the_table_grows(tmp_path):
    """entropy_iou, planning_enrichment, word_frequencies and response_scores on a scan of 2 M
    and 8 M rows (1000 responses, 4x longer): the peak RSS barely grows with 4x the rows
    (`response_scores` holds O(responses · top_n) values, the others O(1) in the rows)."""
    import subprocess
    import sys

    peaks = {}
    for rows in (2_000_000, 8_000_000):
        folder = tmp_path / str(rows)
        folder.mkdir()
        subprocess.run([sys.executable, "-c", WRITE, str(rows), str(folder)], check=True)
        done = subprocess.run(
            [sys.executable, "-c", ANALYZE, str(folder)], capture_output=True, text=True, check=True
        )
        peaks[rows] = int(done.stdout) / 1024  # MiB
    assert peaks[8_000_000] <= 1.25 * peaks[2_000_000], peaks
