"""`divscope.analyze` (file to file, atomic, refuses an existing output) and its `digest`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import divscope
from divscope.analyses import Metrics, summary
from divscope.errors import DivscopeError
from divscope.formatting import digest
from divscope.params import ModelPair, Output, Recovery
from divscope.schema import TOKEN_TABLE

LAB = Path(__file__).parents[2] / "fixtures" / "lab"


def token_table(*, js: np.ndarray, token: str, p_base_of_rl_top1: float) -> pl.DataFrame:
    """A complete token table: 4 prompts × 2 responses × 25 tokens, half the responses wrong."""
    n = js.size
    rng = np.random.default_rng(0)
    columns = {
        name: rng.random(n) if dtype.is_float() else rng.integers(1, 6, n)
        for name, dtype in TOKEN_TABLE.items()
        if dtype.is_numeric()
    }
    response = np.arange(n) // 25
    columns |= {
        "prompt_id": [f"p{r // 2}" for r in response],
        "sample_id": response % 2,
        "source": ["rl"] * n,
        "position": np.arange(n) % 25,
        "n_tokens": np.full(n, 25),
        "js": js,
        "token": [token] * n,
        "p_base_of_rl_top1": np.full(n, p_base_of_rl_top1),
        "correct": response % 2 == 0,
    }
    return pl.DataFrame(columns).select(pl.col(c).cast(d) for c, d in TOKEN_TABLE.items())


@pytest.fixture
def tokens(tmp_path) -> Path:
    js = np.random.default_rng(1).random(200) ** 4 * 0.69
    path = tmp_path / "rl.parquet"
    token_table(js=js, token=" wait", p_base_of_rl_top1=0.001).write_parquet(path)
    return path


def test_analyze_writes_the_summary_and_returns_it(tokens, tmp_path):
    out = tmp_path / "nested" / "summary.json"
    result = divscope.analyze(tokens, out, recovery=Recovery(n_boot=10))
    document = json.loads(out.read_text())
    assert document["tokens"] == str(tokens)
    assert document["metadata"] is None  # written by polars, not by `divscope score`
    assert document["n_tokens"] == result.n_tokens == 200
    assert document["takeover"]["lorenz"]["gini"] == pytest.approx(result.takeover.lorenz.gini)
    assert document["core"]["metric"] == "js" and document["cross_sample"] is None
    assert sorted(p.name for p in out.parent.iterdir()) == ["summary.json"]  # no temporary left


def test_analyze_refuses_an_existing_output_without_overwrite(tokens, tmp_path):
    out = tmp_path / "summary.json"
    out.write_text("earlier\n")
    with pytest.raises(DivscopeError, match="output exists; pass --overwrite"):
        divscope.analyze(tokens, out, recovery=Recovery(n_boot=10))
    assert out.read_text() == "earlier\n"
    divscope.analyze(tokens, Output(out, overwrite=True), recovery=Recovery(n_boot=10))
    assert json.loads(out.read_text())["n_tokens"] == 200


def test_a_failed_analyze_leaves_the_existing_output_and_no_temporary(tokens, tmp_path):
    out = tmp_path / "summary.json"
    out.write_text("earlier\n")
    with pytest.raises(DivscopeError, match="missing column"):
        divscope.analyze(tokens, Output(out, overwrite=True), Metrics("nope"))
    assert out.read_text() == "earlier\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rl.parquet", "summary.json"]


def test_digest_says_na_and_why_where_a_group_is_empty():
    # No position above the rank threshold (0.1), and no planning word.
    quiet = token_table(js=np.full(200, 0.05), token=" x", p_base_of_rl_top1=0.5)
    text = digest(summary(quiet, recovery=Recovery(n_boot=10)), source="quiet.parquet")
    assert (
        "High divergence (js > 0.1): 0 positions; RL top-1 rank in base n/a "
        "(no position above the threshold)"
    ) in text
    assert "Tail promotion: no high-divergence positions" in text
    assert (
        "Planning words: n/a (no planning words in the table; the paper: 1.9% of all tokens, "
        "with its own lexicon)"
    ) in text
    assert "nan" not in text.lower()
    # High-divergence positions, none promoted from the tail (base probability 0.5 >= 0.01).
    loud = token_table(js=np.full(200, 0.5), token=" x", p_base_of_rl_top1=0.5)
    text = digest(summary(loud, recovery=Recovery(n_boot=10)), source="loud.parquet")
    assert (
        "Tail promotion: 0 positions (0.00%) take an RL top-1 with base probability < 0.01; "
        "their mean RL probability n/a (no tail positions)"
    ) in text
    assert "nan" not in text.lower()


def test_digest_of_populated_groups_gives_the_numbers(tokens):
    text = digest(summary(pl.read_parquet(tokens), recovery=Recovery(n_boot=10)), source=tokens)
    assert text.startswith(f"{tokens}: 200 tokens, 8 responses, 4 prompts\n")
    assert "\nSparse but Critical (js)\n" in text
    assert "\nDecision-token takeover (ce_base_rl)\n" in text
    assert "\nRAST: path coverage\n" in text
    assert "IoU with the top base-entropy tokens: top 1% " in text
    assert "Words: js > 0.1: 'wait' 100.00%; js < 0.01: 'wait' 100.00%" in text
    # Every token is " wait", so the planning-word shares are 100% and the enrichment 1.
    assert (
        "Planning words (32-word lexicon): 100.00% of the top 1% vs 100.00% of all tokens "
        "(x1.00; the paper: 1.9% of all tokens, with its own lexicon)"
    ) in text
    assert "take an RL top-1 with base probability < 0.01; their mean RL probability 0." in text


def test_the_takeover_section_counts_the_planning_words_of_the_metrics(tmp_path):
    frame = token_table(js=np.zeros(200), token=" the", p_base_of_rl_top1=0.5)
    frame = frame.with_columns(
        token=pl.Series([" Hmm", " the"] * 100),
        ce_base_rl=pl.Series([5.0, 0.0, 4.0] + [0.1] * 197).cast(pl.Float32),
    )  # the top 1% (2 tokens): the two " Hmm" at rows 0 and 2
    words = tmp_path / "words.txt"
    words.write_text("The\n", encoding="utf-8")
    default = summary(frame, recovery=Recovery(n_boot=10))
    custom = summary(frame, Metrics(planning_words=words), Recovery(n_boot=10))
    plan = default.takeover.planning_enrichment
    assert (plan.share_all, plan.share_top, plan.n_words) == (0.5, 1.0, 32)  # "hmm" is planning
    plan = custom.takeover.planning_enrichment
    assert (plan.share_all, plan.share_top, plan.n_words) == (0.5, 0.0, 1)
    stored = custom.to_dict()["takeover"]["planning_enrichment"]
    assert (stored["share_all"], stored["paper_share_all"]) == (0.5, 0.019)
    assert (
        "Planning words (1-word lexicon): 0.00% of the top 1% vs 50.00% of all tokens "
        "(x0.00; the paper: 1.9% of all tokens, with its own lexicon)"
    ) in digest(custom, source="t.parquet")


@pytest.mark.slow
def test_digest_on_the_lab_finds_its_planning_words_and_prints_no_nan(lab_tokens_path, tmp_path):
    tokens = lab_tokens_path
    text = digest(
        divscope.analyze(tokens, tmp_path / "s.json", recovery=Recovery(n_boot=20)), source=tokens
    )
    # The lab's solutions open with "Let"/"First" and reflect with "Wait"/"Hmm".
    assert re.search(
        r"Planning words \(32-word lexicon\): [\d.]+% of the top 1% vs [\d.]+% of all tokens "
        r"\(x[\d.]+; the paper: 1.9% of all tokens",
        text,
    )
    assert "nan" not in text.lower()


@pytest.fixture(scope="module")
def eight_lab_tokens(tmp_path_factory) -> Path:
    """Eight lab trajectories (four right, four wrong) scored with the lab's base and RL."""
    directory = tmp_path_factory.mktemp("eight_lab")
    trajectories = pl.read_ndjson(LAB / "trajectories.jsonl")
    eight = trajectories.group_by("correct", maintain_order=True).head(4)
    eight.write_ndjson(directory / "eight.jsonl")
    out = directory / "tokens.parquet"
    divscope.score(directory / "eight.jsonl", ModelPair(str(LAB / "base"), str(LAB / "rl")),
                   out, progress=False)  # fmt: skip
    return out


def by_hand_auroc(scores: np.ndarray, positive: np.ndarray) -> float:
    """P(score of a positive > score of a negative) + ½ P(tie), pair by pair."""
    pairs = [(p, n) for p in scores[positive] for n in scores[~positive]]
    return sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in pairs) / len(pairs)


def test_analyze_on_the_lab_gives_both_sections_as_recomputed_by_hand(eight_lab_tokens, tmp_path):
    out = tmp_path / "summary.json"
    result = divscope.analyze(eight_lab_tokens, out, recovery=Recovery(n_boot=50))
    document = json.loads(out.read_text())
    table = pl.read_parquet(eight_lab_tokens).sort("prompt_id", "sample_id", "position")
    js = table["js"].to_numpy().astype(np.float64)
    ce = table["ce_base_rl"].to_numpy().astype(np.float64)
    n = js.size

    # The core paper's statistics, on js with its thresholds.
    core = document["core"]
    assert core["metric"] == "js" and core["rescaled"] is None
    assert core["sparsity"]["share_below"]["0.001"] == pytest.approx(np.mean(js < 1e-3))
    assert core["sparsity"]["percentiles"]["50.0"] == pytest.approx(np.percentile(js, 50))
    assert core["rank_reordering"]["n_positions"] == int((js > 0.1).sum())
    above = js > 0.05
    overlap = {row["threshold"]: row for row in core["topk_overlap"]}[0.05]
    assert overlap["count"] == int(above.sum())
    assert overlap["overlap_2"] == pytest.approx(table["overlap_2"].to_numpy()[above].mean())
    high = [row for row in core["entropy_by_divergence"] if row["group"] == "high"][0]
    assert high["mean_entropy_base"] == pytest.approx(
        table["entropy_base"].to_numpy()[js > 0.1].mean()
    )

    # The takeover paper's statistics, on ce_base_rl: they rank tokens.
    takeover = document["takeover"]
    assert takeover["metric"] == "ce_base_rl"
    x = np.sort(ce)
    gini = np.sum((2 * np.arange(1, n + 1) - n - 1) * x) / (n * x.sum())
    assert takeover["lorenz"]["gini"] == pytest.approx(gini)
    n_top = int(np.ceil(0.01 * n))
    top = np.argsort(-ce, kind="stable")[:n_top]
    first_bin = (table["position"].to_numpy() * 20 // table["n_tokens"].to_numpy())[top] == 0
    assert takeover["early_density"][0]["density"] == pytest.approx(first_bin.mean() * 20)
    entropy = table["entropy_base"].to_numpy().astype(np.float64)
    for row in takeover["entropy_iou"]:
        m = int(np.ceil(row["share"] * n - 1e-9))
        a = set(np.argsort(-ce, kind="stable")[:m])
        b = set(np.argsort(-entropy, kind="stable")[:m])
        assert row["iou"] == pytest.approx(len(a & b) / len(a | b))
    responses = table.group_by("prompt_id", "sample_id", maintain_order=True).agg(
        pl.col("correct").first(), pl.col("ce_base_rl").top_k(100).mean().alias("score")
    )
    failed = ~responses["correct"].to_numpy()
    assert takeover["failure_auroc"]["divergence"]["estimate"] == pytest.approx(
        by_hand_auroc(responses["score"].to_numpy(), failed)
    )

    # RAST's path coverage: the base greedy token is the trajectory's.
    covered = table.group_by("prompt_id", "sample_id").agg(
        (pl.col("token_id") == pl.col("top1_base")).mean().alias("share")
    )
    coverage = document["rast"]["path_coverage"]
    assert coverage["mean"]["estimate"] == pytest.approx(covered["share"].mean())
    pooled = np.mean(table["token_id"].to_numpy() == table["top1_base"].to_numpy())
    assert coverage["pooled"]["estimate"] == pytest.approx(pooled)

    text = digest(result, source=eight_lab_tokens)
    assert "Sparse but Critical (js)" in text and "Decision-token takeover (ce_base_rl)" in text
    assert "nan" not in text.lower()
