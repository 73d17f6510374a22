"""Fixtures of the readers' tests: the lab's RL trajectories and a verl dump written from them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

LAB = Path("fixtures/lab")


@pytest.fixture(scope="session")
def lab_tokenizer():
    """The lab's tokenizer (base and RL share it)."""
    from divscope.models.tokenizers import load_tokenizer

    return load_tokenizer(str(LAB / "base"))


@pytest.fixture(scope="session")
def lab_rl_rows() -> list[dict]:
    """The lab RL model's trajectories of its first three prompts (12 responses)."""
    with (LAB / "trajectories.jsonl").open() as lines:
        rows = [json.loads(line) for line in lines]
    prompts = sorted({r["prompt_id"] for r in rows if r["model"] == "rl"})[:3]
    return [r for r in rows if r["model"] == "rl" and r["prompt_id"] in prompts]


@pytest.fixture
def verl_dump(tmp_path, lab_rl_rows, lab_tokenizer) -> Path:
    """A verl rollout dump of `lab_rl_rows` at step 30: `{rollout_data_dir}/30.jsonl`."""
    from tests.readers.writers import verl_rollouts, write_verl_dump

    return write_verl_dump(tmp_path / "rollouts", 30, **verl_rollouts(lab_rl_rows, lab_tokenizer))


@pytest.fixture(scope="session")
def chat_tokenizer(qwen_tokenizer_dir):
    """Qwen's real tokenizer with its ChatML template (no model built)."""
    from divscope.models.tokenizers import load_tokenizer

    return load_tokenizer(str(qwen_tokenizer_dir))
