"""cross_sampling_curve and pass_at_k_curve."""

from __future__ import annotations

import polars as pl
import pytest

from divscope.analyses import cross_sampling_curve, pass_at_k_curve
from divscope.errors import DivscopeError


def results(rows: list[tuple]) -> pl.DataFrame:
    """Rows of (prompt_id, policy, budget, correct, n_tokens, n_switches, n_effective)."""
    schema = ["prompt_id", "policy", "budget", "correct", "n_tokens", "n_switches", "n_effective"]
    return pl.DataFrame(rows, schema=schema, orient="row")


CONTROLS = [
    ("a", "base", -1, False, 10, 0, 0),
    ("a", "base", -1, False, 10, 0, 0),
    ("b", "base", -1, True, 10, 0, 0),
    ("b", "base", -1, False, 10, 0, 0),
    ("a", "rl", -1, True, 10, 0, 0),
    ("a", "rl", -1, True, 10, 0, 0),
    ("b", "rl", -1, True, 10, 0, 0),
    ("b", "rl", -1, True, 10, 0, 0),
]
FORWARD = [
    ("a", "forward", 2, True, 10, 1, 1),
    ("a", "forward", 2, False, 30, 2, 0),
    ("b", "forward", 2, True, 20, 0, 0),
    ("b", "forward", 2, True, 40, 2, 1),
]


def test_cross_sampling_curve_hand_computed():
    curve = cross_sampling_curve(results(CONTROLS + FORWARD), n_boot=50)
    assert curve.select("policy", "budget").rows() == [("base", -1), ("forward", 2), ("rl", -1)]
    forward = curve.filter(policy="forward").row(0, named=True)
    assert (forward["n_prompts"], forward["n_responses"]) == (2, 4)
    assert forward["accuracy"] == 0.75  # prompts a: 1/2, b: 2/2
    assert forward["recovery"] == pytest.approx((0.75 - 0.25) / (1.0 - 0.25))
    assert forward["switch_share_pooled"] == pytest.approx(5 / 100)
    assert forward["switch_share_mean"] == pytest.approx((0.1 + 2 / 30 + 0 + 0.05) / 4)
    assert forward["effective_share_pooled"] == pytest.approx(2 / 100)
    assert forward["effective_share_mean"] == pytest.approx((0.1 + 0 + 0 + 0.025) / 4)
    assert forward["accuracy_low"] <= 0.75 <= forward["accuracy_high"]
    controls = curve.filter(pl.col("policy") != "forward")["recovery"].to_list()
    assert controls == [0.0, 1.0]


def test_cross_sampling_curve_is_seeded():
    frame = results(CONTROLS + FORWARD)
    first = cross_sampling_curve(frame, n_boot=50, seed=1)
    assert first.equals(cross_sampling_curve(frame, n_boot=50, seed=1))


def test_recovery_is_null_without_controls_or_gain():
    curve = cross_sampling_curve(results(FORWARD), n_boot=10)
    assert curve["recovery"].to_list() == [None]
    no_gain = [
        (p, "rl" if pol == "rl" else pol, b, False, *rest) for p, pol, b, _, *rest in CONTROLS
    ]
    curve = cross_sampling_curve(results(no_gain + FORWARD), n_boot=10)
    assert curve.filter(policy="forward")["recovery"].to_list() == [None]


def test_cross_sampling_curve_skips_ungraded_and_needs_some():
    frame = results(CONTROLS + FORWARD).with_columns(pl.lit(None, pl.Boolean).alias("correct"))
    with pytest.raises(DivscopeError, match="no graded responses"):
        cross_sampling_curve(frame)


def test_pass_at_k_curve_hand_computed():
    rows = [("a", "rl", -1, c, 1, 0, 0) for c in (True, False, False, False)]
    rows += [("b", "rl", -1, c, 1, 0, 0) for c in (True, True, False, False)]
    curve = pass_at_k_curve(results(rows))
    assert curve["k"].to_list() == [1, 2, 4]
    # a: 1/4, 1 - 3/6, 1;  b: 2/4, 1 - 1/6, 1
    assert curve["pass_at_k"].to_list() == pytest.approx([0.375, (0.5 + 5 / 6) / 2, 1.0])
    assert curve["n_prompts"].to_list() == [2, 2, 2]
    assert curve.columns == ["policy", "budget", "k", "pass_at_k", "n_prompts"]


def test_pass_at_k_curve_rejects_k_beyond_the_samples():
    rows = [("a", "rl", -1, True, 1, 0, 0)] * 2
    with pytest.raises(DivscopeError, match="k=4"):
        pass_at_k_curve(results(rows), ks=[4])
