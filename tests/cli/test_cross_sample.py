"""`divscope cross-sample` and `divscope calibrate` end to end on a tiny saved model pair."""

from __future__ import annotations

import json

import polars as pl
import pytest
from typer.testing import CliRunner

from divscope.cli import app
from divscope.decoding.gates import Calibration
from divscope.io import read_cross_sample
from divscope.schema import CROSS_SAMPLE
from tests.tinymodels import WORDS, make_model, make_tokenizer

runner = CliRunner()


@pytest.fixture
def prompts(tiny_prompts):
    return tiny_prompts


def _run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_cross_sample_end_to_end(tmp_path, tiny_pair, prompts):
    base, rl = tiny_pair
    out = tmp_path / "results.parquet"
    common = ["--n", 2, "--max-new-tokens", 8, "--seed", 1, "--batch-size", 4]
    result = _run(
        "cross-sample", prompts, "--base", base, "--rl", rl, "--policy", "base,rl,forward",
        "--eps", 0.2, "--budgets", "0,2,-1", "--grader", "lab", "--out", out, *common,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "accuracy [95% CI]" in result.output and "forward" in result.output
    results = read_cross_sample(out)
    assert list(results.columns[: len(CROSS_SAMPLE)]) == list(CROSS_SAMPLE)
    assert results.height == 3 * 2 * (1 + 1 + 3)
    assert results["correct"].null_count() == 0
    by = {
        (policy, budget): frame.sort("prompt_id", "sample_id")["response_ids"].to_list()
        for (policy, budget), frame in results.group_by("policy", "budget")
    }
    assert by[("forward", 0)] == by[("base", -1)]
    forward = results.filter(pl.col("policy") == "forward")
    assert (forward["n_switches"] <= forward["budget"].replace(-1, 99)).all()
    assert (forward["n_effective"] <= forward["n_switches"]).all()
    assert forward["eps"].unique().to_list() == [0.2]

    again = tmp_path / "again.jsonl"
    result = _run(
        "cross-sample", prompts, "--base", base, "--rl", rl, "--policy", "forward",
        "--eps", 0.2, "--budgets", "2", "--out", again, *common[:-1], 1,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "ungraded" in result.output
    same = read_cross_sample(again).sort("prompt_id", "sample_id")["response_ids"].to_list()
    assert (
        same
        == forward.filter(pl.col("budget") == 2)
        .sort("prompt_id", "sample_id")["response_ids"]
        .to_list()
    )


def test_calibrate_then_gated(tmp_path, tiny_pair, prompts):
    """`calibrate --rate` of two rates samples and scores the base responses once; gated and
    entropy then run one setting per calibrated rate (its tau, lambda and rate in the results),
    unbudgeted whatever --budgets says: one-token takeovers at every gate firing."""
    base, rl = tiny_pair
    calibration = tmp_path / "gate.json"
    result = _run(
        "calibrate", prompts, "--base", base, "--rl", rl, "--n", 4, "--max-new-tokens", 8,
        "--rate", "0.2,0.4", "--window", 4, "--out", calibration,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "rates 0.2, 0.4" in result.output
    gate = Calibration.from_json(calibration)
    assert gate.window == 4 and set(gate.gates) == {"gated", "entropy"}
    assert gate.rates == (0.2, 0.4) and [g.rate for g in gate.gates_of("gated")] == [0.2, 0.4]
    # A lower rate is a higher quantile: tau falls as r rises.
    assert gate.gates_of("gated")[0].tau >= gate.gates_of("gated")[1].tau
    out = tmp_path / "gated.parquet"
    result = _run(
        "cross-sample", prompts, "--base", base, "--rl", rl, "--policy", "gated,entropy",
        "--calibration", calibration, "--budgets", "0,2,-1", "--n", 2, "--max-new-tokens", 8,
        "--out", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    results = read_cross_sample(out)
    assert results["window"].unique().to_list() == [4]
    assert results["budget"].unique().to_list() == [-1]
    settings = results.group_by("policy", "rate", "tau", "lam").len().sort("policy", "rate")
    expected = [
        (policy, g.rate, g.tau, g.lam, 3 * 2)
        for policy in ("entropy", "gated")
        for g in gate.gates_of(policy)
    ]
    assert settings.rows() == expected


@pytest.fixture(scope="module")
def other_tokenizer_model(tmp_path_factory):
    path = tmp_path_factory.mktemp("other") / "model"
    make_model("llama", vocab_size=48).save_pretrained(path)
    make_tokenizer(list(reversed(WORDS))).save_pretrained(path)
    return path


@pytest.mark.parametrize(
    "args,message",
    [
        (["--policy", "beam"], "unknown policy 'beam'"),
        (["--policy", "forward"], "needs --eps"),
        (["--policy", "forward", "--eps", "0.1", "--budgets", "1,x"], "--budgets '1,x'"),
        (["--policy", "base", "--grader", "nope"], "unknown grader 'nope'"),
        (["--policy", "base,base"], "appears twice"),
        (["--policy", "rast"], "needs --rast-base"),
        (["--policy", "forward", "--eps", "0.1", "--rl", "OTHER"], "tokenizers differ"),
        (["--policy", "base", "--max-new-tokens", "70"], "exceeds the base model's context"),
    ],
)
def test_cross_sample_bad_input(tmp_path, tiny_pair, prompts, other_tokenizer_model, args, message):
    base, rl = tiny_pair
    args = [str(other_tokenizer_model) if a == "OTHER" else a for a in args]
    if "--rl" not in args:
        args += ["--rl", str(rl)]
    result = _run("cross-sample", prompts, "--base", base, "--out", tmp_path / "r.parquet", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_cross_sample_needs_answers_to_grade(tmp_path, tiny_pair):
    base, rl = tiny_pair
    path = tmp_path / "prompts.jsonl"
    path.write_text(json.dumps({"prompt_id": "p", "prompt": "w1"}) + "\n")
    result = _run(
        "cross-sample", path, "--base", base, "--rl", rl, "--policy", "base", "--grader", "lab",
        "--out", tmp_path / "r.parquet",
    )  # fmt: skip
    assert result.exit_code == 2
    assert "needs an 'answer' column" in result.output


def test_cross_sample_refuses_an_existing_output(tmp_path, tiny_pair, prompts):
    base, rl = tiny_pair
    out = tmp_path / "r.parquet"
    out.write_text("x")
    result = _run("cross-sample", prompts, "--base", base, "--policy", "base", "--out", out)
    assert result.exit_code == 2 and "--overwrite" in result.output


def test_every_policy_stops_at_any_models_stop_token(tmp_path, tiny_pair, prompts):
    """An RL twin whose generation config adds a stop token: under the union, every policy
    (rl, forward, base) ends a response at its first stop token, the set is warned about
    and recorded, and the default length is capped by the tiny models' context of 64."""
    from transformers import AutoModelForCausalLM, GenerationConfig

    base, rl = tiny_pair
    first = tmp_path / "first.parquet"
    result = _run("cross-sample", prompts, "--base", base, "--rl", rl, "--policy", "rl",
                  "--n", 2, "--max-new-tokens", 12, "--out", first)  # fmt: skip
    assert result.exit_code == 0, result.output
    emitted = [t for ids in read_cross_sample(first)["response_ids"].to_list() for t in ids[1:]]
    extra = max(set(emitted) - {2}, key=emitted.count)  # a token the RL model often emits
    twin = tmp_path / "rl-twin"
    AutoModelForCausalLM.from_pretrained(rl).save_pretrained(twin)
    make_tokenizer().save_pretrained(twin)
    GenerationConfig(eos_token_id=[extra, 2]).save_pretrained(twin)

    out = tmp_path / "results.parquet"
    result = _run("cross-sample", prompts, "--base", base, "--rl", twin, "--policy",
                  "base,rl,forward", "--eps", 0.1, "--budgets", "-1", "--n", 2,
                  "--out", out)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Warning: the models stop at different tokens" in result.output
    assert "note: responses are capped at" in result.output and "context is 64" in result.output
    results = read_cross_sample(out)
    for ids, finished in zip(results["response_ids"], results["finished"], strict=True):
        stops = [i for i, t in enumerate(ids) if t in (2, extra)]
        assert stops == ([len(ids) - 1] if finished else []), ids
    assert results.filter(pl.col("policy") == "rl")["finished"].any()
    metadata = json.loads(pq_metadata(out)["divscope"])
    assert [s["id"] for s in metadata["stop"]] == [2, extra]


def pq_metadata(path):
    import pyarrow.parquet as pq

    return {k.decode(): v.decode() for k, v in pq.read_schema(path).metadata.items()}


def test_per_policy_flags_eps_sweep_controls_and_forced_prefix(tmp_path, tiny_pair, prompts):
    base, rl = tiny_pair
    out = tmp_path / "results.parquet"
    result = _run(
        "cross-sample", prompts, "--base", base, "--rl", rl, "--policy",
        "base,forward,gated,rl-replace", "--eps", "0.1,0.3", "--gate-tau", 0.5,
        "--gate-lam", 1.2, "--gate-window", 3, "--force-prefix", "w7",
        "--forced-policies", "rl-replace", "--budgets", "-1", "--n", 1, "--max-new-tokens", 6,
        "--out", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    results = read_cross_sample(out)
    columns = ["policy", "eps", "tau", "lam", "window", "temperature", "top_p", "force_prefix"]
    settings = results.group_by(columns).len().sort(pl.all(), nulls_last=True)
    assert settings.rows() == [
        ("base", None, None, None, None, 0.6, 0.95, None, 3),
        ("base", None, None, None, None, 1.0, 0.7, None, 3),
        ("forward", 0.1, None, None, None, 1.0, 0.7, None, 3),
        ("forward", 0.3, None, None, None, 1.0, 0.7, None, 3),
        ("gated", None, 0.5, 1.2, 3, 1.0, 0.7, None, 3),
        ("rl", None, None, None, None, 0.6, 0.95, None, 3),
        ("rl-replace", None, None, None, None, 0.6, 0.95, "w7", 3),
        ("rl-replace", None, None, None, None, 0.6, 0.95, None, 3),
    ]  # fmt: skip
    forced = results.filter(pl.col("force_prefix").is_not_null())
    assert all(ids[0] == 11 for ids in forced["response_ids"])  # w7


def test_a_flag_may_override_a_calibrated_value_only_when_told(tmp_path, tiny_pair, prompts):
    from divscope.decoding.gates import Gate

    base, rl = tiny_pair
    calibration = tmp_path / "gate.json"
    gates = {"gated": (Gate(0.1, tau=0.5, lam=1.5),), "entropy": (Gate(0.1, tau=1.0, lam=2.0),)}
    Calibration((0.1,), window=4, gates=gates, n_tokens=10, source="t").to_json(calibration)
    args = [
        "cross-sample", prompts, "--base", base, "--rl", rl, "--policy", "gated",
        "--calibration", calibration, "--gate-lam", 1, "--budgets", "-1", "--n", 1,
        "--max-new-tokens", 6, "--out", tmp_path / "r.parquet",
    ]  # fmt: skip
    result = _run(*args)
    assert result.exit_code == 2
    assert "--gate-lam 1.0 replaces the value 1.5 that --calibration" in result.output
    assert "--override-calibration" in result.output
    result = _run(*args, "--override-calibration")
    assert result.exit_code == 0, result.output
    assert "note: --gate-lam 1.0 replaces the value 1.5" in result.output
    results = read_cross_sample(tmp_path / "r.parquet")
    assert results.select("tau", "lam", "window").unique().rows() == [(0.5, 1.0, 4)]


def test_strata_and_a_retrospective_map_end_to_end(tmp_path, tiny_pair, prompts):
    """`--stratify` and `--map online,retrospective --map-table`: one setting per stratum and
    map, all at the same budgets, labelled in the printed table; `switch_js` per switch for
    forward, null for the controls. The map table (one trajectory per prompt, from `divscope
    score`) serves every sample id; a table that lacks a prompt is refused, naming both."""
    base, rl = tiny_pair
    trajectories = tmp_path / "reference.jsonl"
    rows = [("p0", "w1 w2 w3", "w4 w5 w6 w7"), ("p1", "w9", "w3 w3"), ("p2", "w4 w5", "w8")]
    trajectories.write_text(
        "".join(
            json.dumps({"prompt_id": p, "sample_id": 0, "prompt": q, "response": r}) + "\n"
            for p, q, r in rows
        )
    )
    tokens = tmp_path / "reference-tokens.parquet"
    result = _run("score", trajectories, "--base", base, "--rl", rl, "--out", tokens)
    assert result.exit_code == 0, result.output
    out = tmp_path / "results.parquet"
    common = ["--base", base, "--rl", rl, "--eps", 0.2, "--budgets", "0,2", "--n", 2]
    result = _run(
        "cross-sample", prompts, "--policy", "base,rl,forward", *common,
        "--stratify", "none,rerank,tail,entropy-matched", "--match-tol", 0.5,
        "--map", "online,retrospective", "--map-table", tokens, "--max-new-tokens", 6,
        "--grader", "lab", "--out", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    results = read_cross_sample(out)
    forward = results.filter(pl.col("policy") == "forward")
    settings = forward.group_by("stratum", "match_tol", "map", "map_table").agg(
        pl.col("budget").unique().sort()
    )
    assert settings.height == 4 * 2
    assert all(budgets == [0, 2] for budgets in settings["budget"].to_list())
    assert set(forward["map_table"].unique()) == {None, str(tokens)}
    assert forward.filter(pl.col("map_table").is_not_null())["map"].unique().to_list() == [
        "retrospective"
    ]
    assert forward.filter(pl.col("stratum") == "entropy-matched")[
        "match_tol"
    ].unique().to_list() == [0.5]
    assert (forward["n_switches"] <= forward["budget"]).all()
    assert (forward["switch_js"].list.len() == forward["n_switches"]).all()
    controls = results.filter(pl.col("policy") != "forward")
    assert controls["switch_js"].null_count() == controls.height
    assert "stratum=entropy-matched" in result.output and f"map_table={tokens}" in result.output

    partial = tmp_path / "partial.parquet"
    pl.read_parquet(tokens).filter(pl.col("prompt_id") != "p2").write_parquet(partial)
    result = _run(
        "cross-sample", prompts, "--policy", "forward", *common, "--map", "retrospective",
        "--map-table", partial, "--out", tmp_path / "refused.parquet",
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert f"--map-table {partial}: no trajectory of prompt_id 'p2'" in result.output


def test_the_python_api_runs_the_controls_that_the_command_line_runs(tmp_path, tiny_pair, prompts):
    """`[RLReplace()]` in Python and `--policy rl-replace` on the command line: the library
    adds the base and rl controls at rl-replace's sampling in both, so the rows are equal."""
    import divscope
    from divscope.decoding import DecodeConfig
    from divscope.decoding.cross_sample import Grid
    from divscope.decoding.policies import RLReplace
    from divscope.params import ModelPair

    base, rl = tiny_pair
    cli = tmp_path / "cli.parquet"
    result = _run(
        "cross-sample", prompts, "--base", base, "--rl", rl, "--policy", "rl-replace",
        "--n", 2, "--max-new-tokens", 8, "--seed", 1, "--batch-size", 4, "--out", cli,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    api = pl.from_arrow(divscope.cross_sample(
        prompts, ModelPair(str(base), str(rl)), [RLReplace()], tmp_path / "api.parquet",
        DecodeConfig(max_new_tokens=8, seed=1, batch_size=4), Grid(n=2), progress=False,
    ))  # fmt: skip
    assert sorted(api["policy"].unique()) == ["base", "rl", "rl-replace"]
    assert api.equals(read_cross_sample(cli))
