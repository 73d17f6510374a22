"""lighteval's details (`divscope.readers.lighteval`), on a file written by lighteval 0.13.0's
own tracker (tests/readers/fixtures/README.md) and on ones written here."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from divscope.errors import DivscopeError
from divscope.readers import ReadContext, format_module
from divscope.tables import read_arrow
from tests.readers.eval_writers import LIGHTEVAL_FIXTURE, all_layouts, write_lighteval

FORMAT = format_module("lighteval").FORMAT


def read(path, correct=None):
    return FORMAT.read(read_arrow(path), ReadContext(source=str(path), correct=correct))


def test_lightevals_own_details_map_onto_trajectories():
    table = read(LIGHTEVAL_FIXTURE)
    assert table.column_names == [
        "prompt_id",
        "sample_id",
        "prompt_ids",
        "response_ids",
        "prompt",
        "response",
        "correct",
        "correct_scope",
        "answer",
        "task",
        "em",
        "extractive_match",
    ]
    assert table.schema.field("response_ids").type == pa.large_list(pa.int32())
    raw = pq.read_table(LIGHTEVAL_FIXTURE).to_pylist()
    rows = table.to_pylist()
    # document 0 has one sample, documents 1 and 2 two
    assert [(r["prompt_id"], r["sample_id"]) for r in rows] == [
        ("0", 0),
        ("1", 0),
        ("1", 1),
        ("2", 0),
        ("2", 1),
    ]
    # the token ids are lighteval's own: nothing is re-tokenized
    assert rows[0]["prompt_ids"] == raw[0]["model_response"]["input_tokens"]
    assert [r["response_ids"] for r in rows[1:3]] == raw[1]["model_response"]["output_tokens"]
    assert [r["response"] for r in rows[1:3]] == raw[1]["model_response"]["text"]
    assert rows[0]["prompt"] == raw[0]["doc"]["query"]
    assert [r["answer"] for r in rows[:2]] == ["15", "7"]
    assert {r["task"] for r in rows} == {"custom|lab_arith|0"}
    # the default is the first metric, `em` (0: the model writes \boxed{N}, not N)
    assert table["correct"].to_pylist() == [False] * 5
    # document 1's two samples are the same text, document 2's differ
    assert rows[1]["response"] == rows[2]["response"] != rows[3]["response"]
    assert table["correct_scope"].to_pylist() == ["response"] * 3 + ["document"] * 2


def test_correct_names_another_metric():
    table = read(LIGHTEVAL_FIXTURE, correct="extractive_match")
    assert table["correct"].to_pylist() == [True] * 5


def test_an_unknown_metric_is_refused_naming_the_known_ones():
    with pytest.raises(DivscopeError, match=r"'maj@4'.*\['em', 'extractive_match'\]"):
        read(LIGHTEVAL_FIXTURE, correct="maj@4")


def test_a_metric_that_is_no_grade_is_refused(tmp_path):
    path = write_lighteval(tmp_path / "details_toy.parquet")
    raw = pq.read_table(path).to_pylist()
    for row in raw:
        row["metric"]["em"] = "maybe"
    pq.write_table(pa.Table.from_pylist(raw), path)
    with pytest.raises(DivscopeError, match=r"details_toy.parquet: column 'em'.*'maybe'"):
        read(path)


def test_written_layout_and_prompts_given_as_messages(tmp_path):
    path = write_lighteval(tmp_path / "details_toy.parquet")
    table = read(path)
    assert table["prompt_ids"].to_pylist() == [[10, 11, 12], [11, 11, 12]]
    assert table["response_ids"].to_pylist() == [[20, 21, 0], [21, 21, 0]]
    assert table["correct"].to_pylist() == [True, True]
    raw = pq.read_table(path).to_pylist()
    for row in raw:
        row["model_response"]["input"] = [{"role": "user", "content": row["doc"]["query"]}]
    pq.write_table(pa.Table.from_pylist(raw), path)
    assert "prompt" not in read(path).column_names


def test_an_api_backends_text_is_read_without_ids(tmp_path):
    path = write_lighteval(tmp_path / "details_api.parquet")
    raw = pq.read_table(path).to_pylist()
    for row in raw:
        row["model_response"]["input_tokens"] = []
        row["model_response"]["output_tokens"] = []
    pq.write_table(pa.Table.from_pylist(raw), path)
    table = read(path)
    assert not {"prompt_ids", "response_ids"} & set(table.column_names)
    assert table["prompt"].to_pylist() == [row["doc"]["query"] for row in raw]
    for row in raw:
        row["model_response"]["input"] = [{"role": "user", "content": row["doc"]["query"]}]
    pq.write_table(pa.Table.from_pylist(raw), path)
    with pytest.raises(DivscopeError, match="neither the prompts' token ids nor their text"):
        read(path)


def test_a_loglikelihood_task_is_refused(tmp_path):
    path = write_lighteval(tmp_path / "details_mc.parquet", loglikelihood=True)
    with pytest.raises(DivscopeError, match="generative tasks"):
        read(path)


def test_detected_on_its_own_files_only(tmp_path):
    for name, paths in all_layouts(tmp_path).items():
        for path in paths:
            assert FORMAT.matches(read_arrow(path).column_names) == (name == "lighteval"), path


def test_batch_padding_is_removed_given_the_tokenizer(tmp_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained("fixtures/lab/rl")
    pad, eos = tokenizer.pad_token_id, tokenizer.eos_token_id
    context = ReadContext(source=str(LIGHTEVAL_FIXTURE), tokenizer=lambda: tokenizer)
    # lighteval's own file: document 2's first sample was padded after its EOS
    padded = read(LIGHTEVAL_FIXTURE)["response_ids"].to_pylist()
    unpadded = FORMAT.read(read_arrow(LIGHTEVAL_FIXTURE), context)["response_ids"].to_pylist()
    assert padded[3][-1] == pad
    assert [ids[-1] for ids in unpadded] == [eos] * 5
    assert unpadded[3] == padded[3][: padded[3].index(eos) + 1]
    assert unpadded[:3] + unpadded[4:] == padded[:3] + padded[4:]
    # as `pad_and_gather` leaves a batch: prompts padded on the left, responses on the right
    path = write_lighteval(tmp_path / "details_toy.parquet")
    raw = pq.read_table(path).to_pylist()
    raw[0]["model_response"]["input_tokens"] = [pad, pad, 10, 11, 12]
    raw[0]["model_response"]["output_tokens"] = [[20, 21, eos, pad, pad]]
    raw[1]["model_response"]["output_tokens"] = [[21, 21, pad]]
    pq.write_table(pa.Table.from_pylist(raw), path)
    table = FORMAT.read(
        read_arrow(path), ReadContext(source=str(path), tokenizer=lambda: tokenizer)
    )
    assert table["prompt_ids"].to_pylist() == [[10, 11, 12], [11, 11, 12]]
    assert table["response_ids"].to_pylist() == [[20, 21, eos], [21, 21]]


def test_the_table_is_valid_trajectories():
    from divscope.tables import read_trajectories_arrow

    assert read_trajectories_arrow(read(LIGHTEVAL_FIXTURE)).num_rows == 5
