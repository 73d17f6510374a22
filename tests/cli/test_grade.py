import json

import polars as pl
import pytest
from typer.testing import CliRunner

from divscope.cli import app
from divscope.io import read_table

runner = CliRunner()

ROWS = [
    {"prompt_id": "p0", "sample_id": 0, "response": r"so \boxed{\frac{1}{2}}"},
    {"prompt_id": "p0", "sample_id": 1, "response": "so 0.5"},
    {"prompt_id": "p1", "sample_id": 0, "response": r"\boxed{30^\circ}"},
]
PROMPTS = [
    {"prompt_id": "p0", "prompt": "half?", "answer": "0.5"},
    {"prompt_id": "p1", "prompt": "angle?", "answer": "30"},
]


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_grade_math_with_answers_from_prompts(tmp_path):
    source = _jsonl(tmp_path / "t.jsonl", ROWS)
    answers = _jsonl(tmp_path / "prompts.jsonl", PROMPTS)
    out = tmp_path / "graded.parquet"
    result = _run("grade", source, "--answers", answers, "--out", out, "--workers", 1)
    assert result.exit_code == 0, result.output
    graded = read_table(out)
    assert graded["correct"].to_list() == [True, False, True]
    assert graded["grade_note"].to_list() == [None, "no \\boxed{} in the response", None]
    assert "3 responses of 2 prompts: 2 correct" in result.output
    assert "mean@n 0.7500" in result.output
    assert "1 × no \\boxed{} in the response" in result.output


def test_grade_in_place_with_a_user_grader_from_the_working_directory(tmp_path, monkeypatch):
    (tmp_path / "checks.py").write_text("def nonempty(response, answer):\n    return response > ''")
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "t.parquet"
    pl.DataFrame(ROWS).with_columns(pl.lit("x").alias("answer")).write_parquet(source)
    args = ("grade", source, "--grader", "checks:nonempty", "--out", source, "--workers", 1)
    assert _run(*args).exit_code == 2  # exists
    assert _run(*args, "--overwrite").exit_code == 0
    assert read_table(source)["correct"].all()


@pytest.mark.parametrize(
    "args, message",
    [
        (("--grader", "nope"), "unknown grader 'nope'; known graders: exact, lab, math"),
        ((), "no 'answer' column"),
        (("--answers", "{missing}"), "no such file"),
    ],
)
def test_bad_input_is_a_clear_error(tmp_path, args, message):
    source = _jsonl(tmp_path / "t.jsonl", ROWS)
    args = [a.format(missing=tmp_path / "missing.jsonl") for a in args]
    result = _run("grade", source, "--out", tmp_path / "o.parquet", *args)
    assert result.exit_code == 2
    assert message in result.output
