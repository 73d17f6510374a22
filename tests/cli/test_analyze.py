"""`divscope analyze`: prints a digest, writes JSON, reports bad input in one line."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from divscope.cli import app
from divscope.schema import TOKEN_TABLE


def write_token_table(
    path, *, seed: int = 0, n_prompts: int = 3, samples: int = 4, length: int = 25
):
    """Write a complete random token table (every contract column) to `path`."""
    rng = np.random.default_rng(seed)
    n_responses = n_prompts * samples
    n = n_responses * length
    response = np.repeat(np.arange(n_responses), length)
    columns = {
        name: rng.random(n) if dtype.is_float() else rng.integers(1, 6, n)
        for name, dtype in TOKEN_TABLE.items()
        if dtype.is_numeric()
    }
    columns |= {
        "prompt_id": [f"p{r // samples}" for r in response],
        "sample_id": response % samples,
        "position": np.tile(np.arange(length), n_responses),
        "n_tokens": np.full(n, length),
        "js": rng.random(n) ** 4 * 0.69,
        "token": rng.choice([" wait", " the", " x"], n),
        "correct": np.repeat(rng.random(n_responses) < 0.5, length),
    }
    frame = pl.DataFrame(columns).select(pl.col(c).cast(d) for c, d in TOKEN_TABLE.items())
    frame.write_parquet(path)
    return path


POLICIES = [("base", -1, 1, 0), ("rl", -1, 2, 0), ("forward", 4, 2, 4)]


@pytest.fixture
def tokens(tmp_path):
    return write_token_table(tmp_path / "rl.parquet")


def run(*args: str):
    return CliRunner().invoke(app, ["analyze", *map(str, args)])


def test_analyze_prints_a_digest_and_writes_json(tokens, tmp_path):
    out = tmp_path / "out" / "summary.json"
    result = run(tokens, "--out", out, "--n-boot", "20")
    assert result.exit_code == 0, result.output
    assert "300 tokens, 12 responses, 3 prompts; metric js" in result.output
    assert "Gini" in result.output and "Failure AUROC" in result.output
    document = json.loads(out.read_text())
    assert document["tokens"] == str(tokens)
    assert document["n_tokens"] == 300
    assert 0 <= document["lorenz"]["gini"] <= 1
    assert len(document["positional_profile"]) == 20


def test_analyze_with_compare_and_cross_sample_results(tokens, tmp_path):
    sft = write_token_table(tmp_path / "sft.parquet", seed=1)
    other = write_token_table(tmp_path / "other.parquet", seed=2)
    xs = tmp_path / "xs.jsonl"
    rows = [
        {"prompt_id": f"p{p}", "sample_id": s, "policy": policy, "budget": budget,
         "correct": (p + s) % 3 < level, "n_tokens": 20, "n_switches": sw, "n_effective": sw // 2}
        for p in range(3)
        for s in range(4)
        for policy, budget, level, sw in POLICIES
    ]  # fmt: skip
    xs.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "summary.json"
    args = ["--compare", sft, "--label", "SFT", "--compare", other, "--xs", xs, "--n-boot", "10"]
    result = run(tokens, "--out", out, *args)
    assert result.exit_code == 0, result.output
    assert "Comparison:" in result.output and "Cross-sampling:" in result.output
    document = json.loads(out.read_text())
    assert [row["label"] for row in document["comparison"]] == ["rl", "SFT", "other"]
    forward = [row for row in document["cross_sampling"] if row["policy"] == "forward"][0]
    assert forward["recovery"] is not None


def test_analyze_of_another_metric(tokens, tmp_path):
    result = run(tokens, "--out", tmp_path / "s.json", "--metric", "ce_base_rl", "--n-boot", "5")
    assert result.exit_code == 0, result.output
    assert "metric ce_base_rl" in result.output


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--metric", "nope"], "missing column(s) 'nope'"),
        (["--label", "x"], "--label given 1 times but --compare only 0 times"),
        (["--compare", "missing.parquet"], "no such token table"),
    ],
)
def test_analyze_bad_input_is_one_line_with_status_2(tokens, tmp_path, extra, message):
    result = run(tokens, "--out", tmp_path / "s.json", *extra)
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_analyze_refuses_an_existing_output_without_overwrite(tokens, tmp_path):
    out = tmp_path / "summary.json"
    out.write_text("{}\n")
    result = run(tokens, "--out", out, "--n-boot", "5")
    assert result.exit_code == 2
    assert f"{out}: output exists; pass --overwrite" in result.output
    assert out.read_text() == "{}\n"
    result = run(tokens, "--out", out, "--n-boot", "5", "--overwrite")
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["n_tokens"] == 300
