"""summary: every analysis in one call, paper by paper, and its JSON form."""

from __future__ import annotations

import dataclasses
import importlib
import json

import numpy as np
import polars as pl
import pytest

from divscope import analyses
from divscope.analyses import CoreThresholds, Metrics, summary, to_jsonable
from divscope.analyses.cross_sample_report import cross_sample_report
from divscope.analyses.summary import CORE_PAPER
from divscope.analyses.tokens import PLANNING_WORDS
from divscope.errors import DivscopeError
from divscope.formatting import cross_sample_text
from divscope.params import Recovery
from divscope.testing import synthetic_results, synthetic_tokens

SUMMARY_MODULE = importlib.import_module("divscope.analyses.summary")


def same(a, b) -> bool:
    """Equality of results that hold frames (which have no truth value)."""
    return to_jsonable(a) == to_jsonable(b)


def token_table(seed: int = 0) -> pl.DataFrame:
    """A complete token table: 3 prompts × 4 samples × 30 tokens."""
    return synthetic_tokens(3, 4, 30, min_length=30, seed=seed)


def test_the_core_section_is_the_core_papers_statistics_on_js():
    frame = token_table()
    core = summary(frame.lazy(), recovery=Recovery(n_boot=50)).core
    assert (core.metric, core.rescaled, core.paper) == ("js", None, CORE_PAPER)
    assert core.thresholds == CoreThresholds()
    assert core.sparsity == analyses.sparsity(frame, "js", thresholds=(1e-4, 1e-3, 1e-2))
    assert core.positional_profile.equals(analyses.positional_profile(frame, "js"))
    assert core.entropy_by_divergence.equals(analyses.entropy_by_divergence(frame, split=0.1))
    overlap = analyses.topk_overlap(frame, "js", thresholds=(0.01, 0.05, 0.1, 0.2))
    assert core.topk_overlap.equals(overlap)
    assert core.rank_reordering.threshold == core.tail_promotion.threshold == 0.1
    assert same(core.tail_promotion, analyses.tail_promotion(frame, "js", threshold=0.1))
    words = analyses.word_frequencies(frame, "js", high=0.1, low=0.01, top=20)
    assert core.word_frequencies.equals(words)
    assert core.comparison is None


def test_the_takeover_section_is_the_takeover_papers_statistics_on_ce():
    frame = token_table()
    result = summary(frame, recovery=Recovery(n_boot=50))
    takeover = result.takeover
    assert takeover.metric == "ce_base_rl"
    assert takeover.lorenz.gini == analyses.lorenz(frame, "ce_base_rl").gini
    density = analyses.early_density(frame, "ce_base_rl", top_share=0.01)
    assert takeover.early_density.equals(density)
    planning = analyses.planning_enrichment(frame, "ce_base_rl", top_share=0.01)
    assert takeover.planning_enrichment == planning
    failure = analyses.failure_auroc(frame, "ce_base_rl", top_n=100, n_boot=50)
    assert takeover.failure_auroc == failure
    assert takeover.entropy_iou.equals(analyses.entropy_iou(frame, "ce_base_rl"))
    assert takeover.entropy_iou["share"].to_list() == [0.01, 0.05, 0.1, 0.2]
    assert takeover.notes == ()
    assert result.rast.path_coverage == analyses.path_coverage(frame, n_boot=50)
    assert (result.n_tokens, result.n_responses, result.n_prompts) == (360, 12, 3)
    assert result.cross_sample is None


def test_no_threshold_reaches_the_takeover_section():
    # The takeover statistics rank tokens: the JS column (and its thresholds) cannot move them.
    frame = token_table()
    louder = frame.with_columns(pl.col("js") * 1000)
    assert same(
        summary(louder, recovery=Recovery(n_boot=20)).takeover,
        summary(frame, recovery=Recovery(n_boot=20)).takeover,
    )
    field_names = {f.name for f in dataclasses.fields(analyses.TakeoverSection)}
    assert not {name for name in field_names if "threshold" in name}


@pytest.mark.parametrize(
    "kwargs,expected",
    [
        ({}, ("js", "ce_base_rl")),
        ({"metric": "js_full"}, ("js_full", "js_full")),
        ({"takeover_metric": "kl_base_rl"}, ("js", "kl_base_rl")),
        ({"core_metric": "js_full", "takeover_metric": "kl_rl_base"}, ("js_full", "kl_rl_base")),
    ],
)
def test_metrics_per_section(kwargs, expected):
    assert Metrics(**kwargs).sections == expected
    result = summary(token_table(), Metrics(**kwargs), Recovery(n_boot=10))
    assert (result.core.metric, result.takeover.metric) == expected
    assert result.core.thresholds == CoreThresholds()  # js and js_full keep the paper's values


@pytest.mark.parametrize(
    "kwargs",
    [{"metric": "ce_base_rl"}, {"core_metric": "ce_base_rl"}, {"core_metric": "kl_rl_base"}],
)
def test_js_thresholds_on_another_core_metric_are_refused(kwargs):
    with pytest.raises(DivscopeError) as error:
        summary(token_table(), Metrics(**kwargs), Recovery(n_boot=10))
    message = str(error.value)
    assert "near-zero 0.0001/0.001/0.01, entropy split 0.1, top-k overlap 0.01/0.05/0.1/0.2" in (
        message
    )
    assert "ranks 0.1, tails 0.1, word clouds 0.1/0.01" in message
    assert "--takeover-metric the takeover section alone" in message
    assert "pass --rescale-thresholds (rescale_thresholds=True)" in message


def test_rescaled_thresholds_are_the_same_quantiles_of_the_core_metric():
    frame = token_table()
    result = summary(
        frame, Metrics(core_metric="ce_base_rl", rescale_thresholds=True), Recovery(n_boot=10)
    )
    core = result.core
    js = frame["js"].to_numpy()
    ce = np.sort(frame["ce_base_rl"].to_numpy())
    expected = {}
    for t in (1e-4, 1e-3, 0.01, 0.05, 0.1, 0.2):
        k = int((js > t).sum())
        expected[t] = float(ce[ce.size - k - 1])  # k of the values lie above it
    assert {m.threshold: m.value for m in core.rescaled} == expected
    assert {m.threshold: m.share_above for m in core.rescaled} == {
        t: float(np.mean(js > t)) for t in expected
    }
    # Each statistic applies the carried value of its JS threshold.
    assert core.thresholds == CoreThresholds(
        near_zero=(expected[1e-4], expected[1e-3], expected[0.01]),
        entropy_split=expected[0.1],
        overlap=(expected[0.01], expected[0.05], expected[0.1], expected[0.2]),
        rank=expected[0.1],
        tail=expected[0.1],
        words_high=expected[0.1],
        words_low=expected[0.01],
    )
    assert core.topk_overlap["threshold"].to_list() == pytest.approx(core.thresholds.overlap)
    assert core.rank_reordering.threshold == expected[0.1]
    # The same number of tokens as js > 0.1 (no ties in the synthetic CE).
    assert core.rank_reordering.n_positions == int((js > 0.1).sum())
    assert core.sparsity.metric == "ce_base_rl"
    # Rank-based statistics need no rescaling: the takeover section is unchanged.
    assert same(result.takeover, summary(frame, recovery=Recovery(n_boot=10)).takeover)


def test_rescaling_a_js_core_metric_changes_nothing():
    frame = token_table()
    rescaled = summary(frame, Metrics(rescale_thresholds=True), Recovery(n_boot=10))
    assert rescaled.core.rescaled is None
    assert same(rescaled.core, summary(frame, recovery=Recovery(n_boot=10)).core)


def test_the_comparison_uses_the_core_metric_and_its_thresholds():
    result = summary(token_table(), label="rl", compare_with={"sft": token_table(seed=1)})
    comparison = result.core.comparison
    assert comparison["label"].to_list() == ["rl", "sft"]
    assert comparison.equals(
        analyses.compare({"rl": token_table(), "sft": token_table(seed=1)}, "js")
    )


def test_the_cross_sample_report_is_wired_through(monkeypatch):
    calls = []

    @dataclasses.dataclass(frozen=True)
    class Report:
        value: int

    def report(results, recovery, **kwargs):
        calls.append((results, {"recovery": recovery, **kwargs}))
        return Report(1)

    monkeypatch.setattr(SUMMARY_MODULE, "cross_sample_report", report)
    results = synthetic_results(3, 2)
    graded = pl.DataFrame({"prompt_id": ["p0"], "correct": [True]})
    frame = token_table()
    result = summary(
        frame,
        cross_sample=results,
        reference=graded,
        differences=["forward - random"],
        recovery=Recovery(recovery_at=8, n_boot=10, seed=3),
    )
    assert result.cross_sample == Report(1)
    ((passed, kwargs),) = calls
    assert passed is results
    tokens = kwargs.pop("tokens")  # the token table, lazily (never collected), for token reports
    assert isinstance(tokens, pl.LazyFrame)
    assert tokens.collect().height == frame.height
    assert {"token", "js", "ce_base_rl"} <= set(tokens.collect_schema().names())
    assert kwargs == {
        "recovery": Recovery(recovery_at=8, n_boot=10, seed=3),
        "reference": graded,
        "differences": ("forward - random",),
        "lexicon": PLANNING_WORDS,  # the planning words of the takeover set: --planning-words
    }
    assert result.to_dict()["cross_sample"] == {"value": 1}


def test_the_cross_sample_report_is_the_reports_own():
    results = synthetic_results(3, 2).filter(pl.col("policy") != "gated")
    frame = token_table()
    result = summary(
        frame, cross_sample=results, recovery=Recovery(recovery_at=2, n_boot=10, seed=1)
    )
    expected = cross_sample_report(
        results, tokens=frame, recovery=Recovery(recovery_at=2, n_boot=10, seed=1)
    )
    assert cross_sample_text(result.cross_sample) == cross_sample_text(expected)
    assert json.dumps(result.to_dict(), allow_nan=False)


def test_cross_sample_options_need_results():
    with pytest.raises(DivscopeError, match="pass the results too"):
        summary(token_table(), recovery=Recovery(recovery_at=8))


def test_summary_of_an_ungraded_table_notes_the_skipped_auroc():
    frame = token_table().with_columns(pl.lit(None, pl.Boolean).alias("correct"))
    result = summary(frame, recovery=Recovery(n_boot=10))
    assert result.takeover.failure_auroc is None
    assert result.takeover.notes[0].startswith("failure_auroc skipped")


def test_summary_to_dict_is_strict_json_with_labelled_sections():
    frame = token_table().with_columns(pl.lit(0.0, pl.Float32).alias("js"))  # NaN statistics
    frame = frame.with_columns(pl.lit(0.0, pl.Float32).alias("ce_base_rl"))
    document = summary(frame, recovery=Recovery(n_boot=10)).to_dict()
    text = json.dumps(document, allow_nan=False)
    assert json.loads(text)["takeover"]["lorenz"]["gini"] == 0.0
    assert document["core"]["sparsity"]["share_below"] == {
        "0.0001": 1.0,
        "0.001": 1.0,
        "0.01": 1.0,
    }
    assert (document["core"]["metric"], document["takeover"]["metric"]) == ("js", "ce_base_rl")
    assert document["core"]["paper"].startswith("Sparse but Critical")
    assert document["takeover"]["paper"].startswith("Reasoning Can Be Restored")
    assert document["rast"]["paper"].startswith("RAST")
    assert set(document) == {
        "n_tokens", "n_responses", "n_prompts", "core", "takeover", "rast", "cross_sample",
        "difficulty",
    }  # fmt: skip


@pytest.mark.parametrize(
    "value,expected",
    [
        (float("nan"), None),
        ({1.5: (1, float("inf"))}, {"1.5": [1, None]}),
        (pl.DataFrame({"a": [1, 2]}), [{"a": 1}, {"a": 2}]),
    ],
)
def test_to_jsonable(value, expected):
    assert to_jsonable(value) == expected
