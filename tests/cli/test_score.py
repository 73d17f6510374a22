import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

import divscope
from divscope.cli import app
from divscope.errors import DivscopeError
from divscope.io import read_metadata, read_token_table
from divscope.params import ModelPair, PartedOutput, Placement
from divscope.schema import TOKEN_TABLE
from divscope.scoring import ScoreConfig
from divscope.scoring.score import source_roles
from tests.tinymodels import WORDS, make_model, make_tokenizer

runner = CliRunner()


def _trajectories(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


ROWS = [
    {
        "prompt_id": "p0",
        "sample_id": 0,
        "prompt": "w1 w2 w3",
        "response": "w4 w5 w6 w7",
        "correct": True,
    },
    {
        "prompt_id": "p0",
        "sample_id": 1,
        "prompt": "w1 w2 w3",
        "response": "w8 <eos>",
        "correct": False,
    },
    {
        "prompt_id": "p1",
        "sample_id": 0,
        "prompt": "w9",
        "response": "w10 w11 w12 w13 w14 w15",
        "correct": None,
    },
]


def _run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_score_end_to_end(tmp_path, tiny_pair):
    base, rl = tiny_pair
    out = tmp_path / "tokens.parquet"
    result = _run(
        "score",
        _trajectories(tmp_path / "t.jsonl", ROWS),
        "--base",
        base,
        "--rl",
        rl,
        "--out",
        out,
        "--top-p",
        "0.9",
        "--device",
        "cpu",
    )
    assert result.exit_code == 0, result.output
    assert "sequences        3" in result.output and "tokens           12" in result.output
    table = read_token_table(out)
    assert table.schema == pl.Schema(TOKEN_TABLE)
    assert table.height == 12
    first = table.filter(pl.col("prompt_id") == "p1").sort("position")
    assert first["position"].to_list() == list(range(6))
    assert first["n_tokens"].unique().to_list() == [6]
    assert first["token"].to_list() == [f"w{i}" for i in range(10, 16)]
    assert table.group_by("prompt_id", "sample_id").agg(pl.col("correct").first()).sort(
        "prompt_id", "sample_id"
    )["correct"].to_list() == [True, False, None]
    metadata = read_metadata(out)
    assert metadata["top_p"] == 0.9 and metadata["temperature"] == 1.0
    assert metadata["models"]["rl"]["name_or_path"] == str(rl)
    assert metadata["models"]["base"]["architecture"] == "LlamaForCausalLM"


def _tokenizer_twin(tmp_path, words):
    path = tmp_path / "twin"
    make_model("llama", vocab_size=48, seed=3).save_pretrained(path)
    make_tokenizer(words).save_pretrained(path)
    return path


@pytest.mark.parametrize(
    "case,message",
    [
        ("missing_column", "missing column(s) 'sample_id'"),
        ("empty_response", "empty response for prompt_id='p0', sample_id=0"),
        ("foreign_ids", "token id 999 of prompt_id='p9', sample_id=0 is outside"),
        ("tokenizers_differ", "token id 4 is 'w0' for base but 'x0' for rl"),
        ("too_long", "is too long for the base model"),
        ("unreadable", "could not be read"),
        ("exists", "output exists; pass --overwrite"),
        ("no_rl", "no rl model given; pass --rl."),
    ],
)
def test_bad_input_is_a_clear_error_and_writes_nothing(tmp_path, tiny_pair, case, message):
    base, rl = tiny_pair
    rows = [dict(r) for r in ROWS]
    out = tmp_path / "tokens.parquet"
    if case == "missing_column":
        for row in rows:
            del row["sample_id"]
    elif case == "empty_response":
        rows[0]["response"] = ""
    elif case == "foreign_ids":
        rows.append({"prompt_id": "p9", "sample_id": 0, "prompt_ids": [5], "response_ids": [999]})
        for row in rows:
            row.setdefault("prompt_ids", [5])
            row.setdefault("response_ids", [6])
    elif case == "tokenizers_differ":
        rl = _tokenizer_twin(tmp_path, ["x0", *WORDS[1:]])
    elif case == "too_long":
        rows[2]["response"] = " ".join(["w1"] * 80)  # the tiny models hold 64 positions
    elif case == "exists":
        out.write_text("precious")
    trajectories = _trajectories(tmp_path / "t.jsonl", rows)
    if case == "unreadable":
        trajectories = tmp_path / "t.parquet"
        trajectories.write_bytes(b"\x00garbage")
    models = ["--base", base] + ([] if case == "no_rl" else ["--rl", rl])
    result = _run("score", trajectories, *models, "--out", out)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split()), result.output
    if case == "exists":
        assert out.read_text() == "precious"
    else:
        assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_interrupted_run_leaves_no_output(tmp_path, tiny_pair, monkeypatch):
    import divscope.scoring.engine as engine

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(engine, "pair_stats", interrupted)
    base, rl = tiny_pair
    out = tmp_path / "tokens_dir"
    result = _run(
        "score", _trajectories(tmp_path / "t.jsonl", ROWS), "--base", base, "--rl", rl, "--out", out
    )
    assert result.exit_code != 0
    assert list(tmp_path.iterdir()) == [tmp_path / "t.jsonl"]


# ---------------------------------------------------------------- the trajectories' source

LAB = Path(__file__).resolve().parents[2] / "fixtures" / "lab"
LAB_MODELS = ["--base", LAB / "base", "--rl", LAB / "rl"]


def _lab_rows(path, *, model=True):
    """Two base rollouts and two RL trajectories of the lab (samples 0-3 are base's, 4-7 rl's)."""
    rows = pl.read_ndjson(LAB / "trajectories.jsonl").filter(
        pl.col("prompt_id").is_in(["eval-000", "eval-001"]) & pl.col("sample_id").is_in([3, 4])
    )
    rows.drop([] if model else ["model"]).write_ndjson(path)
    return rows


def _sources(table):
    return dict(
        table.group_by("prompt_id", "sample_id")
        .agg(pl.col("source").unique())
        .explode("source")
        .select(pl.concat_str("prompt_id", "sample_id", separator="/"), "source")
        .iter_rows()
    )


def test_each_trajectory_keeps_the_model_that_generated_it(tmp_path):
    rows = _lab_rows(tmp_path / "t.jsonl")
    result = _run("score", tmp_path / "t.jsonl", *LAB_MODELS, "--out", tmp_path / "tokens.parquet")
    assert result.exit_code == 0, result.output
    assert "note:" not in result.output
    table = read_token_table(tmp_path / "tokens.parquet")
    assert table.columns[:3] == ["prompt_id", "sample_id", "source"]
    assert _sources(table) == {
        "eval-000/3": "base", "eval-000/4": "rl", "eval-001/3": "base", "eval-001/4": "rl",
    }  # fmt: skip
    assert read_metadata(tmp_path / "tokens.parquet")["sources"] == {"base": "base", "rl": "rl"}
    # Without the column, the same rows are scored with a null source: only `source` differs.
    _lab_rows(tmp_path / "plain.jsonl", model=False)
    result = _run("score", tmp_path / "plain.jsonl", *LAB_MODELS, "--out", tmp_path / "plain")
    assert result.exit_code == 0, result.output
    plain = read_token_table(tmp_path / "plain")
    assert plain["source"].null_count() == plain.height == rows["response_ids"].list.len().sum()
    order = ("prompt_id", "sample_id", "position")
    assert plain.drop("source").sort(order).equals(table.drop("source").sort(order))
    # One note, naming the file and what the analyses then do.
    assert result.output.count("note:") == 1, result.output
    said = " ".join(result.output.split())
    assert f"{tmp_path / 'plain.jsonl'}: trajectories have no 'model' and no --source" in said
    assert "cannot tell base rollouts from RL trajectories and pool them" in said
    assert read_metadata(tmp_path / "plain")["sources"] == {}


def test_source_names_the_model_of_a_file_without_the_column(tmp_path, tiny_pair):
    base, rl = tiny_pair
    trajectories = _trajectories(tmp_path / "t.jsonl", ROWS)
    out = tmp_path / "tokens.parquet"
    result = _run("score", trajectories, "--base", base, "--rl", rl, "--out", out, "--source", rl)
    assert result.exit_code == 0, result.output
    assert "note:" not in result.output
    assert read_token_table(out)["source"].unique().to_list() == [str(rl)]
    assert read_metadata(out)["sources"] == {str(rl): "rl"}


def test_a_source_that_the_model_column_contradicts_is_refused(tmp_path):
    _lab_rows(tmp_path / "t.jsonl")
    out = tmp_path / "tokens.parquet"
    result = _run("score", tmp_path / "t.jsonl", *LAB_MODELS, "--out", out, "--source", "rl")
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert (
        f"{tmp_path / 't.jsonl'}: column 'model' says ['base', 'rl'], but --source is 'rl'" in said
    )
    assert not out.exists()


def test_source_roles_name_the_base_and_the_tuned_model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    base, sft = "models/base", "models/sft-control"
    values = [
        "base", "rl",  # the roles' names
        "models/base", "models/sft-control",  # the paths as given
        str(tmp_path / "models" / "base"),  # resolved
        "sft-control",  # the last component
        "teacher", None,  # neither; null is left out
    ]  # fmt: skip
    assert source_roles(values, base, sft) == {
        "base": "base", "rl": "rl", "models/base": "base", "models/sft-control": "rl",
        str(tmp_path / "models" / "base"): "base", "sft-control": "rl", "teacher": None,
    }  # fmt: skip
    # A value that names both models alike names neither; the role's name comes first.
    assert source_roles(["ckpt", "base"], "a/ckpt", "b/ckpt") == {"ckpt": None, "base": "base"}
    assert source_roles(["base"], "x/model", "y/base") == {"base": "base"}


def test_the_source_is_kept_through_shards_and_a_resume_with_another_is_refused(
    tmp_path, tiny_pair
):
    base, rl = tiny_pair
    trajectories = _trajectories(tmp_path / "t.jsonl", ROWS)
    models = ModelPair(str(base), str(rl), placement=Placement(device="cpu"))
    config, other = ScoreConfig(source="base"), ScoreConfig(source="rl")
    whole = tmp_path / "whole.parquet"
    divscope.score(trajectories, models, whole, config, progress=False)
    out = tmp_path / "tokens"
    first = PartedOutput(out, shard="0/2", resume=True)
    assert divscope.score(trajectories, models, first, config, progress=False) is None
    second = PartedOutput(out, shard="1/2", resume=True)
    with pytest.raises(DivscopeError, match='source: was "base", now "rl"'):
        divscope.score(trajectories, models, second, other, progress=False)
    divscope.score(trajectories, models, second, config, progress=False)
    assert read_token_table(out).equals(read_token_table(whole))
    assert set(read_token_table(out)["source"]) == {"base"}
    assert read_metadata(out)["sources"] == {"base": "base"}


def test_from_and_correct_read_a_verl_dump(tmp_path):
    import json

    rows = _lab_rows(tmp_path / "t.jsonl").filter(pl.col("model") == "rl").to_dicts()
    dump = tmp_path / "rollouts" / "30.jsonl"
    dump.parent.mkdir()
    dump.write_text("".join(
        json.dumps({"input": r["prompt"], "output": r["response"], "gts": r["answer"],
                    "score": 0.0, "step": 30, "acc": True}) + "\n"
        for r in rows
    ))  # fmt: skip
    out = tmp_path / "tokens.parquet"
    result = _run("score", dump.parent, *LAB_MODELS, "--out", out, "--source", "rl",
                  "--from", "verl", "--correct", "acc")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"note: reading {dump.parent} as verl (2 responses)" in result.output
    tokens = read_token_table(out)
    assert tokens["correct"].unique().to_list() == [True]  # acc, not score
    assert read_metadata(out)["reading"]["format"] == "verl"
