import time

import polars as pl
import pytest

from divscope.errors import DivscopeError
from divscope.grading import GradeConfig, grade_table

EXACT = GradeConfig("exact", workers=1)


def _responses(**columns):
    base = {"prompt_id": ["a", "a", "b"], "sample_id": [0, 1, 0]}
    return pl.DataFrame(base | columns)


def test_pathological_answer_times_out_without_hanging_the_run():
    frame = _responses(
        response=[r"\boxed{9^{9^{9^{9}}}}", r"\boxed{\frac{1}{2}}", "no box"],
        answer=["5", "0.5", "3"],
    )
    start = time.monotonic()
    graded = grade_table(frame, GradeConfig("math", timeout=1.5, workers=1))
    assert time.monotonic() - start < 30  # 1.5 s limit + worker start-ups on a loaded machine
    assert graded["correct"].to_list() == [False, True, False]
    assert graded["grade_note"].to_list() == [
        "timeout after 1.5 s",
        None,
        "no \\boxed{} in the response",
    ]


def test_answers_by_prompt_replace_the_answer_column_and_columns_are_kept():
    frame = _responses(response=["x", "y", "z"], answer=["?", "?", "?"], extra=[1, 2, 3])
    answers = pl.DataFrame({"prompt_id": ["b", "a"], "answer": ["z", "y"]})
    graded = grade_table(frame, EXACT, answers=answers)
    assert graded.columns == [*frame.columns, "correct", "grade_note"]
    assert graded["correct"].to_list() == [False, True, True]
    assert graded["grade_note"].null_count() == 3


def test_cross_sample_results_repeat_sample_ids_across_policies():
    results = pl.DataFrame(
        {
            "prompt_id": ["a"] * 4,
            "sample_id": [0, 0, 0, 0],
            "policy": ["base", "rl", "forward", "forward"],
            "budget": [-1, -1, 0, 4],
            "response": [r"\boxed{2}", r"\boxed{1}", r"\boxed{1}", r"\boxed{1}"],
            "correct": pl.Series([None] * 4, dtype=pl.Boolean),
        }
    )
    answers = pl.DataFrame({"prompt_id": ["a"], "answer": ["1"], "prompt": ["?"]})
    graded = grade_table(results, EXACT, answers=answers)
    assert graded["correct"].to_list() == [False, True, True, True]


def test_existing_verdicts_are_replaced():
    frame = _responses(response=["x", "y", "z"], answer=["x"] * 3, correct=[False, True, None])
    graded = grade_table(frame, EXACT)
    assert graded["correct"].to_list() == [True, False, False]
    assert graded.columns.count("correct") == 1


@pytest.mark.parametrize(
    "frame, answers, message",
    [
        (_responses(answer=["1"] * 3), None, "missing column.*'response'"),
        (_responses(response=["1"] * 3), None, "no 'answer' column.*--answers"),
        (
            _responses(response=["1"] * 3),
            pl.DataFrame({"prompt_id": ["a"], "answer": ["1"]}),
            "1 response.*no gold answer, e.g. prompt_id='b'",
        ),
        (
            _responses(response=["1"] * 3),
            pl.DataFrame({"prompt_id": ["a", "a", "b"], "answer": ["1"] * 3}),
            "prompt_id 'a' appears more than once",
        ),
        (
            _responses(response=["1"] * 3),
            pl.DataFrame({"prompt_id": ["a", "b"], "gold": ["1"] * 2}),
            "answers: missing column.*'answer'",
        ),
        (
            _responses(response=["1", None, "1"], answer=["1"] * 3),
            None,
            "'response' is null for prompt_id='a', sample_id=1",
        ),
        (_responses(response=["1"] * 3, answer=["1", None, "1"]), None, "no gold answer"),
    ],
)
def test_bad_input(frame, answers, message):
    with pytest.raises(DivscopeError, match=message):
        grade_table(frame, EXACT, answers=answers)


def test_unknown_grader():
    frame = _responses(response=["1"] * 3, answer=["1"] * 3)
    with pytest.raises(DivscopeError, match="unknown grader 'maths'; known graders: exact"):
        grade_table(frame, GradeConfig("maths"))


def test_user_graders(tmp_path, monkeypatch):
    (tmp_path / "my_graders.py").write_text(
        "def longer(response, answer):\n    return len(response) > int(answer)\n"
        "def number(response, answer):\n    return 1\n"
        "def broken(response, answer):\n    raise ValueError('bad ' + response)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    frame = _responses(response=["x", "xxx", "xx"], answer=["1"] * 3)
    graded = grade_table(frame, GradeConfig("my_graders:longer", workers=2))
    assert graded["correct"].to_list() == [False, True, True]
    with pytest.raises(DivscopeError, match="returned 1; a grader must return a bool"):
        grade_table(frame, GradeConfig("my_graders:number", workers=1))
    with pytest.raises(DivscopeError, match="raised ValueError: bad x on prompt_id='a', sample"):
        grade_table(frame, GradeConfig("my_graders:broken", workers=1))
