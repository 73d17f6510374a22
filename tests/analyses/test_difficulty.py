"""difficulty_tertiles and by_difficulty: tie rules, row selection, hand-computed shares."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from divscope.analyses import (
    DIFFICULTY,
    by_difficulty,
    cross_sampling_curve,
    difficulty_tertiles,
    summary,
)
from divscope.analyses.summary import Metrics
from divscope.errors import DivscopeError
from divscope.io import read_table
from divscope.params import Recovery
from divscope.testing import synthetic_results, synthetic_tokens

LAB_TRAJECTORIES = Path(__file__).parents[2] / "fixtures" / "lab" / "trajectories.jsonl"


def graded(outcomes: dict[str, str]) -> pl.DataFrame:
    """One row per response: prompt -> its responses' grades as T/F letters."""
    rows = [
        {"prompt_id": prompt, "correct": letter == "T"}
        for prompt, letters in outcomes.items()
        for letter in letters
    ]
    return pl.DataFrame(rows)


@pytest.mark.parametrize(
    "outcomes, ties, expected",
    [
        # Untied: six prompts, two per tertile.
        ({"a": "FF", "b": "TFFF", "c": "TF", "d": "TTTF", "e": "TTTT", "f": "TTTTT"}, "together",
         [1, 1, 2, 2, 3, 3]),
        # Four prompts at 0 (positions 0-3, mid-rank 1.5: 3 · 2 / 7 < 1), then 0.5, 0.5, 1.
        ({"a": "F", "b": "F", "c": "F", "d": "F", "e": "TF", "f": "FT", "g": "T"}, "together",
         [1, 1, 1, 1, 3, 3, 3]),
        # The same cut by position (⌊3 (i + ½) / 7⌋ + 1): c and d (both 0) land in medium.
        ({"a": "F", "b": "F", "c": "F", "d": "F", "e": "TF", "f": "FT", "g": "T"}, "split",
         [1, 1, 2, 2, 2, 3, 3]),
        # One pass@1 shared by every prompt: all medium.
        ({"a": "TF", "b": "FT", "c": "TF"}, "together", [2, 2, 2]),
    ],
)  # fmt: skip
def test_tertiles_and_ties(outcomes, ties, expected):
    tertiles = difficulty_tertiles(graded(outcomes), ties=ties)
    assert tertiles["tertile"].to_list() == expected
    levels = ["hard", "medium", "easy"]
    assert tertiles["difficulty"].to_list() == [levels[t - 1] for t in expected]
    assert tertiles["difficulty"].dtype == DIFFICULTY
    assert tertiles["pass_at_1"].is_sorted()
    rates = dict(tertiles.select("prompt_id", "pass_at_1").rows())
    assert rates == {p: g.count("T") / len(g) for p, g in outcomes.items()}


def test_equal_pass_rates_never_straddle_a_cut():
    rng = np.random.default_rng(0)
    outcomes = {f"p{i:03d}": "".join(rng.choice(["T", "F"], 4)) for i in range(90)}
    tertiles = difficulty_tertiles(graded(outcomes))
    per_rate = tertiles.group_by("pass_at_1").agg(pl.col("tertile").n_unique())
    assert per_rate["tertile"].max() == 1
    split = difficulty_tertiles(graded(outcomes), ties="split")
    assert split.group_by("tertile").len().sort("tertile")["len"].to_list() == [30, 30, 30]


def test_cross_sample_results_use_the_base_control():
    results = pl.DataFrame(
        {
            "prompt_id": ["a", "a", "b", "b", "a", "b", "a", "b"],
            "policy": ["base"] * 4 + ["rl"] * 2 + ["base"] * 2,
            "force_prefix": [None] * 6 + ["Alright"] * 2,
            "temperature": [1.0] * 8,
            "correct": [True, False, False, None, True, True, False, True],
        }
    )
    tertiles = difficulty_tertiles(results)
    # b's ungraded response, the rl rows and the forced base rows are left out.
    assert tertiles.select("prompt_id", "n_samples", "pass_at_1").rows() == [
        ("b", 1, 0.0),
        ("a", 2, 0.5),
    ]
    two_samplings = results.with_columns(temperature=pl.Series([1.0, 0.6] * 4))
    with pytest.raises(DivscopeError, match="run at 2 samplings"):
        difficulty_tertiles(two_samplings)


def test_model_column_selects_the_base_model():
    table = graded({"a": "TT", "b": "FF"}).with_columns(model=pl.Series(["base", "rl"] * 2))
    with pytest.raises(DivscopeError, match="several models .* --difficulty-model"):
        difficulty_tertiles(table)
    assert difficulty_tertiles(table, model="base")["n_samples"].to_list() == [1, 1]
    with pytest.raises(DivscopeError, match="no response of model 'sft'"):
        difficulty_tertiles(table, model="sft")
    with pytest.raises(DivscopeError, match="no `model` column"):
        difficulty_tertiles(graded({"a": "T"}), model="base")
    with pytest.raises(DivscopeError, match="no graded base response"):
        difficulty_tertiles(pl.DataFrame({"prompt_id": ["a"], "correct": [None]}, strict=False))
    with pytest.raises(DivscopeError, match="ties must be one of"):
        difficulty_tertiles(table, model="base", ties="random")  # type: ignore[arg-type]


def test_lab_trajectories_tertiles():
    """The lab's 64 reference prompts, base samples 0-3: ties decide most of the split."""
    tertiles = difficulty_tertiles(read_table(LAB_TRAJECTORIES), model="base")
    sizes = tertiles.group_by("difficulty").agg(
        pl.len(), pl.col("pass_at_1").min().alias("low"), pl.col("pass_at_1").max().alias("high")
    )
    assert sizes.sort("difficulty").rows() == [
        ("hard", 26, 0.0, 0.0),
        ("medium", 28, 0.25, 0.25),
        ("easy", 10, 0.5, 0.75),
    ]


def token_table() -> pl.DataFrame:
    """Prompts h1, h2 (hard) and e1 (easy); one prompt (x) without a tertile."""
    js = {
        ("h1", 0): [0.3, 0.0, 0.02, 0.0],
        ("h1", 1): [0.0, 0.0],
        ("h2", 0): [0.5, 0.0005, 0.0, 0.0],
        ("e1", 0): [0.0, 0.0, 0.2, 0.0, 0.0, 0.0, 0.0, 0.0],
        ("x", 0): [0.6, 0.6],
    }
    rows = [
        {"prompt_id": p, "sample_id": s, "position": t, "n_tokens": len(v), "js": value}
        for (p, s), v in js.items()
        for t, value in enumerate(v)
    ]
    return pl.DataFrame(rows)


TERTILES = pl.DataFrame(
    {
        "prompt_id": ["h1", "h2", "e1"],
        "pass_at_1": [0.0, 0.25, 1.0],
        "difficulty": pl.Series(["hard", "hard", "easy"], dtype=DIFFICULTY),
    }
)


def test_by_difficulty_shares_by_hand():
    result = by_difficulty(
        token_table(), TERTILES, thresholds=(1e-3, 0.1), recovery=Recovery(n_boot=200)
    )
    table = result.sparsity
    assert table["difficulty"].to_list() == ["hard", "easy"]
    hard, easy = table.rows(named=True)
    assert (hard["n_prompts"], hard["n_responses"], hard["n_tokens"]) == (2, 3, 10)
    assert (hard["pass_at_1_min"], hard["pass_at_1_max"]) == (0.0, 0.25)
    assert hard["share_above_0.001"] == pytest.approx(3 / 10)  # 0.3, 0.02, 0.5
    assert hard["share_above_0.1"] == pytest.approx(2 / 10)
    assert hard["mean"] == pytest.approx((0.3 + 0.02 + 0.5 + 0.0005) / 10)
    assert easy["share_above_0.1"] == pytest.approx(1 / 8)
    assert hard["share_above_0.1_low"] <= hard["share_above_0.1"] <= hard["share_above_0.1_high"]
    # One easy prompt: resampling within the tertile cannot move its share.
    assert easy["share_above_0.1_low"] == easy["share_above_0.1_high"] == pytest.approx(1 / 8)
    assert hard["p50"] == pytest.approx(
        float(np.quantile([0.3, 0, 0.02, 0, 0, 0, 0.5, 0.0005, 0, 0], 0.5))
    )
    contrast = result.contrast.filter(statistic="share_above_0.1").row(0, named=True)
    assert contrast["difference"] == pytest.approx(1 / 8 - 2 / 10)
    assert contrast["difference_low"] <= contrast["difference"] <= contrast["difference_high"]
    assert result.n_unrated_prompts == 1 and "1 prompt(s)" in result.notes[0]
    assert set(result.positional["difficulty"]) == {"hard", "easy"}
    assert result.positional.filter(difficulty="easy")["count"].sum() == 8
    assert result.recovery is None


def test_by_difficulty_contrast_is_null_without_a_tertile():
    only_hard = TERTILES.filter(pl.col("difficulty") == "hard")
    result = by_difficulty(token_table(), only_hard, recovery=Recovery(n_boot=20))
    assert result.contrast["difference"].null_count() == result.contrast.height
    unknown = TERTILES.with_columns(pl.col("prompt_id") + "-other")
    with pytest.raises(DivscopeError, match="no prompt of the token table has a difficulty"):
        by_difficulty(token_table(), unknown, recovery=Recovery(n_boot=20))
    twice = pl.concat(
        [TERTILES, TERTILES.head(1).with_columns(difficulty=pl.lit("easy", DIFFICULTY))]
    )
    with pytest.raises(DivscopeError, match="prompt 'h1' has several tertiles"):
        by_difficulty(token_table(), twice, recovery=Recovery(n_boot=20))


def test_recovery_per_tertile_is_the_curve_of_its_prompts():
    rng = np.random.default_rng(1)
    rows = []
    for policy, budget, rate in (("base", -1, 0.2), ("rl", -1, 0.9), ("forward", 2, 0.6)):
        for prompt in ("h1", "h2", "e1", "x"):
            for sample in range(4):
                rows.append({
                    "prompt_id": prompt, "sample_id": sample, "policy": policy, "budget": budget,
                    "correct": bool(rng.random() < rate), "n_tokens": 10,
                    "n_switches": 0 if budget < 0 else 2, "n_effective": 0 if budget < 0 else 1,
                })  # fmt: skip
    results = pl.DataFrame(rows)
    result = by_difficulty(
        token_table(), TERTILES, results=results, recovery=Recovery(n_boot=50, seed=3)
    )
    hard = result.recovery.filter(difficulty="hard").drop("difficulty")
    expected = cross_sampling_curve(
        results.filter(pl.col("prompt_id").is_in(["h1", "h2"])), n_boot=50, seed=3
    )
    assert hard.equals(expected)
    assert result.recovery["difficulty"].unique().sort().to_list() == ["hard", "easy"]
    assert any("no prompt of the cross-sample results is medium" in n for n in result.notes)
    assert any("1 prompt(s) of the cross-sample results" in n for n in result.notes)


def test_summary_carries_the_thresholds_to_a_rescaled_core_metric():
    tokens, results = synthetic_tokens(), synthetic_results(n_prompts=8)
    tertiles = difficulty_tertiles(results)
    rescaled = summary(
        tokens,
        Metrics("ce_base_rl", rescale_thresholds=True),
        Recovery(n_boot=10),
        difficulty=tertiles,
    )
    matched = {m.threshold: m.value for m in rescaled.core.rescaled}
    assert rescaled.difficulty.metric == "ce_base_rl"
    assert rescaled.difficulty.thresholds == tuple(matched[t] for t in (1e-3, 1e-2, 0.1))
    plain = summary(tokens, difficulty=tertiles, cross_sample=results, recovery=Recovery(n_boot=10))
    assert plain.difficulty.thresholds == (1e-3, 1e-2, 0.1)
    assert plain.difficulty.recovery is not None
    assert summary(tokens, recovery=Recovery(n_boot=10)).difficulty is None
