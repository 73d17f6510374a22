"""flips, flip_counts and base_flips: paired responses that change from wrong to right."""

from __future__ import annotations

import polars as pl
import pytest

from divscope.analyses import base_flips, flip_counts, flips
from divscope.errors import DivscopeError


def responses(outcomes: dict[tuple[str, str], str], **columns: object) -> pl.DataFrame:
    """{(policy, prompt): "TF.."} with sample ids 0.. in order, budget −1, seed 0."""
    rows = [
        (prompt, s, policy, -1, 0, letter == "T")
        for (policy, prompt), letters in outcomes.items()
        for s, letter in enumerate(letters)
    ]
    frame = pl.DataFrame(
        rows, schema=["prompt_id", "sample_id", "policy", "budget", "seed", "correct"], orient="row"
    )
    return frame.with_columns(pl.lit(v).alias(k) for k, v in columns.items())


OUTCOMES = {
    ("base", "a"): "FFTT",
    ("base", "b"): "FFFF",
    ("base", "c"): "TTTT",
    ("gated", "a"): "TFTF",  # sample 0 wrong -> right, sample 3 right -> wrong
    ("gated", "b"): "FTFF",  # sample 1 wrong -> right: the prompt flips to right
    ("gated", "c"): "FFFF",  # four right -> wrong: the prompt flips to wrong
}


def test_flips_hand_computed():
    table = flips(responses(OUTCOMES), "policy=base", "policy=gated")
    assert table.rows(named=True) == [
        {"level": "sample", "n": 12, "wrong_to_right": 2, "right_to_wrong": 5,
         "both_right": 1, "both_wrong": 4},
        {"level": "prompt", "n": 3, "wrong_to_right": 1, "right_to_wrong": 1,
         "both_right": 1, "both_wrong": 0},
    ]  # fmt: skip


def test_flips_pair_by_sample_and_seed():
    before = responses({("base", "a"): "FT"})
    after = responses({("gated", "a"): "TT"}).with_columns(seed=pl.lit(1))
    assert flip_counts(before, after)["n"].to_list() == [0, 0]
    only_first = responses({("gated", "a"): "T"})
    assert flip_counts(before, only_first).row(0) == ("sample", 1, 1, 0, 0, 0)


def test_base_flips_use_the_matched_control():
    at_one = responses(OUTCOMES, temperature=1.0)
    other = responses({("base", "a"): "TTTT", ("rl-replace", "a"): "FFFF"}, temperature=0.6)
    table = base_flips(pl.concat([at_one, other]))
    assert table["policy"].to_list() == ["gated", "rl-replace"]
    gated = table.filter(policy="gated").row(0, named=True)
    assert (gated["sample_wrong_to_right"], gated["sample_right_to_wrong"]) == (2, 5)
    replace = table.filter(policy="rl-replace").row(0, named=True)
    assert (replace["sample_n"], replace["sample_right_to_wrong"]) == (4, 4)
    assert base_flips(responses({("gated", "a"): "T"})) is None


def test_base_flips_refuse_a_missing_control():
    at_one = responses(OUTCOMES, temperature=1.0)
    other = responses({("rl-replace", "a"): "FFFF"}, temperature=0.6)
    with pytest.raises(DivscopeError, match="no `base` control matches the setting policy=rl"):
        base_flips(pl.concat([at_one, other]))
