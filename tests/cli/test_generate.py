import json

import polars as pl
from typer.testing import CliRunner

from divscope.cli import app
from divscope.io import read_table, read_token_table

runner = CliRunner()


def _run(*args):
    return runner.invoke(app, [str(a) for a in args])


def _prompts(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_generate_then_score_and_grade_round_trip(tmp_path, tiny_pair):
    base, rl = tiny_pair
    prompts = _prompts(
        tmp_path / "prompts.jsonl",
        [
            {"prompt_id": "p0", "prompt": "w1 w2", "answer": "w3"},
            {"prompt_id": "p1", "prompt": "w7", "answer": "w8"},
        ],
    )
    traj = tmp_path / "traj"
    result = _run(
        "generate", prompts, "--model", base, "--n", 3, "--max-new-tokens", 10, "--seed", 7,
        "--top-p", 0.9, "--out", traj,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "2 prompts: generated 6 responses" in result.output
    trajectories = read_table(traj)
    assert trajectories.height == 6 and (trajectories["n_tokens"] <= 10).all()

    tokens = tmp_path / "tokens.parquet"
    result = _run("score", traj, "--base", base, "--rl", rl, "--out", tokens)
    assert result.exit_code == 0, result.output
    scored = (
        read_token_table(tokens)
        .sort("prompt_id", "sample_id", "position")
        .group_by("prompt_id", "sample_id", maintain_order=True)
        .agg(pl.col("token_id"))
    )
    expected = trajectories.sort("prompt_id", "sample_id").select(
        "prompt_id", "sample_id", pl.col("response_ids").alias("token_id")
    )
    assert scored["token_id"].to_list() == expected["token_id"].to_list()  # ids unchanged

    result = _run("grade", traj, "--grader", "exact", "--out", tmp_path / "g.jsonl", "--workers", 1)
    assert result.exit_code == 0, result.output
    assert read_table(tmp_path / "g.jsonl")["correct"].dtype == pl.Boolean


def test_prompts_without_prompt_or_prompt_ids_are_a_clear_error(tmp_path, tiny_pair):
    prompts = _prompts(tmp_path / "p.jsonl", [{"prompt_id": "a", "question": "w1"}])
    result = _run("generate", prompts, "--model", tiny_pair[0], "--out", tmp_path / "o")
    assert result.exit_code == 2
    assert "prompts need 'prompt' (text), 'messages' (chat turns) or 'prompt_ids'" in result.output


def test_vllm_options_with_the_hf_engine_are_a_clear_error(tmp_path, tiny_pair):
    prompts = _prompts(tmp_path / "p.jsonl", [{"prompt_id": "a", "prompt": "w1"}])
    result = _run(
        "generate", prompts, "--model", tiny_pair[0], "--out", tmp_path / "o",
        "--tensor-parallel-size", 2, "--gpu-memory-utilization", 0.5,
    )  # fmt: skip
    assert result.exit_code == 2
    assert "--tensor-parallel-size 2, --gpu-memory-utilization 0.5: vLLM option(s)" in result.output
    assert not (tmp_path / "o").exists()


def test_the_default_length_is_capped_by_the_context_and_says_so(tmp_path):
    """No --max-new-tokens: 8,000, capped by the lab model's context of 320 (printed)."""
    from pathlib import Path

    lab = Path(__file__).parents[2] / "fixtures" / "lab"
    question = json.loads((lab / "prompts" / "eval.jsonl").read_text().splitlines()[0])
    prompts = _prompts(tmp_path / "prompts.jsonl", [question])
    out = tmp_path / "traj.parquet"
    result = _run("generate", prompts, "--model", lab / "base", "--n", 2, "--out", out)
    assert result.exit_code == 0, result.output
    assert "note: responses are capped at" in result.output
    assert "not 8,000): the model's context is 320 tokens" in result.output
    table = read_table(out)
    room = 320 - len(table["prompt_ids"][0])
    assert (table["n_tokens"] <= room).all()
