"""cross_sampling_curve, setting_labels, pooled_controls, takeover_knee and pass_at_k_curve."""

from __future__ import annotations

import polars as pl
import pytest

from divscope.analyses import (
    cross_sampling_curve,
    pass_at_k_curve,
    pooled_controls,
    setting_labels,
    takeover_knee,
)
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


def test_cross_sampling_curve_without_setting_columns_has_the_old_columns():
    curve = cross_sampling_curve(results(CONTROLS + FORWARD), n_boot=10)
    assert curve.columns == [
        "policy", "budget", "n_prompts", "n_responses", "accuracy", "accuracy_low",
        "accuracy_high", "recovery", "recovery_low", "recovery_high", "switch_share_pooled",
        "switch_share_mean", "effective_share_pooled", "effective_share_mean",
    ]  # fmt: skip


def settings_results() -> pl.DataFrame:
    """Controls (base 0.25, RL 1.0), forward at two eps and random at two rates, budget 2."""
    rows = [(*row[:3], None, None, *row[3:]) for row in CONTROLS]
    for policy, eps, rate, correct_a, correct_b in [
        ("forward", 0.01, None, (True, False), (False, False)),
        ("forward", 0.05, None, (True, True), (True, False)),
        ("random", None, 0.1, (False, False), (True, False)),
        ("random", None, 0.2, (True, True), (True, True)),
    ]:
        for prompt, outcomes in (("a", correct_a), ("b", correct_b)):
            rows += [(prompt, policy, 2, eps, rate, c, 10, 1, 0) for c in outcomes]
    schema = ["prompt_id", "policy", "budget", "eps", "rate", "correct", "n_tokens"]
    return pl.DataFrame(rows, schema=[*schema, "n_switches", "n_effective"], orient="row")


@pytest.mark.parametrize(
    "policy,eps,rate,accuracy,recovery",
    [
        ("forward", 0.01, None, 0.25, 0.0),  # a: 1/2, b: 0/2
        ("forward", 0.05, None, 0.75, 2 / 3),  # a: 2/2, b: 1/2
        ("random", None, 0.1, 0.25, 0.0),  # a: 0/2, b: 1/2
        ("random", None, 0.2, 1.0, 1.0),  # a: 2/2, b: 2/2
        ("base", None, None, 0.25, 0.0),
        ("rl", None, None, 1.0, 1.0),
    ],
)
def test_cross_sampling_curve_keeps_settings_apart(policy, eps, rate, accuracy, recovery):
    curve = cross_sampling_curve(settings_results(), n_boot=20)
    row = curve.filter(
        pl.col("policy") == policy,
        pl.col("eps").eq_missing(eps),
        pl.col("rate").eq_missing(rate),
    ).rows(named=True)
    assert len(row) == 1
    assert row[0]["accuracy"] == pytest.approx(accuracy)
    assert row[0]["recovery"] == pytest.approx(recovery)
    assert (row[0]["n_prompts"], row[0]["n_responses"]) == (2, 4)


def test_cross_sampling_curve_sorts_by_setting_and_keeps_its_types():
    curve = cross_sampling_curve(settings_results(), n_boot=10)
    assert curve.columns[:4] == ["policy", "budget", "eps", "rate"]
    assert curve.select("policy", "eps", "rate").rows() == [
        ("base", None, None),
        ("forward", 0.01, None),
        ("forward", 0.05, None),
        ("random", None, 0.1),
        ("random", None, 0.2),
        ("rl", None, None),
    ]
    assert (curve.schema["eps"], curve.schema["rate"]) == (pl.Float64, pl.Float64)


@pytest.mark.parametrize(
    "policies,eps,rate,separator,expected",
    [
        (["forward", "forward"], [0.01, 0.05], [None, None], " ", ["eps 0.01", "eps 0.05"]),
        (["forward", "random"], [0.05, None], [None, 0.1], "=", ["", ""]),
        (["gated", "gated"], [None, None], [0.1, None], "=", ["rate=0.1", "rate=none"]),
        (["x", "x", "x"], [1.0, 1.0, 2.0], [0.5, 0.25, 0.5], "=",
         ["eps=1, rate=0.5", "eps=1, rate=0.25", "eps=2, rate=0.5"]),
    ],
)  # fmt: skip
def test_setting_labels_name_only_what_varies_within_a_policy(
    policies, eps, rate, separator, expected
):
    curve = pl.DataFrame({"policy": policies, "eps": eps, "rate": rate})
    assert setting_labels(curve, separator=separator).to_list() == expected


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


def test_pooled_controls_relabels_only_controls():
    frame = pl.DataFrame(
        {"policy": ["base", "rl", "gated"], "budget": [2, 8, 8], "tau": [0.1, 0.2, 0.3]}
    )
    pooled = pooled_controls(frame).collect()
    assert pooled["budget"].to_list() == [-1, -1, 8]
    assert pooled["tau"].to_list() == [None, None, 0.3]


def results_frame(accuracy_by_eps: dict[float, float], n_prompts: int = 20) -> pl.DataFrame:
    """Gated results whose switch share grows with 1/eps, with base 0.2 and RL 0.8 controls."""
    rows = []
    for p in range(n_prompts):
        for policy, eps, accuracy, switches in (
            ("base", None, 0.2, 0),
            ("rl", None, 0.8, 0),
            *[("gated", e, a, round(10 / e)) for e, a in accuracy_by_eps.items()],
        ):
            for s in range(10):
                rows.append((f"p{p}", policy, -1, eps, s < round(accuracy * 10), 100, switches, 0))
    schema = ["prompt_id", "policy", "budget", "eps", "correct", "n_tokens", "n_switches"]
    return pl.DataFrame(rows, schema=[*schema, "n_effective"], orient="row")


def test_takeover_knee_finds_the_saturation_point():
    # Shares 1%, 2%, 5%, 10%: accuracy saturates at 5% of tokens taken over.
    frame = results_frame({10.0: 0.4, 5.0: 0.6, 2.0: 0.8, 1.0: 0.8})
    result = takeover_knee(frame, n_boot=20)
    curve = result.curve
    assert curve["switch_share"].to_list() == pytest.approx([0.01, 0.02, 0.05, 0.1])
    assert curve["eps"].to_list() == [10.0, 5.0, 2.0, 1.0]
    assert curve["accuracy"].to_list() == pytest.approx([0.4, 0.6, 0.8, 0.8])
    assert curve["recovery"].to_list() == pytest.approx([1 / 3, 2 / 3, 1.0, 1.0])
    assert result.knee_index == 2  # rescaled (4/9, 1): gain 5/9, the largest
    assert (result.base_accuracy, result.rl_accuracy) == pytest.approx((0.2, 0.8))


def test_takeover_knee_keeps_calibrations_apart():
    # Two gated calibrations at the same budget and eps: two points, not one pooled point.
    frame = results_frame({2.0: 0.4, 1.0: 0.8}).with_columns(
        pl.when(pl.col("policy") != "gated")
        .then(None)
        .when(pl.col("eps") == 2.0)
        .then(0.5)
        .otherwise(0.3)
        .alias("tau"),
        pl.when(pl.col("policy") == "gated").then(None).otherwise(pl.col("eps")).alias("eps"),
    )
    curve = takeover_knee(frame, n_boot=5).curve
    assert curve.columns[:3] == ["budget", "eps", "tau"]
    assert curve["tau"].to_list() == [0.5, 0.3]
    assert curve["accuracy"].to_list() == pytest.approx([0.4, 0.8])


def test_takeover_knee_without_a_knee_and_without_the_policy():
    result = takeover_knee(results_frame({2.0: 0.5, 1.0: 0.6}), n_boot=5)
    assert result.knee_index is None
    with pytest.raises(DivscopeError, match="no graded responses of policy 'gated'"):
        takeover_knee(results_frame({}), n_boot=5)
