import json

import polars as pl
import pytest
from typer.testing import CliRunner

from divscope.cli import app
from divscope.io import read_metadata, read_token_table
from divscope.schema import TOKEN_TABLE
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
