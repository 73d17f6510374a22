"""divscope's own columns (`divscope.readers.native`): read as they are, checked by their users."""

from __future__ import annotations

import pyarrow as pa
import pytest

from divscope.errors import DivscopeError
from divscope.readers import Reading, read_responses, reading_info
from divscope.tables import read_arrow, read_trajectories_arrow


def test_the_columns_are_the_files_own():
    path = "fixtures/lab/trajectories.jsonl"
    table = read_responses(path, Reading("divscope"))
    assert table.equals(read_arrow(path))
    assert read_trajectories_arrow(table, source=path).num_rows == 512


def test_text_trajectories_get_the_ids_score_would_give(lab_tokenizer):
    from divscope.tables import attach_ids

    text = read_arrow("fixtures/lab/trajectories.jsonl").drop_columns(
        ["prompt_ids", "response_ids"]
    )
    table = read_responses(text.slice(0, 4), tokenizer=lambda: lab_tokenizer)
    expected = attach_ids(text.slice(0, 4), lab_tokenizer)
    assert table["prompt_ids"].equals(expected["prompt_ids"])
    assert table["response_ids"].equals(expected["response_ids"])
    assert "retokenized" not in reading_info(table)  # text by choice: no drift to count


def test_a_null_text_is_refused_before_tokenizing(lab_tokenizer):
    table = pa.table({"prompt_id": ["a"], "sample_id": [0], "prompt": ["2 + 2?"],
                      "response": pa.array([None], pa.string())})  # fmt: skip
    with pytest.raises(
        DivscopeError, match=r"responses: column 'response' is null for prompt_id='a'"
    ):
        read_responses(table, tokenizer=lambda: lab_tokenizer)
