"""`generate` on the committed lab models."""

import json
from pathlib import Path

import polars as pl
import pytest

from divscope import generate
from divscope.generation import GenerateConfig, Sampling
from divscope.grading import GradeConfig, grade_table
from divscope.io import read_table, read_token_table
from divscope.params import ModelPair

LAB = Path(__file__).resolve().parents[2] / "fixtures" / "lab"
MAX_NEW_TOKENS = 224  # the lab's GRPO length cap: most responses finish


@pytest.fixture(scope="module")
def lab_run(tmp_path_factory):
    """4 samples of each of 6 eval prompts from the lab RL model, generated twice."""
    root = tmp_path_factory.mktemp("lab")
    with (LAB / "prompts" / "eval.jsonl").open() as f:
        rows = [json.loads(line) for line, _ in zip(f, range(6), strict=False)]
    prompts = root / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = GenerateConfig(Sampling(n=4, max_new_tokens=MAX_NEW_TOKENS, seed=11))
    frames = []
    for name in ("one", "two"):
        generate(prompts, str(LAB / "rl"), root / name, config, progress=False)
        frames.append(read_table(root / name).sort("prompt_id", "sample_id"))
    return root, frames


def test_lab_generation_is_reproducible_and_well_formed(lab_run):
    from transformers import AutoTokenizer

    _, (frame, again) = lab_run
    assert frame.equals(again)
    assert frame.group_by("prompt_id").len()["len"].to_list() == [4] * 6
    eos = AutoTokenizer.from_pretrained(LAB / "rl").eos_token_id
    for row in frame.iter_rows(named=True):
        ids = row["response_ids"]
        assert len(ids) <= MAX_NEW_TOKENS and eos not in ids[:-1]
        assert row["finished"] == (ids[-1] == eos)
    assert frame["finished"].any()


def test_lab_responses_grade_and_their_ids_score_unchanged(lab_run):
    from divscope import score

    root, (frame, _) = lab_run
    graded = grade_table(frame, GradeConfig("lab", workers=1))
    assert graded["correct"].any()
    tokens = root / "tokens.parquet"
    score(root / "one", ModelPair(str(LAB / "base"), str(LAB / "rl")), tokens, progress=False)
    scored = (
        read_token_table(tokens)
        .sort("prompt_id", "sample_id", "position")
        .group_by("prompt_id", "sample_id", maintain_order=True)
        .agg(pl.col("token_id"))
    )
    assert scored["token_id"].to_list() == frame["response_ids"].to_list()
