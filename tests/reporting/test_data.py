"""The token viewer's JSON document: fields, sizes, the sample, rounding and escaping."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest

from divscope.errors import DivscopeError
from divscope.reporting import data
from divscope.testing import synthetic_tokens

PER_TOKEN = ("token", "top1_base", "top1_rl", "rl_top1_rank_in_base", *data.FLOAT_COLUMNS)


@pytest.fixture(scope="module")
def tokens() -> pl.DataFrame:
    return synthetic_tokens(n_prompts=6, n_samples=4, length=40)


def test_document_fields_and_sizes(tokens):
    doc = data.viewer_document(tokens, responses=6, seed=0)
    assert doc["version"] == 1
    assert doc["columns"] == ["js", "ce_base_rl", "kl_base_rl", "entropy_base"]
    assert set(doc["thresholds"]) == set(doc["columns"]) and doc["thresholds"]["js"] == 0.1
    assert doc["included"] == {
        "responses_total": 24, "top": 3, "sampled": 3, "seed": 0,
        "rule": "the 3 most divergent (max js) and a seeded random sample of 3 others",
    }  # fmt: skip
    assert len(doc["responses"]) == 6
    assert len(doc["strings"]) == len(set(doc["strings"]))
    lengths = tokens.group_by("prompt_id", "sample_id").len()
    for response in doc["responses"]:
        n = response["n_tokens"]
        key = (pl.col("prompt_id") == response["prompt_id"]) & (
            pl.col("sample_id") == response["sample_id"]
        )
        assert lengths.filter(key)["len"].item() == n
        for column in PER_TOKEN:
            assert len(response[column]) == n, column
        rows = tokens.filter(key).sort("position")
        assert [doc["strings"][i] for i in response["token"]] == rows["token"].to_list()
        assert [doc["strings"][i] for i in response["top1_rl"]] == [
            f"id {i}" for i in rows["top1_rl"].to_list()
        ]
        assert response["n_high"] == (rows["js"] > 0.1).sum()
        assert response["max_js"] == data.rounded(rows["js"].max())
        assert response["mean_js"] == data.rounded(rows["js"].mean())
        assert response["correct"] == rows["correct"][0]


def test_selection_is_the_top_by_max_js_then_a_seeded_sample(tokens):
    stats = data.response_stats(tokens)
    doc = data.viewer_document(tokens, responses=7, seed=3)
    keys = [(r["prompt_id"], r["sample_id"]) for r in doc["responses"]]
    whys = [r["why"] for r in doc["responses"]]
    assert whys == ["top"] * 4 + ["sample"] * 3
    ranked = list(zip(stats["prompt_id"], stats["sample_id"], strict=True))
    assert keys[:4] == ranked[:4]
    assert set(keys[4:]) <= set(ranked[4:]) and len(set(keys)) == 7
    # Deterministic for a seed, another sample for another seed.
    again = data.viewer_document(tokens, responses=7, seed=3)
    assert again == doc
    others = {
        tuple((r["prompt_id"], r["sample_id"]) for r in
              data.viewer_document(tokens, responses=7, seed=s)["responses"][4:])
        for s in range(6)
    }  # fmt: skip
    assert len(others) > 1


def test_fewer_responses_than_asked_embeds_all(tokens):
    small = tokens.filter(pl.col("prompt_id") == "p0")
    doc = data.viewer_document(small, responses=20, seed=0)
    assert len(doc["responses"]) == 4
    assert doc["included"]["top"] == 4 and doc["included"]["sampled"] == 0
    one = data.viewer_document(tokens, responses=1, seed=0)
    assert [r["why"] for r in one["responses"]] == ["top"]
    with pytest.raises(DivscopeError, match="--responses 0"):
        data.viewer_document(tokens, responses=0, seed=0)


def test_floats_have_four_significant_digits_and_nan_is_null():
    assert data.rounded(0.000123456) == 0.0001235
    assert data.rounded(2.0 / 3.0) == 0.6667
    assert data.rounded(-1234567.0) == -1235000.0
    assert data.rounded(0.0) == 0.0
    assert data.rounded(float("nan")) is None and data.rounded(float("inf")) is None
    table = synthetic_tokens(n_prompts=1, n_samples=1, length=10).with_columns(
        js=pl.lit(0.123456789, dtype=pl.Float32),
        entropy_rl=pl.when(pl.col("position") == 0).then(float("nan")).otherwise(1 / 3),
    )
    (response,) = data.viewer_document(table, responses=1, seed=0)["responses"]
    assert set(response["js"]) == {0.1235}
    assert response["entropy_rl"][0] is None
    assert set(response["entropy_rl"][1:]) == {0.3333}
    for column in data.FLOAT_COLUMNS:
        for value in response[column]:
            assert value is None or value == float(f"{value:.4g}")


NASTY = [
    "</script><script>alert(1)</script>",
    "<!--",
    "a & b > c",
    "say \"hi\" 'there'",
    "line\nbreak\r\ttab",
    "😀",
    "漢字かな",
    "\u2028\u2029",
    "\\u003c",
]


def test_embedded_json_round_trips_and_cannot_close_the_script_tag():
    table = synthetic_tokens(n_prompts=1, n_samples=1, length=len(NASTY), min_length=len(NASTY))
    table = table.with_columns(token=pl.Series(NASTY))
    doc = data.viewer_document(table, responses=1, seed=0, decode=lambda i: "</SCRIPT>" + str(i))
    text = data.embed_json(doc)
    assert json.loads(text) == doc
    (response,) = json.loads(text)["responses"]
    assert [doc["strings"][i] for i in response["token"]] == NASTY
    for character in "<>&\u2028\u2029":
        assert character not in text
    assert "</script" not in text.lower() and "<!--" not in text
    assert "😀" in text and "漢字かな" in text  # kept as UTF-8, not escaped
    assert "\n" not in text


def test_decode_names_the_top1_tokens(tokens):
    doc = data.viewer_document(tokens, responses=2, seed=0, decode=lambda i: f"<{i}>")
    response = doc["responses"][0]
    row = tokens.filter(
        (pl.col("prompt_id") == response["prompt_id"])
        & (pl.col("sample_id") == response["sample_id"])
    ).sort("position")
    assert [doc["strings"][i] for i in response["top1_base"]] == [
        f"<{i}>" for i in row["top1_base"].to_list()
    ]


def test_thresholds_match_the_share_above_js_0_1(tokens):
    values = data.thresholds(tokens)
    share = (tokens["js"] > 0.1).mean()
    above = (tokens["ce_base_rl"] > values["ce_base_rl"]).mean()
    assert math.isclose(above, share, abs_tol=0.01)
    quiet = tokens.with_columns(js=pl.lit(0.0, dtype=pl.Float32))
    assert data.thresholds(quiet) == {
        "js": 0.1, "ce_base_rl": 1.0, "kl_base_rl": 1.0, "entropy_base": 1.0,
    }  # fmt: skip


def test_missing_column_is_named(tokens):
    with pytest.raises(DivscopeError, match="top1_rl"):
        data.viewer_document(tokens.drop("top1_rl"), responses=2, seed=0)
