"""verl's main_generation parquet (`divscope.readers.verl_generation`)."""

from __future__ import annotations

from divscope.prompts import template_messages
from divscope.readers import Reading, read_responses, reading_info
from tests.readers.writers import write_verl_dataset, write_verl_generation


def _generation(tmp_path):
    dataset = write_verl_dataset(tmp_path / "test.parquet", ["2 + 2?", "3 + 3?"], ["4", "6"])
    responses = [[" 4", " 5", " 4"], [" 6", " 9", " 6."]]
    return write_verl_generation(dataset, tmp_path / "gen.parquet", responses)


def test_one_row_per_response_and_each_column_maps(tmp_path, capsys):
    table = read_responses(_generation(tmp_path))
    assert capsys.readouterr().err.endswith("as verl-generation (6 responses)\n")
    assert reading_info(table)["format"] == "verl-generation"
    assert table.column_names[:5] == ["prompt_id", "sample_id", "messages", "response", "answer"]
    assert {"data_source", "ability", "reward_model", "extra_info"} <= set(table.column_names)
    assert "correct" not in table.column_names  # graded by `divscope grade`
    rows = table.to_pylist()
    assert [(r["prompt_id"], r["sample_id"]) for r in rows] == [
        ("0", 0), ("0", 1), ("0", 2), ("1", 0), ("1", 1), ("1", 2)
    ]  # fmt: skip
    assert [r["response"] for r in rows] == [" 4", " 5", " 4", " 6", " 9", " 6."]
    assert [r["answer"] for r in rows] == ["4"] * 3 + ["6"] * 3
    assert rows[4]["messages"] == [{"role": "user", "content": "3 + 3?"}]
    assert rows[4]["extra_info"] == {"split": "test", "index": 1}


def test_prompt_ids_go_through_the_chat_template(tmp_path, chat_tokenizer):
    table = read_responses(
        _generation(tmp_path), Reading("verl-generation"), lambda: chat_tokenizer
    )
    question = [{"role": "user", "content": "3 + 3?"}]
    assert table["prompt_ids"].to_pylist()[3] == template_messages(question, chat_tokenizer)[1]
    assert (
        table["response_ids"].to_pylist()[5]
        == chat_tokenizer(" 6.", add_special_tokens=False)["input_ids"]
    )
