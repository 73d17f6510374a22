"""summary: every analysis in one call, and its JSON form."""

from __future__ import annotations

import json

import polars as pl
import pytest

from divscope.analyses import summary, to_jsonable
from tests.synthetic import synthetic_tokens


def token_table(seed: int = 0) -> pl.DataFrame:
    """A complete token table: 3 prompts × 4 samples × 30 tokens."""
    return synthetic_tokens(3, 4, 30, min_length=30, seed=seed)


def cross_sample_results() -> pl.DataFrame:
    rows = [
        (f"p{p}", s, policy, budget, (p + s) % 3 < level, 20, switches, switches // 2)
        for p in range(3)
        for s in range(4)
        for policy, budget, level, switches in [
            ("base", -1, 1, 0),
            ("rl", -1, 2, 0),
            ("forward", 4, 2, 4),
        ]
    ]
    schema = ["prompt_id", "sample_id", "policy", "budget", "correct", "n_tokens"]
    return pl.DataFrame(rows, schema=[*schema, "n_switches", "n_effective"], orient="row")


def test_summary_matches_the_individual_analyses():
    from divscope import analyses

    frame = token_table()
    result = summary(frame.lazy(), n_boot=50)
    assert (result.n_tokens, result.n_responses, result.n_prompts) == (360, 12, 3)
    assert result.sparsity == analyses.sparsity(frame)
    assert result.lorenz.gini == analyses.lorenz(frame).gini
    assert result.topk_overlap.equals(analyses.topk_overlap(frame))
    assert result.failure_auroc == analyses.failure_auroc(frame, n_boot=50)
    assert result.comparison is None and result.cross_sampling is None and result.notes == ()


def test_summary_with_comparison_and_cross_sampling():
    result = summary(
        token_table(),
        label="rl",
        compare_with={"sft": token_table(seed=1)},
        cross_sample=cross_sample_results(),
        n_boot=20,
    )
    assert result.comparison["label"].to_list() == ["rl", "sft"]
    assert result.cross_sampling["policy"].to_list() == ["base", "forward", "rl"]
    assert result.pass_at_k["k"].to_list() == [1, 2, 4] * 3


def test_summary_keeps_cross_sample_settings_apart():
    frame = cross_sample_results()
    two_eps = frame.with_columns(
        pl.when(pl.col("policy") == "forward").then(0.05).alias("eps")
    ).vstack(frame.filter(policy="forward").with_columns(pl.lit(0.01).alias("eps")))
    result = summary(token_table(), cross_sample=two_eps, n_boot=10)
    assert result.cross_sampling.filter(policy="forward")["eps"].to_list() == [0.01, 0.05]
    forward = result.pass_at_k.filter(policy="forward")
    assert forward.select("eps", "k").rows() == [(e, k) for e in (0.01, 0.05) for k in (1, 2, 4)]


def test_summary_of_an_ungraded_table_notes_the_skipped_auroc():
    frame = token_table().with_columns(pl.lit(None, pl.Boolean).alias("correct"))
    result = summary(frame, n_boot=10)
    assert result.failure_auroc is None
    assert result.notes[0].startswith("failure_auroc skipped")


def test_summary_to_dict_is_strict_json():
    frame = token_table().with_columns(pl.lit(0.0, pl.Float32).alias("js"))  # NaN statistics
    document = summary(frame, n_boot=10).to_dict()
    text = json.dumps(document, allow_nan=False)
    assert json.loads(text)["lorenz"]["gini"] == 0.0
    assert document["sparsity"]["share_below"] == {"0.0001": 1.0, "0.001": 1.0, "0.01": 1.0}


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
