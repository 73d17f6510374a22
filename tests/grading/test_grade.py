"""`divscope.grade`: grade a response file and write it back in any format."""

import json

import pytest

from divscope import grade
from divscope.errors import DivscopeError
from divscope.io import read_table
from divscope.params import Output
from tests.grading.test_table import EXACT, _responses


@pytest.mark.parametrize("name", ["graded.parquet", "graded.jsonl", "graded"])
def test_grade_writes_every_format_and_reports(tmp_path, name):
    source = tmp_path / "in.jsonl"
    _responses(response=[r"\boxed{1}", "2", "3"], answer=["1", "1", "3"]).write_ndjson(source)
    report = grade(source, tmp_path / name, EXACT)
    assert read_table(tmp_path / name)["correct"].to_list() == [True, False, True]
    assert (report.n_responses, report.n_prompts, report.n_correct) == (3, 2, 2)
    assert report.accuracy.estimate == 0.75
    assert "mean@n 0.7500" in report.format()


def test_grade_refuses_to_overwrite_but_may_grade_in_place(tmp_path):
    source = tmp_path / "in.parquet"
    _responses(response=["1", "2", "3"], answer=["1", "1", "3"]).write_parquet(source)
    with pytest.raises(DivscopeError, match="output exists; pass --overwrite"):
        grade(source, source, EXACT)
    grade(source, Output(source, overwrite=True), EXACT)
    assert read_table(source)["correct"].to_list() == [True, False, True]
    assert [p.name for p in tmp_path.iterdir()] == ["in.parquet"]  # no temporary left behind


def test_grade_reads_a_verl_dump_as_trajectories(tmp_path):
    from divscope.grading import GradeConfig
    from divscope.readers import Reading

    dump = tmp_path / "30.jsonl"
    rows = [
        {"input": "Ana has 3 coins. She finds 4.", "output": " So \\boxed{7}.", "gts": "7",
         "score": 0.0, "step": 30},
        {"input": "Ana has 3 coins. She finds 4.", "output": " So \\boxed{8}.", "gts": "7",
         "score": 1.0, "step": 30},
    ]  # fmt: skip
    dump.write_text("".join(json.dumps(row) + "\n" for row in rows))
    report = grade(dump, tmp_path / "graded.parquet", GradeConfig("lab", workers=1),
                   reading=Reading("verl"))  # fmt: skip
    graded = read_table(tmp_path / "graded.parquet")
    assert graded["correct"].to_list() == [True, False]  # the grader's, not the file's score
    assert graded["step"].to_list() == [30, 30] and graded["prompt_id"].n_unique() == 1
    assert report.n_responses == 2
