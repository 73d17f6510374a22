"""Decoding real model pairs: Qwen's byte-level BPE tokenizer (151,646 tokens, ChatML), two
stop tokens, a chat template, and an RL twin whose tokenizer renamed a special token."""

from __future__ import annotations

import json

import polars as pl
import pytest
from typer.testing import CliRunner

from divscope.cli import app
from divscope.io import read_cross_sample, read_table
from tests.qwen import ENDOFTEXT_ID as ENDOFTEXT
from tests.qwen import IM_END_ID as IM_END
from tests.qwen import IM_START_ID as IM_START

runner = CliRunner()


@pytest.fixture
def questions(tmp_path):
    rows = [
        {"prompt_id": "q0", "prompt": "Combien font 3 + 4 ? Réponds en \\boxed{}.", "answer": "7"},
        {"prompt_id": "q1", "prompt": "计算 5 × 6 🤖", "answer": "30"},
    ]
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return path


def _run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_generate_with_the_chat_template(tmp_path, qwen_pair, questions):
    out = tmp_path / "traj.parquet"
    result = _run("generate", questions, "--model", qwen_pair[0], "--chat-template", "--n", 2,
                  "--max-new-tokens", 6, "--out", out)  # fmt: skip
    assert result.exit_code == 0, result.output
    table = read_table(out)
    for text, ids in zip(table["prompt"], table["prompt_ids"], strict=True):
        assert "<|im_start|>user\n" in text and text.endswith("<|im_start|>assistant\n")
        turns = ids.to_list().count(IM_START)  # system (the template's default), user, assistant
        assert turns == 3 and ids.to_list().count(IM_END) == 2
    assert "Réponds" in table["prompt"][0] and "🤖" in table["prompt"][2]


def test_generate_with_messages_and_a_system_prompt(tmp_path, qwen_pair, qwen_tokenizer, questions):
    """A `messages` file with --system-prompt: the prompt ids are the tokenizer's own
    `apply_chat_template` ids of (system, turns), the system prompt once, in place of the
    template's default one; a prompt's own system turn is kept."""
    system = "Réfléchis étape par étape."
    rows = [json.loads(line) for line in questions.read_text().splitlines()]
    turns = {
        "q0": [{"role": "user", "content": rows[0]["prompt"]}],
        "q1": [{"role": "system", "content": "Réponds en chinois."},
               {"role": "user", "content": "2 + 2 ?"}, {"role": "assistant", "content": "四"},
               {"role": "user", "content": rows[1]["prompt"]}],
    }  # fmt: skip
    chats = tmp_path / "chats.jsonl"
    chats.write_text(
        "".join(json.dumps({"prompt_id": k, "messages": v}) + "\n" for k, v in turns.items())
    )
    out = tmp_path / "traj.parquet"
    result = _run("generate", chats, "--model", qwen_pair[0], "--system-prompt", system,
                  "--n", 1, "--max-new-tokens", 4, "--out", out)  # fmt: skip
    assert result.exit_code == 0, result.output
    table = read_table(out).sort("prompt_id")
    for key, text, ids in zip(
        table["prompt_id"], table["prompt"], table["prompt_ids"], strict=True
    ):
        own = turns[key][0]["role"] == "system"
        expected = turns[key] if own else [{"role": "system", "content": system}, *turns[key]]
        assert ids.to_list() == list(
            qwen_tokenizer.apply_chat_template(
                expected, add_generation_prompt=True, tokenize=True, return_dict=False
            )
        )
        assert text.count(system) == (0 if own else 1) and "helpful assistant" not in text


def test_cross_sample_with_the_chat_template_stops_at_either_models_stop(
    tmp_path, qwen_pair, questions
):
    """The RL twin's generation config adds <|im_end|>: every policy stops at either token,
    which is warned about and recorded."""
    out = tmp_path / "xs.parquet"
    result = _run("cross-sample", questions, "--base", qwen_pair[0], "--rl", qwen_pair[1],
                  "--policy", "base,rl,forward", "--eps", 0.1, "--budgets", "-1",
                  "--chat-template", "--n", 2, "--max-new-tokens", 5, "--out", out)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Warning: the models stop at different tokens" in result.output
    import pyarrow.parquet as pq

    metadata = json.loads(pq.read_schema(out).metadata[b"divscope"])
    assert [s["id"] for s in metadata["stop"]] == [ENDOFTEXT, IM_END]
    assert metadata["chat_template"] is True
    results = read_cross_sample(out)
    assert results.height == 3 * 2 * 2
    for ids, finished in zip(results["response_ids"], results["finished"], strict=True):
        stops = [i for i, t in enumerate(ids) if t in (ENDOFTEXT, IM_END)]
        assert stops == ([len(ids) - 1] if finished else [])


def test_a_renamed_special_token_is_warned_about_and_never_emitted(
    tmp_path, qwen_pair, qwen_renamed_rl, questions
):
    out = tmp_path / "xs.parquet"
    result = _run("cross-sample", questions, "--base", qwen_pair[0], "--rl", qwen_renamed_rl,
                  "--policy", "forward", "--eps", -1, "--budgets", -1, "--n", 2,
                  "--max-new-tokens", 3, "--temperature", 5.0,
                  "--top-p", 1.0, "--out", out)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Warning:" in result.output and "<|im_begin|>" in result.output
    results = read_cross_sample(out)
    assert results.filter(pl.col("response_ids").list.contains(IM_START)).height == 0
