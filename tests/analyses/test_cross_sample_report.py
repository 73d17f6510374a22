"""cross_sample_report and curve_text: every part the data allow, printed and JSON-ready."""

from __future__ import annotations

import json

import polars as pl
import pytest

from divscope.analyses import (
    cross_sample_report,
    cross_sampling_curve,
    setting_difference,
    setting_differences,
    threshold_sensitivity,
    to_jsonable,
)
from divscope.errors import DivscopeError
from divscope.figures.gallery import PlotInputs
from divscope.formatting import cross_sample_text, curve_text
from divscope.params import Recovery
from divscope.schema import CROSS_SAMPLE, CROSS_SAMPLE_PARAMS

SETTINGS = [
    # policy, eps, temperature, top_p, force_prefix, outcomes of prompts a and b
    ("base", None, 1.0, 0.7, None, ("FF", "TF")),
    ("rl", None, 1.0, 0.7, None, ("TT", "TT")),
    ("base", None, 0.6, 0.95, None, ("TF", "FF")),
    ("rl", None, 0.6, 0.95, None, ("TT", "TF")),
    ("base", None, 0.6, 0.95, "Alright", ("TT", "FF")),
    ("rl-replace", None, 0.6, 0.95, "Alright", ("TT", "TF")),
    ("forward", 0.01, 1.0, 0.7, None, ("TT", "TF")),
    ("forward", 0.1, 1.0, 0.7, None, ("TF", "TF")),
    ("gated", None, 1.0, 0.7, None, ("TT", "TT")),
]


def full_results() -> pl.DataFrame:
    """Results with every column of the contract: two prompts in two benchmarks, 2 samples."""
    rows = []
    for policy, eps, temperature, top_p, prefix, outcomes in SETTINGS:
        switched = policy not in ("base", "rl")
        for prompt, benchmark, letters in zip("ab", ("aime", "math"), outcomes, strict=True):
            for sample, letter in enumerate(letters):
                rows.append(
                    {
                        "prompt_id": prompt, "sample_id": sample, "policy": policy, "budget": -1,
                        "eps": eps, "seed": 0, "response_ids": [1, 2, 3, 4],
                        "response": rf"\boxed{{{1 if letter == 'T' else 2}}}", "n_tokens": 4,
                        "n_switches": 2 if switched else 0, "n_effective": 2 if switched else 0,
                        "n_effective_coupled": 1 if switched else 0,
                        "switch_positions": [0, 2] if switched else [],
                        "switch_primary_ids": [9, 3] if switched else [],
                        "switch_primary_tokens": [" So", " x"] if switched else [],
                        "switch_tokens": [" Wait", " x"] if switched else [],
                        "delta_cosine": None, "benchmark": benchmark, "finished": True,
                        "correct": letter == "T", "temperature": temperature, "top_p": top_p,
                        "force_prefix": prefix,
                    }
                )  # fmt: skip
    return pl.DataFrame(rows, schema={**CROSS_SAMPLE, **CROSS_SAMPLE_PARAMS})


DIFFERENCE = "policy=rl-replace,force_prefix=Alright - policy=base,force_prefix=Alright"


def test_report_holds_every_part_the_data_allow():
    results = full_results()
    tokens = pl.DataFrame({"token": [" Wait", " the", " x", " y"]})
    report = cross_sample_report(
        results, differences=[DIFFERENCE], tokens=tokens, recovery=Recovery(n_boot=50)
    )
    assert report.curve.equals(cross_sampling_curve(results, n_boot=50))
    assert report.curve_per_benchmark["benchmark"].unique().sort().to_list() == ["aime", "math"]
    assert {"pass_at_k", "majority_at_k"} <= set(report.pass_at_k.columns)
    expected = setting_difference(results, *DIFFERENCE.split(" - "), n_boot=50)
    assert report.differences["difference"][0] == pytest.approx(expected.estimate)
    assert "gated" in report.flips["policy"].to_list()
    assert report.threshold_sensitivity["eps"].to_list() == [0.01, 0.1]
    assert report.switch_pairs.select("primary_token", "token").unique().rows() == [
        (" So", " Wait")
    ]
    assert report.takeover_planning["enrichment"][0] == pytest.approx(0.5 / 0.25)
    assert report.knee is not None and report.knee.knee_index is None  # one gated setting
    assert report.delta_alignment is None
    assert report.notes == ()
    json.dumps(to_jsonable(report))


def test_report_text_has_a_section_per_part():
    text = cross_sample_text(
        cross_sample_report(full_results(), differences=[DIFFERENCE], recovery=Recovery(n_boot=20))
    )
    for heading in (
        "reference: the matched `rl` control",
        "Per benchmark:",
        "pass@k and majority@k:",
        "Differences (mean@n, points):",
        "Flips against the matched base control:",
        "Threshold sensitivity",
        "Switched token pairs (primary -> emitted):",
        "Planning words in the takeover set:",
        "Takeover knee of `gated`: none",
        "note: takeover planning: no token table given",
    ):
        assert heading in text, heading


def test_report_notes_what_old_results_lack():
    old = full_results().select(
        "prompt_id", "policy", "budget", "eps", "correct", "n_tokens", "n_switches", "n_effective"
    )
    report = cross_sample_report(old, recovery=Recovery(recovery_at=2, n_boot=10))
    assert report.switch_pairs is None and report.flips is None and report.pass_at_k is not None
    assert any(note.startswith("flips skipped") for note in report.notes)
    assert any(note.startswith("switch pairs skipped") for note in report.notes)
    assert "on pass@2" in cross_sample_text(report)


def test_curve_text_shows_sampling_only_where_it_differs():
    text = curve_text(cross_sampling_curve(full_results(), n_boot=10))
    header, *rows = text.splitlines()
    assert header.split()[:4] == ["policy", "setting", "T", "top-p"]
    assert "eff. coupled" in header
    base = [r.split()[1:4] for r in rows if r.startswith("base")]
    assert base == [
        ["force_prefix=Alright", "0.6", "0.95"],
        ["force_prefix=none", "0.6", "0.95"],
        ["force_prefix=none", "1", "0.7"],
    ]
    replace = next(r for r in rows if r.startswith("rl-replace"))
    # Its only setting, but a forced opening is always named.
    assert replace.split()[1:4] == ["force_prefix=Alright", "0.6", "0.95"]
    forward = [r.split()[1:4] for r in rows if r.startswith("forward")]
    assert forward == [["eps=0.01", "1", "0.7"], ["eps=0.1", "1", "0.7"]]
    one_sampling = full_results().filter(pl.col("temperature") == 1.0)
    header = curve_text(cross_sampling_curve(one_sampling, n_boot=10)).splitlines()[0]
    assert "top-p" not in header


def test_report_has_recovery_per_eps_and_map_agreement():
    plain = cross_sample_report(full_results(), recovery=Recovery(n_boot=20))
    assert plain.map_agreement is None
    curve = plain.curve.filter(pl.col("eps").is_not_null())
    assert plain.threshold_sensitivity["recovery"].to_list() == curve["recovery"].to_list()
    # forward switches at positions 0 and 2; online JS there: 0.3 and 0.05 (eps 0.01, 0.1).
    forward = pl.col("policy") == "forward"
    results = full_results().with_columns(
        switch_js=pl.when(forward).then(pl.lit([0.3, 0.05], pl.List(pl.Float32)))
    )
    report = cross_sample_report(results, recovery=Recovery(n_boot=20))
    assert report.map_agreement.select("eps", "agreement").rows() == [(0.01, 1.0), (0.1, 0.5)]
    text = cross_sample_text(report)
    assert "Map agreement (switch positions whose online JS exceeds eps):" in text
    assert "recovery [95% CI]  switches/resp." in text


GUIDE = "against the guide model (the paper: a same-size thinking model)"


def test_takeover_recovery_labels_without_and_with_a_reference():
    """Without --reference the takeover rows' and the knee's recovery say they are against the
    guide model, in the JSON and the digest; two benchmarks make the per-benchmark average the
    knee's headline and label the curve's own columns pooled. A third model's responses as
    the reference are named instead."""
    report = cross_sample_report(full_results(), recovery=Recovery(n_boot=20))
    assert report.takeover_recovery == (
        f"Takeover rows (`gated`, `entropy`) and knee: recovery {GUIDE}; headline: the "
        "per-benchmark average (the paper's: the curve's `*_macro` columns, the knee's "
        "`accuracy`/`recovery`); the average over prompts is labelled pooled."
    )
    document = to_jsonable(report)
    assert document["knee"]["recovery_against"] == GUIDE
    assert document["knee"]["average"] == "benchmarks"
    assert GUIDE in document["takeover_recovery"]
    # gated: a TT, b TT; base a FF, b TF; rl TT, TT: the knee's headline is the macro one.
    point = document["knee"]["curve"][0]
    assert point["accuracy"] == report.curve.filter(policy="gated")["accuracy_macro"][0]
    assert point["accuracy_pooled"] == report.curve.filter(policy="gated")["accuracy"][0]
    text = cross_sample_text(report)
    assert report.takeover_recovery in text
    assert f"Takeover knee of `gated`: none (1 settings, accuracy; recovery {GUIDE})." in text
    assert "recovery, pooled [95% CI]" in text and "recovery per benchmark" in text
    third = pl.DataFrame({"prompt_id": ["a", "b"], "correct": [True, True]})
    referenced = cross_sample_report(full_results(), reference=third, recovery=Recovery(n_boot=20))
    assert GUIDE not in referenced.takeover_recovery
    assert "against a third model's graded responses" in referenced.takeover_recovery
    assert referenced.knee.recovery_against.startswith("against a third model's")
    one = full_results().filter(pl.col("benchmark") == "aime")
    single = cross_sample_report(one, recovery=Recovery(n_boot=20))
    assert single.takeover_recovery.endswith("averaged over prompts (a single benchmark).")
    assert single.knee.average == "prompts"
    assert "pooled" not in curve_text(single.curve).splitlines()[0]
    plain = cross_sample_report(
        full_results().filter(pl.col("policy") != "gated"), recovery=Recovery(n_boot=20)
    )
    assert plain.takeover_recovery is None and plain.knee is None


def test_a_difference_of_settings_sampled_differently_is_refused():
    pair = "policy=rl-replace,force_prefix=Alright - policy=gated"
    with pytest.raises(DivscopeError, match=r"T 0\.6, top-p 0\.95 and .* at T 1, top-p 0\.7"):
        setting_differences(full_results(), [pair], n_boot=10)
    with pytest.raises(DivscopeError, match="sampled alike"):
        cross_sample_report(full_results(), differences=[pair], recovery=Recovery(n_boot=10))


def hand_made(*, old: bool) -> pl.DataFrame:
    """Controls and two forward responses: 10 and 20 tokens, 4 and 6 switches, of which 3 and
    2 differ from an independent draw of base and 1 and 2 from its coupled draw; `old` writes
    them as results of the earlier version did (`n_effective` coupled,
    `n_effective_independent`)."""
    frame = pl.DataFrame(
        {
            "prompt_id": ["a", "b"] * 3,
            "policy": ["base"] * 2 + ["rl"] * 2 + ["forward"] * 2,
            "budget": [-1] * 4 + [8, 8],
            "correct": [False, False, True, True, True, False],
            "n_tokens": [10, 20] * 3,
            "n_switches": [0] * 4 + [4, 6],
            "n_effective": [0] * 4 + [3, 2],
            "n_effective_coupled": [0] * 4 + [1, 2],
        }
    )
    if old:
        return frame.rename(
            {"n_effective": "n_effective_independent", "n_effective_coupled": "n_effective"}
        )
    return frame


def test_effective_is_the_independent_count_and_coupled_is_named():
    curve = cross_sampling_curve(hand_made(old=False), n_boot=10)
    forward = curve.filter(policy="forward").row(0, named=True)
    assert forward["effective_share_pooled"] == pytest.approx(5 / 30)
    assert forward["effective_share_mean"] == pytest.approx((3 / 10 + 2 / 20) / 2)
    assert forward["effective_coupled_share_pooled"] == pytest.approx(3 / 30)
    assert forward["effective_coupled_share_mean"] == pytest.approx((1 / 10 + 2 / 20) / 2)
    assert "effective_independent_share_pooled" not in curve.columns
    sensitivity = threshold_sensitivity(hand_made(old=False).with_columns(eps=pl.lit(0.05)))
    row = sensitivity.filter(policy="forward").row(0, named=True)
    assert (row["effective"], row["effective_coupled"]) == (5, 3)
    assert row["effective_ratio"] == pytest.approx(5 / 10)
    assert row["effective_coupled_ratio"] == pytest.approx(3 / 10)


def test_results_of_the_earlier_version_load_with_a_note(tmp_path, capsys):
    new = cross_sample_report(hand_made(old=False), recovery=Recovery(n_boot=10))
    old = cross_sample_report(hand_made(old=True), recovery=Recovery(n_boot=10))
    assert old.curve.equals(new.curve)
    assert old.notes[1:] == new.notes
    assert "n_effective_independent" in old.notes[0]
    assert "n_effective_coupled" in json.dumps(to_jsonable(old))
    assert "note: cross-sample results: written before" in capsys.readouterr().err
    inputs = PlotInputs(tokens=pl.DataFrame(), cross_sample=hand_made(old=True))
    assert inputs.cross_sample.equals(hand_made(old=False).select(inputs.cross_sample.columns))
    assert "n_effective_independent" not in inputs.cross_sample.columns


def test_the_takeover_set_counts_the_planning_words_given():
    """Gated's takeover set is " Wait", " x" in every response: half planning words with the
    default lexicon (" Wait" is one, " x" is not); with the lexicon {"x"}, " x" is the half; with
    {"y"} none of the set, and a quarter of the tokens, " y"."""
    tokens = pl.DataFrame({"token": [" Wait", " the", " x", " y"]})
    shares = {}
    for name, lexicon in (("default", None), ("x", {"x"}), ("y", {"y"})):
        given = {} if lexicon is None else {"lexicon": lexicon}
        report = cross_sample_report(
            full_results(), tokens=tokens, recovery=Recovery(n_boot=10), **given
        )
        row = report.takeover_planning.row(0, named=True)
        shares[name] = (row["share_takeover"], row["share_global"])
    assert shares == {"default": (0.5, 0.25), "x": (0.5, 0.25), "y": (0.0, 0.25)}
