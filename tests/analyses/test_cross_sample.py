"""cross_sampling_curve (matched controls, pass@k recovery, third-model references, benchmarks),
setting_difference(s), setting_labels, takeover_knee, pass_at_k_curve and majority_at_k_curve."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from divscope.analyses import (
    cross_sampling_curve,
    majority_at_k_curve,
    pass_at_k_curve,
    recovery_reference,
    setting_difference,
    setting_differences,
    setting_labels,
    takeover_knee,
)
from divscope.errors import DivscopeError
from divscope.estimators import pass_at_k, problem_bootstrap_weights

BASE_COLUMNS = ["prompt_id", "policy", "budget", "correct", "n_tokens", "n_switches", "n_effective"]


def results(rows: list[tuple]) -> pl.DataFrame:
    """Rows of (prompt_id, policy, budget, correct, n_tokens, n_switches, n_effective)."""
    return pl.DataFrame(rows, schema=BASE_COLUMNS, orient="row")


def graded(outcomes: dict[tuple[str, str], str], **columns: object) -> pl.DataFrame:
    """Responses from {(policy, prompt): "TFF..."} (one letter per sample), with constant
    extra columns; budget −1, 10 tokens and no switches."""
    rows = [
        (prompt, policy, -1, letter == "T", 10, 0, 0)
        for (policy, prompt), letters in outcomes.items()
        for letter in letters
    ]
    frame = results(rows)
    return frame.with_columns(pl.lit(v).alias(k) for k, v in columns.items())


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


def test_cross_sampling_curve_reports_coupled_effective_shares():
    frame = results(CONTROLS + FORWARD).with_columns(
        n_effective_coupled=pl.Series([0] * 8 + [1, 1, 0, 2])
    )
    forward = cross_sampling_curve(frame, n_boot=10).filter(policy="forward").row(0, named=True)
    assert forward["effective_coupled_share_pooled"] == pytest.approx(4 / 100)
    assert forward["effective_coupled_share_mean"] == pytest.approx((0.1 + 1 / 30 + 0 + 0.05) / 4)


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


def sampled(outcomes: dict[tuple[str, float, float], dict[str, str]]) -> pl.DataFrame:
    """{(policy, temperature, top_p): {prompt: "TF.."}} as results with sampling columns."""
    frames = [
        graded({(policy, p): letters for p, letters in by_prompt.items()}).with_columns(
            temperature=pl.lit(t), top_p=pl.lit(top_p), seed=pl.lit(0, pl.Int64)
        )
        for (policy, t, top_p), by_prompt in outcomes.items()
    ]
    return pl.concat(frames)


TWO_SAMPLINGS = {
    ("base", 1.0, 0.7): {"a": "FF", "b": "TF"},  # 0.25
    ("rl", 1.0, 0.7): {"a": "TT", "b": "TT"},  # 1.0
    ("base", 0.6, 0.95): {"a": "TF", "b": "TF"},  # 0.5
    ("rl", 0.6, 0.95): {"a": "TT", "b": "TF"},  # 0.75
    ("forward", 1.0, 0.7): {"a": "TF", "b": "TT"},  # 0.75
    ("rl-replace", 0.6, 0.95): {"a": "TT", "b": "FF"},  # 0.5
}


def test_controls_are_matched_on_sampling_not_pooled():
    curve = cross_sampling_curve(sampled(TWO_SAMPLINGS), n_boot=20)
    forward = curve.filter(policy="forward").row(0, named=True)
    replace = curve.filter(policy="rl-replace").row(0, named=True)
    assert forward["recovery"] == pytest.approx((0.75 - 0.25) / (1.0 - 0.25))
    assert replace["recovery"] == pytest.approx((0.5 - 0.5) / (0.75 - 0.5))
    # One control row per sampling, never pooled across samplings.
    controls = curve.filter(pl.col("policy").is_in(["base", "rl"]))
    assert controls.select("policy", "temperature", "accuracy").rows() == [
        ("base", 0.6, 0.5),
        ("base", 1.0, 0.25),
        ("rl", 0.6, 0.75),
        ("rl", 1.0, 1.0),
    ]
    assert controls["recovery"].to_list() == [0.0, 0.0, 1.0, 1.0]


def test_a_missing_control_is_named():
    outcomes = {k: v for k, v in TWO_SAMPLINGS.items() if k != ("rl", 0.6, 0.95)}
    with pytest.raises(DivscopeError) as error:
        cross_sampling_curve(sampled(outcomes), n_boot=5)
    message = str(error.value)
    assert "no `rl` control matches the setting policy=base" in message
    assert "temperature=0.6, top_p=0.95, seed=0" in message
    assert "`rl` was run at: temperature=1, top_p=0.7, seed=0" in message


def test_controls_at_another_sampling_are_refused():
    outcomes = {
        ("base", 1.0, 0.7): {"a": "FF"},
        ("rl", 1.0, 0.7): {"a": "TT"},
        ("rl-replace", 0.6, 0.95): {"a": "TF"},
    }
    with pytest.raises(
        DivscopeError,
        match=r"no `base` control matches the setting "
        r"policy=rl-replace, budget=-1 \(temperature=0.6, top_p=0.95, seed=0\)",
    ):
        cross_sampling_curve(sampled(outcomes), n_boot=5)


@pytest.mark.parametrize(
    "column,value,named",
    [
        ("seed", 1, r"seed=1\); .* `base` was run at: .*seed=0"),
        ("max_new_tokens", 512, "max_new_tokens=512"),
    ],
)
def test_controls_must_share_seed_and_length_cap(column, value, named):
    frame = sampled({k: v for k, v in TWO_SAMPLINGS.items() if k[1] == 1.0}).with_columns(
        max_new_tokens=pl.lit(None, pl.Int32)
    )
    moved = frame.with_columns(
        pl.when(policy="forward").then(pl.lit(value)).otherwise(pl.col(column)).alias(column)
    )
    with pytest.raises(DivscopeError, match=named):
        cross_sampling_curve(moved.cast({column: frame.schema[column]}), n_boot=5)


def test_forced_openings_are_settings_not_controls():
    frame = sampled({k: v for k, v in TWO_SAMPLINGS.items() if k[1] == 1.0}).with_columns(
        force_prefix=pl.lit(None, pl.String)
    )
    forced = sampled({("base", 1.0, 0.7): {"a": "TT", "b": "TF"}}).with_columns(
        force_prefix=pl.lit("Alright")
    )
    curve = cross_sampling_curve(pl.concat([frame, forced]), n_boot=10)
    base = curve.filter(policy="base").sort("force_prefix", nulls_last=True)
    assert base.select("force_prefix", "accuracy").rows() == [("Alright", 0.75), (None, 0.25)]
    assert base["recovery"].to_list() == pytest.approx([(0.75 - 0.25) / 0.75, 0.0])


def test_recovery_is_null_without_controls_or_gain():
    curve = cross_sampling_curve(results(FORWARD), n_boot=10)
    assert curve["recovery"].to_list() == [None]
    no_gain = [(p, pol, b, False, *rest) for p, pol, b, _, *rest in CONTROLS]
    curve = cross_sampling_curve(results(no_gain + FORWARD), n_boot=10)
    assert curve.filter(policy="forward")["recovery"].to_list() == [None]


def test_no_base_policy_means_no_recovery():
    curve = cross_sampling_curve(results(CONTROLS + FORWARD), base_policy=None, n_boot=10)
    assert curve["recovery"].to_list() == [None, None, None]


def test_cross_sampling_curve_skips_ungraded_and_needs_some():
    frame = results(CONTROLS + FORWARD).with_columns(pl.lit(None, pl.Boolean).alias("correct"))
    with pytest.raises(DivscopeError, match="no graded responses"):
        cross_sampling_curve(frame)


# pass@2 of 4 samples with c correct: 1 - C(4 - c, 2) / C(4, 2) = 0, 1/2, 5/6, 1, 1.
PASS_2 = {0: 0.0, 1: 0.5, 2: 5 / 6, 3: 1.0, 4: 1.0}
THIRD = {
    ("base", "a"): "TFFF",  # pass@2 1/2
    ("base", "b"): "FFFF",  # 0
    ("gated", "a"): "TTFF",  # 5/6
    ("gated", "b"): "TFFF",  # 1/2
}


def thinking_model() -> pl.DataFrame:
    """A third model's graded responses: a 3/4 correct (pass@2 1), b 2/4 (5/6)."""
    correct = [True, True, True, False, True, True, False, False]
    return pl.DataFrame({"prompt_id": ["a"] * 4 + ["b"] * 4, "correct": correct})


def test_pass_at_k_recovery_against_a_third_model():
    curve = cross_sampling_curve(
        graded(THIRD), reference=thinking_model(), recovery_at=2, n_boot=20
    )
    gated = curve.filter(policy="gated").row(0, named=True)
    base, guided, thinking = (0.5 + 0) / 2, (5 / 6 + 0.5) / 2, (1 + 5 / 6) / 2
    assert gated["pass_at_k"] == pytest.approx(guided)
    assert gated["accuracy"] == pytest.approx((0.5 + 0.25) / 2)  # mean@n stays reported
    assert gated["recovery"] == pytest.approx((guided - base) / (thinking - base))  # 5/8
    reference = curve.filter(policy="reference").row(0, named=True)
    assert reference["pass_at_k"] == pytest.approx(thinking)
    assert reference["recovery"] is None


def test_a_third_model_is_not_matched_on_sampling():
    frame = graded(THIRD).with_columns(temperature=pl.lit(0.6), top_p=pl.lit(0.95))
    curve = cross_sampling_curve(frame, reference=thinking_model(), recovery_at=2, n_boot=5)
    assert curve.filter(policy="gated")["recovery"][0] == pytest.approx(5 / 8)


def test_a_policy_label_as_reference():
    frame = graded({**THIRD, ("rl-replace", "a"): "TTTF", ("rl-replace", "b"): "TTFF"})
    curve = cross_sampling_curve(frame, reference="rl-replace", recovery_at=2, n_boot=5)
    assert curve.filter(policy="gated")["recovery"][0] == pytest.approx(5 / 8)
    with pytest.raises(DivscopeError, match="reference policy 'thinking' has no graded"):
        cross_sampling_curve(frame, reference="thinking", n_boot=5)


def test_recovery_at_needs_k_samples_of_every_prompt():
    frame = graded({("base", "a"): "TF", ("rl", "a"): "TT"})
    with pytest.raises(DivscopeError, match=r"prompt 'a' has 2 graded response\(s\).*k=4"):
        cross_sampling_curve(frame, recovery_at=4, n_boot=5)


BENCHMARKS = {
    ("base", "a"): "FF", ("base", "b"): "FF", ("base", "c"): "TF",
    ("rl", "a"): "TT", ("rl", "b"): "TT", ("rl", "c"): "TT",
    ("forward", "a"): "TT", ("forward", "b"): "FF", ("forward", "c"): "TT",
}  # fmt: skip


def with_benchmarks(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.with_columns(
        benchmark=pl.when(pl.col("prompt_id") == "c").then(pl.lit("Y")).otherwise(pl.lit("X"))
    )


def test_benchmarks_are_pooled_and_averaged():
    curve = cross_sampling_curve(with_benchmarks(graded(BENCHMARKS)), n_boot=20)
    forward = curve.filter(policy="forward").row(0, named=True)
    # Pooled over prompts: base 1/6, rl 1, forward 2/3.
    assert forward["accuracy"] == pytest.approx(2 / 3)
    assert forward["recovery"] == pytest.approx((2 / 3 - 1 / 6) / (1 - 1 / 6))
    # Per benchmark, then averaged: base (0 + 1/2)/2, rl 1, forward (1/2 + 1)/2.
    assert forward["accuracy_macro"] == pytest.approx(0.75)
    assert forward["recovery_macro"] == pytest.approx((0.75 - 0.25) / (1 - 0.25))
    per = cross_sampling_curve(with_benchmarks(graded(BENCHMARKS)), per_benchmark=True, n_boot=20)
    rows = per.filter(policy="forward").select("benchmark", "accuracy", "recovery").rows()
    assert rows == [("X", 0.5, 0.5), ("Y", 1.0, 1.0)]
    assert "accuracy_macro" not in per.columns


def test_a_prompt_in_two_benchmarks_is_refused():
    frame = with_benchmarks(graded(BENCHMARKS)).with_columns(
        benchmark=pl.when(pl.col("policy") == "rl").then(pl.lit("Z")).otherwise("benchmark")
    )
    with pytest.raises(DivscopeError, match="prompt 'a' belongs to several benchmarks"):
        cross_sampling_curve(frame, n_boot=5)


def resampled_mean(values: dict[str, float], counts: dict[str, int]) -> float:
    """The mean of per-prompt values over a resample, each prompt repeated `counts` times."""
    drawn = [values[p] for p in values for _ in range(counts[p])]
    return sum(drawn) / len(drawn) if drawn else math.nan


def test_recovery_intervals_match_a_plain_stratified_bootstrap_loop():
    frame = with_benchmarks(graded(BENCHMARKS))
    n_boot, seed = 200, 7
    curve = cross_sampling_curve(frame, n_boot=n_boot, seed=seed)
    forward = curve.filter(policy="forward").row(0, named=True)
    per_prompt = {
        policy: {p: letters.count("T") / len(letters) for (pol, p), letters in BENCHMARKS.items()
                 if pol == policy}
        for policy in ("base", "rl", "forward")
    }  # fmt: skip
    # Prompts sorted (a, b, c); benchmark X (a, b) resampled first, then Y (c).
    rng = np.random.default_rng(seed)
    x = rng.multinomial(2, [0.5, 0.5], size=n_boot)
    y = rng.multinomial(1, [1.0], size=n_boot)
    recoveries, accuracies = [], []
    for b in range(n_boot):
        counts = {"a": x[b, 0], "b": x[b, 1], "c": y[b, 0]}
        means = {k: resampled_mean(v, counts) for k, v in per_prompt.items()}
        accuracies.append(means["forward"])
        gap = means["rl"] - means["base"]
        recoveries.append((means["forward"] - means["base"]) / gap if gap else math.nan)
    recoveries = np.array(recoveries)
    low, high = np.quantile(recoveries[~np.isnan(recoveries)], [0.025, 0.975])
    assert (forward["recovery_low"], forward["recovery_high"]) == pytest.approx((low, high))
    low, high = np.quantile(accuracies, [0.025, 0.975])
    assert (forward["accuracy_low"], forward["accuracy_high"]) == pytest.approx((low, high))


def test_cross_sampling_curve_is_seeded():
    frame = results(CONTROLS + FORWARD)
    first = cross_sampling_curve(frame, n_boot=50, seed=1)
    assert first.equals(cross_sampling_curve(frame, n_boot=50, seed=1))


FORCED = {
    ("base", "a"): "TFFF", ("base", "b"): "FFFF", ("base", "c"): "TTFF",
    ("rl-replace", "a"): "TTFF", ("rl-replace", "b"): "TFFF", ("rl-replace", "c"): "TTTF",
}  # fmt: skip


def forced_results() -> pl.DataFrame:
    frame = graded(FORCED, force_prefix="Alright")
    unforced = graded({("base", "a"): "FF", ("base", "b"): "FF", ("base", "c"): "FF"})
    return pl.concat([frame, unforced.with_columns(force_prefix=pl.lit(None, pl.String))])


def test_setting_difference_hand_computed_with_a_plain_paired_bootstrap():
    frame = forced_results()
    n_boot, seed = 300, 3
    interval = setting_difference(
        frame,
        "policy=rl-replace,force_prefix=Alright",
        "policy=base,force_prefix=Alright",
        n_boot=n_boot,
        seed=seed,
    )
    # Per prompt: rl-replace (1/2, 1/4, 3/4), base (1/4, 0, 1/2): every difference 1/4.
    assert interval.estimate == pytest.approx(0.25)
    assert (interval.low, interval.high) == pytest.approx((0.25, 0.25))
    p2 = {
        policy: {p: PASS_2[FORCED[(policy, p)].count("T")] for p in "abc"}
        for policy in ("rl-replace", "base")
    }
    diffs = {p: p2["rl-replace"][p] - p2["base"][p] for p in "abc"}
    weights = problem_bootstrap_weights(3, n_boot=n_boot, seed=seed)
    resamples = [resampled_mean(diffs, dict(zip("abc", row, strict=True))) for row in weights]
    low, high = np.quantile(resamples, [0.025, 0.975])
    at_2 = setting_difference(
        frame,
        {"policy": "rl-replace", "force_prefix": "Alright"},
        {"policy": "base", "force_prefix": "Alright"},
        recovery_at=2,
        n_boot=n_boot,
        seed=seed,
    )
    assert at_2.estimate == pytest.approx(sum(diffs.values()) / 3)
    assert (at_2.low, at_2.high) == pytest.approx((low, high))


@pytest.mark.parametrize(
    "selector,message",
    [
        ("policy=base", "matches 2 settings"),
        ("policy=gated", "matches no setting"),
        ("policy=base,eps=0.1", "`eps` in the selector"),
        ("policy=base,budget=many", "not a Int"),
    ],
)
def test_setting_difference_names_a_bad_selector(selector, message):
    with pytest.raises(DivscopeError, match=message):
        setting_difference(forced_results(), selector, "policy=rl-replace", n_boot=5)


def test_setting_differences_table():
    table = setting_differences(
        forced_results(),
        [
            "policy=rl-replace - policy=base,force_prefix=Alright",
            ({"policy": "base", "force_prefix": "none"}, "policy=base,force_prefix=Alright"),
        ],
        n_boot=20,
    )
    assert table["difference"].to_list() == pytest.approx([0.25, -0.25])
    assert table["n_prompts"].to_list() == [3, 3]
    assert table["a"][1].startswith("policy=base, budget=-1 (")


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


def test_setting_labels_leave_out_excluded_columns():
    curve = pl.DataFrame({"policy": ["base", "base"], "temperature": [0.6, 1.0]})
    assert setting_labels(curve, exclude=["temperature"]).to_list() == ["", ""]


def test_pass_at_k_curve_hand_computed():
    rows = [("a", "rl", -1, c, 1, 0, 0) for c in (True, False, False, False)]
    rows += [("b", "rl", -1, c, 1, 0, 0) for c in (True, True, False, False)]
    curve = pass_at_k_curve(results(rows), n_boot=50)
    assert curve["k"].to_list() == [1, 2, 4]
    # a: 1/4, 1 - 3/6, 1;  b: 2/4, 1 - 1/6, 1
    assert curve["pass_at_k"].to_list() == pytest.approx([0.375, (0.5 + 5 / 6) / 2, 1.0])
    assert curve["n_prompts"].to_list() == [2, 2, 2]
    assert curve.columns == [
        "policy", "budget", "k", "pass_at_k", "pass_at_k_low", "pass_at_k_high", "n_prompts",
    ]  # fmt: skip


def test_pass_at_k_intervals_are_paired_over_prompts():
    frame = graded(THIRD)
    n_boot, seed = 100, 5
    curve = pass_at_k_curve(frame, [2], by=("policy",), n_boot=n_boot, seed=seed)
    weights = problem_bootstrap_weights(2, n_boot=n_boot, seed=seed)  # prompts a, b
    for policy in ("base", "gated"):
        values = {p: pass_at_k(4, THIRD[(policy, p)].count("T"), 2) for p in "ab"}
        resamples = [resampled_mean(values, dict(zip("ab", w, strict=True))) for w in weights]
        row = curve.filter(policy=policy).row(0, named=True)
        expected = np.quantile(resamples, [0.025, 0.975])
        assert (row["pass_at_k_low"], row["pass_at_k_high"]) == pytest.approx(tuple(expected))


def test_pass_at_k_curve_rejects_k_beyond_the_samples():
    rows = [("a", "rl", -1, True, 1, 0, 0)] * 2
    with pytest.raises(DivscopeError, match="k=4"):
        pass_at_k_curve(results(rows), ks=[4])


def test_majority_at_k_curve_votes_on_boxed_answers():
    responses = {
        "a": [(r"so \boxed{4}", True), (r"\boxed{ 4 }", True), (r"\boxed{5}", False),
              ("no box", False)],
        "b": [(r"\boxed{1}", False), (r"\boxed{2}", True), (r"\boxed{1}", False),
              (r"\boxed{3}", False)],
    }  # fmt: skip
    frame = pl.DataFrame(
        [(p, s, "base", -1, text, ok) for p, rows in responses.items()
         for s, (text, ok) in enumerate(rows)],
        schema=["prompt_id", "sample_id", "policy", "budget", "response", "correct"],
        orient="row",
    )  # fmt: skip
    curve = majority_at_k_curve(frame, [2, 4], n_boot=20)
    # k = 4, a: "4" has 2 votes (the unboxed response votes for nothing): right. b: "1" wins.
    # k = 2, a: of the 6 pairs, {4,4} {4,-} {4,-} right, {4,5} twice a tie (1/2), {5,-} wrong:
    #   (3 + 1) / 6. b: pairs with a "2" and another answer tie (1/2): {1,2} {2,1} {2,3};
    #   {1,1} {1,3} {1,3} wrong: 1.5 / 6.
    assert curve["majority_at_k"].to_list() == pytest.approx([(4 / 6 + 1.5 / 6) / 2, 0.5])


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
    assert curve["rho_mean"].to_list() == pytest.approx([0.01, 0.02, 0.05, 0.1])
    assert curve["eps"].to_list() == [10.0, 5.0, 2.0, 1.0]
    assert curve["accuracy"].to_list() == pytest.approx([0.4, 0.6, 0.8, 0.8])
    assert curve["recovery"].to_list() == pytest.approx([1 / 3, 2 / 3, 1.0, 1.0])
    assert result.knee_index == 2  # rescaled (4/9, 1): gain 5/9, the largest
    assert (result.base_value, result.reference_value) == pytest.approx((0.2, 0.8))
    assert result.measure == "accuracy"


def test_takeover_knee_sits_on_the_mean_per_response_rate():
    # One setting, two responses: 1 switch of 10 tokens and 0 of 90. ρ̄ = (0.1 + 0) / 2 = 0.05,
    # while the pooled share is 1 / 100.
    rows = [
        ("a", "gated", -1, True, 10, 1, 1),
        ("a", "gated", -1, False, 90, 0, 0),
        ("a", "base", -1, False, 50, 0, 0),
        ("a", "base", -1, False, 50, 0, 0),
        ("a", "rl", -1, True, 50, 0, 0),
        ("a", "rl", -1, True, 50, 0, 0),
    ]
    result = takeover_knee(results(rows), n_boot=10, recovery_at=2)
    point = result.curve.row(0, named=True)
    assert (point["rho_mean"], point["switch_share"]) == pytest.approx((0.05, 0.01))
    assert result.measure == "pass_at_k" and point["pass_at_k"] == pytest.approx(1.0)
    assert (result.base_value, result.reference_value) == pytest.approx((0.0, 1.0))


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


def test_takeover_knee_refuses_several_samplings():
    frame = results_frame({2.0: 0.5, 1.0: 0.6}).with_columns(
        temperature=pl.when(pl.col("eps") == 2.0).then(0.6).otherwise(1.0)
    )
    frame = pl.concat([frame, frame.filter(pl.col("policy").is_in(["base", "rl"])).with_columns(
        temperature=pl.lit(0.6)
    )])  # fmt: skip
    with pytest.raises(DivscopeError, match="run at 2 samplings"):
        takeover_knee(frame, n_boot=5)


def test_setting_difference_averaged_per_benchmark():
    frame = with_benchmarks(graded(BENCHMARKS))
    pooled = setting_difference(frame, "policy=forward", "policy=rl", n_boot=20)
    macro = setting_difference(
        frame, "policy=forward", "policy=rl", average="benchmarks", n_boot=20
    )
    assert pooled.estimate == pytest.approx(2 / 3 - 1)
    assert macro.estimate == pytest.approx((0.5 + 1) / 2 - 1)


def calibrated_frame(points: dict[float, tuple[float, int, float]]) -> pl.DataFrame:
    """Gated results over calibration rates, {rate: (tau, switches per 100 tokens, accuracy)},
    unbudgeted, with base 0.2 and RL 0.8 controls and forward beside them (20 prompts x 10)."""
    rows = []
    settings = [("base", None, None, 0, 0.2), ("rl", None, None, 0, 0.8),
                ("forward", None, None, 3, 0.9)]  # fmt: skip
    settings += [("gated", r, tau, n, a) for r, (tau, n, a) in points.items()]
    for p in range(20):
        for policy, rate, tau, switches, accuracy in settings:
            for s in range(10):
                correct = s < round(accuracy * 10)
                rows.append((f"p{p}", policy, -1, rate, tau, correct, 100, switches, 0))
    schema = ["prompt_id", "policy", "budget", "rate", "tau", "correct", "n_tokens", "n_switches"]
    return pl.DataFrame(rows, schema=[*schema, "n_effective"], orient="row")


def test_takeover_knee_over_calibration_rates():
    """One point per calibrated rate, at its realized ρ̄ (not r), labelled by its rate alone;
    forward's rows are not points. By hand: ρ̄ (0.02, 0.04, 0.08, 0.15) rescaled by 0.13 is
    (0, 2/13, 6/13, 1), accuracy (0.5, 0.7, 0.8, 0.8) rescaled by 0.3 is (0, 2/3, 1, 1); the
    gains (0, 2/3 - 2/13, 1 - 6/13, 0) = (0, 0.513, 0.538, 0) peak at rate 0.05."""
    frame = calibrated_frame(
        {0.1: (1.2, 15, 0.8), 0.01: (3.0, 2, 0.5), 0.05: (1.8, 8, 0.8), 0.02: (2.5, 4, 0.7)}
    )
    knee = takeover_knee(frame, n_boot=20)
    curve = knee.curve
    assert curve["rate"].to_list() == [0.01, 0.02, 0.05, 0.1]
    assert curve["setting"].to_list() == ["rate=0.01", "rate=0.02", "rate=0.05", "rate=0.1"]
    assert curve["budget"].to_list() == [-1] * 4
    assert curve["rho_mean"].to_list() == pytest.approx([0.02, 0.04, 0.08, 0.15])
    x = (np.array([0.02, 0.04, 0.08, 0.15]) - 0.02) / 0.13
    y = (np.array([0.5, 0.7, 0.8, 0.8]) - 0.5) / 0.3
    assert int(np.argmax(y - x)) == 2 and knee.knee_index == 2
    assert curve.row(knee.knee_index, named=True)["rate"] == 0.05
    assert curve["recovery"].to_list() == pytest.approx([0.5, 5 / 6, 1.0, 1.0])
    assert knee.average == "prompts" and "recovery_pooled" not in curve.columns


def test_takeover_recovery_is_labelled_against_the_guide_model_without_a_reference():
    frame = calibrated_frame({0.02: (2.5, 4, 0.7)})
    knee = takeover_knee(frame, n_boot=5)
    assert knee.recovery_against == (
        "against the guide model (the paper: a same-size thinking model)"
    )
    assert knee.recovery_against == recovery_reference(None)
    with_reference = takeover_knee(frame, reference="forward", n_boot=5)
    assert with_reference.recovery_against == "against policy `forward`, matched like a control"
    # forward (0.9) is the upper bound: (0.7 - 0.2) / (0.9 - 0.2).
    assert with_reference.curve["recovery"][0] == pytest.approx(5 / 7)
    third = pl.DataFrame({"prompt_id": [f"p{p}" for p in range(20)], "correct": [True] * 20})
    assert "third model" in takeover_knee(frame, reference=third, n_boot=5).recovery_against


def test_takeover_knee_headline_is_the_per_benchmark_average():
    """Benchmark A (p0-p2) and B (p3), 2 responses per prompt. Per prompt: base 0 everywhere;
    rl 1, 1, 1 | 0.5; gated 1, 0.5, 0 | 0.5. Pooled over prompts: gated 0.5, rl 0.875,
    recovery 0.5 / 0.875. Per benchmark (the paper's): gated (0.5 + 0.5) / 2 = 0.5, rl
    (1 + 0.5) / 2 = 0.75, recovery 0.5 / 0.75."""
    correct = {
        "base": [(0, 0)] * 4,
        "rl": [(1, 1), (1, 1), (1, 1), (1, 0)],
        "gated": [(1, 1), (1, 0), (0, 0), (0, 1)],
    }
    rows = [
        (f"p{p}", policy, -1, 0.05 if policy == "gated" else None, bool(c), 10,
         1 if policy == "gated" else 0, 0, "A" if p < 3 else "B")
        for policy, prompts in correct.items()
        for p, pair in enumerate(prompts)
        for c in pair
    ]  # fmt: skip
    schema = ["prompt_id", "policy", "budget", "rate", "correct", "n_tokens", "n_switches",
              "n_effective", "benchmark"]  # fmt: skip
    knee = takeover_knee(pl.DataFrame(rows, schema=schema, orient="row"), n_boot=20)
    point = knee.curve.row(0, named=True)
    assert knee.average == "benchmarks"
    assert point["accuracy"] == pytest.approx(0.5)
    assert point["recovery"] == pytest.approx(0.5 / 0.75)
    assert point["accuracy_pooled"] == pytest.approx(0.5)
    assert point["recovery_pooled"] == pytest.approx(0.5 / 0.875)
    assert (knee.base_value, knee.reference_value) == pytest.approx((0.0, 0.75))
