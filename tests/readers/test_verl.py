"""verl's rollout and validation dumps (`divscope.readers.verl`)."""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from divscope.errors import DivscopeError
from divscope.prompts import template_messages
from divscope.readers import Reading, read_responses, reading_info
from tests.readers.writers import (
    balance_batch,
    verl_rollouts,
    write_verl_dataset,
    write_verl_dump,
)

VERL = Reading(from_="verl")


def test_each_column_maps(verl_dump, lab_rl_rows, lab_tokenizer):
    dumped = [json.loads(line) for line in verl_dump.read_text().splitlines()]
    table = read_responses(verl_dump, VERL)
    assert table.column_names[:6] == [
        "prompt_id",
        "sample_id",
        "prompt",
        "response",
        "correct",
        "answer",
    ]
    assert {"score", "step", "acc", "pred"} <= set(table.column_names)
    rows = table.to_pylist()
    for row, raw, lab in zip(rows, dumped, lab_rl_rows, strict=True):
        assert row["prompt_id"] == hashlib.sha256(raw["input"].encode()).hexdigest()[:16]
        assert row["prompt"] == raw["input"] == lab["prompt"]
        assert row["response"] == raw["output"]
        assert row["correct"] is lab["correct"] and row["acc"] is lab["correct"]
        assert row["answer"] == lab["answer"] and row["step"] == 30 and row["score"] == raw["score"]
    assert "input" not in table.column_names and "gts" not in table.column_names
    # the rank of each response among its prompt's, in content order
    for prompt_id in {r["prompt_id"] for r in rows}:
        mine = [r for r in rows if r["prompt_id"] == prompt_id]
        assert sorted(r["sample_id"] for r in mine) == list(range(len(mine)))
        ranked = sorted(mine, key=lambda r: r["sample_id"])
        assert [r["response"] for r in ranked] == sorted(r["response"] for r in mine)


def test_a_batch_reordered_by_balancing_reads_the_same(
    tmp_path, verl_dump, lab_rl_rows, lab_tokenizer
):
    balanced = balance_batch(lab_rl_rows, world_size=4)
    assert balanced != lab_rl_rows
    dump = write_verl_dump(tmp_path / "balanced", 30, **verl_rollouts(balanced, lab_tokenizer))
    key = lambda row: (row["prompt_id"], row["sample_id"])  # noqa: E731
    ours = sorted(read_responses(dump, VERL).to_pylist(), key=key)
    assert ours == sorted(read_responses(verl_dump, VERL).to_pylist(), key=key)


def test_a_directory_of_steps_keeps_step(tmp_path, lab_rl_rows, lab_tokenizer):
    for step in (10, 2):
        write_verl_dump(tmp_path, step, **verl_rollouts(lab_rl_rows, lab_tokenizer))
    table = read_responses(tmp_path)  # detected
    assert table.num_rows == 2 * len(lab_rl_rows)
    assert table["step"].to_pylist() == [2] * len(lab_rl_rows) + [10] * len(lab_rl_rows)
    keys = list(zip(table["prompt_id"].to_pylist(), table["sample_id"].to_pylist(), strict=True))
    assert len(set(keys)) == len(keys)
    assert reading_info(table)["format"] == "verl"


def _chat_dump(tmp_path, tokenizer, questions, responses):
    """verl's dataset of `questions` and a validation dump of one response each: the prompt
    through the chat template, decoded without its special tokens (<|im_start|>, ...)."""
    dataset = write_verl_dataset(tmp_path / "test.parquet", questions, ["4"] * len(questions))
    templated = [
        template_messages([{"role": "user", "content": q}], tokenizer)[1] for q in questions
    ]
    inputs = tokenizer.batch_decode(templated, skip_special_tokens=True)
    dump = write_verl_dump(
        tmp_path / "validation", 0, inputs, responses, ["4"] * len(questions),
        [1.0] * len(questions), {"reward": [1.0] * len(questions)},
    )  # fmt: skip
    return dataset, dump, templated


def test_chat_template_tokens_stripped_are_rebuilt_with_prompts(tmp_path, chat_tokenizer):
    questions = ["What is 2 + 2?", "Half of 8?"]
    dataset, dump, templated = _chat_dump(tmp_path, chat_tokenizer, questions, [" 4", " 4."])
    assert "<|im_start|>" not in dump.read_text() and "user\\nWhat is 2 + 2?" in dump.read_text()
    rebuilt = read_responses(dump, Reading("verl", prompts=str(dataset)), lambda: chat_tokenizer)
    assert rebuilt["prompt_ids"].to_pylist() == templated
    assert rebuilt["messages"].to_pylist()[1] == [{"role": "user", "content": "Half of 8?"}]
    plain = read_responses(dump, VERL, lambda: chat_tokenizer)  # the decoded text tokenized
    assert all(151644 not in ids for ids in plain["prompt_ids"].to_pylist())
    assert plain["response_ids"].to_pylist() == rebuilt["response_ids"].to_pylist()


def test_inputs_that_match_no_prompt_are_refused(tmp_path, chat_tokenizer):
    dataset, dump, _ = _chat_dump(tmp_path, chat_tokenizer, ["What is 2 + 2?"], [" 4"])
    other = write_verl_dataset(tmp_path / "other.parquet", ["What is 3 + 3?"], ["6"])
    with pytest.raises(DivscopeError, match=r"1 of 1 inputs match no prompt of .*other\.parquet"):
        read_responses(dump, Reading("verl", prompts=str(other)), lambda: chat_tokenizer)
    table = pq.read_table(dataset).drop_columns(["prompt"])
    pq.write_table(table, tmp_path / "flat.parquet")
    with pytest.raises(DivscopeError, match="--prompts needs chat messages"):
        read_responses(dump, Reading("verl", prompts=str(tmp_path / "flat.parquet")),
                       lambda: chat_tokenizer)  # fmt: skip
    table = pq.read_table(dataset).to_pylist()
    table[0]["prompt"] = [{"role": "tool", "content": "What is 2 + 2?"}]
    pq.write_table(pa.Table.from_pylist(table), tmp_path / "tool.parquet")
    with pytest.raises(DivscopeError, match=r"tool\.parquet: row 0: turn 0 has role 'tool'"):
        read_responses(dump, Reading("verl", prompts=str(tmp_path / "tool.parquet")),
                       lambda: chat_tokenizer)  # fmt: skip


def test_responses_whose_text_does_not_survive_tokenization_are_counted(
    tmp_path, chat_tokenizer, capsys
):
    # Qwen's tokenizer normalizes to NFC: "e" + a combining accent comes back as "é"
    responses = [" caf\u00e9", " cafe\u0301"]
    _, dump, _ = _chat_dump(tmp_path, chat_tokenizer, ["Coffee?", "Coffee, again?"], responses)
    table = read_responses(dump, VERL, lambda: chat_tokenizer)
    assert reading_info(table)["retokenized"] == {"responses": 2, "drifted": 1}
    assert "1 of 2 responses re-tokenize to ids that do not decode back" in capsys.readouterr().err
