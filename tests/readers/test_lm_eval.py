"""lm-evaluation-harness sample logs (`divscope.readers.lm_eval`), on one written by lm-eval
0.4.13 itself (tests/readers/fixtures/README.md) and on ones written here."""

import json

import pyarrow as pa
import pytest

from divscope.errors import DivscopeError
from divscope.readers import ReadContext, format_module
from divscope.tables import read_arrow
from tests.readers.eval_writers import LM_EVAL_FIXTURE, all_layouts, write_lm_eval

FORMAT = format_module("lm-eval").FORMAT


def read(path, correct=None):
    return FORMAT.read(read_arrow(path), ReadContext(source=str(path), correct=correct))


def test_lm_evals_own_log_maps_onto_trajectories():
    table = read(LM_EVAL_FIXTURE)
    assert table.column_names == [
        "prompt_id",
        "sample_id",
        "prompt",
        "response",
        "correct",
        "correct_scope",
        "answer",
        "doc_id",
        "filter",
        "filtered_response",
        "exact_match",
    ]
    assert table.schema.field("sample_id").type == pa.int32()
    lines = [json.loads(line) for line in LM_EVAL_FIXTURE.read_text().splitlines()]
    first = lines[0]
    rows = table.to_pylist()
    # the first filter's lines, each document's two repeats
    assert len(rows) == 6
    assert [(r["prompt_id"], r["sample_id"]) for r in rows[:2]] == [("0", 0), ("0", 1)]
    assert rows[0]["prompt"] == first["arguments"]["gen_args_0"]["arg_0"]
    assert [r["response"] for r in rows[:2]] == first["resps"][0]
    assert rows[0]["answer"] == first["target"] == "15"
    assert {r["filter"] for r in rows} == {"strict-match"}
    assert [r["filtered_response"] for r in rows[:2]] == ["[invalid]"] * 2
    assert [r["correct"] for r in rows] == [False] * 6
    # each document's metric is its repeats' own where they are the same text
    same = [len(set(line["resps"][0])) == 1 for line in lines[:3]]
    assert [r["correct_scope"] for r in rows[::2]] == [
        "response" if s else "document" for s in same
    ]


def test_correct_names_the_metric_and_filter():
    table = read(LM_EVAL_FIXTURE, correct="exact_match,flexible-extract")
    assert {r["filter"] for r in table.to_pylist()} == {"flexible-extract"}
    assert table["correct"].to_pylist() == [True] * 6
    assert table["filtered_response"].to_pylist()[:2] == ["15", "15"]
    assert read(LM_EVAL_FIXTURE, correct="exact_match")["filter"][0].as_py() == "strict-match"


def test_one_repeat_is_graded_per_response(tmp_path):
    table = read(write_lm_eval(tmp_path / "samples_toy.jsonl", repeats=1))
    assert table["correct"].to_pylist() == [True, True]
    assert table["correct_scope"].to_pylist() == ["response", "response"]
    assert table["answer"].to_pylist() == ["5", "5"]


def test_several_repeats_are_graded_per_document(tmp_path):
    table = read(write_lm_eval(tmp_path / "samples_toy.jsonl", repeats=2))
    # the metric is the first repeat's (take_first), given to both
    assert table["correct"].to_pylist() == [True, True, True, True]
    assert table["correct_scope"].to_pylist() == ["document"] * 4
    assert table["sample_id"].to_pylist() == [0, 1, 0, 1]


def test_an_unknown_metric_or_filter_is_refused_naming_the_known_ones():
    with pytest.raises(DivscopeError, match=r"metric 'acc'.*\['exact_match'\]"):
        read(LM_EVAL_FIXTURE, correct="acc")
    with pytest.raises(DivscopeError, match=r"filter 'maj'.*strict-match.*flexible-extract"):
        read(LM_EVAL_FIXTURE, correct="exact_match,maj")


def test_a_metric_that_is_no_grade_is_refused(tmp_path):
    path = write_lm_eval(tmp_path / "samples_toy.jsonl")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for line in lines:
        line["exact_match"] = "n/a"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(DivscopeError, match=r"samples_toy.jsonl: column 'exact_match'.*'n/a'"):
        read(path)


def test_a_loglikelihood_task_is_refused(tmp_path):
    path = write_lm_eval(tmp_path / "samples_mc.jsonl", loglikelihood=True)
    with pytest.raises(DivscopeError, match="generate_until"):
        read(path)


def test_detected_on_its_own_files_only(tmp_path):
    for name, paths in all_layouts(tmp_path).items():
        for path in paths:
            assert FORMAT.matches(read_arrow(path).column_names) == (name == "lm-eval"), path


def test_the_table_is_valid_trajectories():
    from divscope.tables import read_trajectories_arrow

    assert read_trajectories_arrow(read(LM_EVAL_FIXTURE)).num_rows == 6
