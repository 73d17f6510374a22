"""`divscope.study_file`: a recorded invocation written as TOML that reads back the same, and
the outputs it is read from."""

import json
import math
import tomllib

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from divscope.errors import DivscopeError
from divscope.output import INVOCATION_KEY
from divscope.study_file import config, read_invocation, study_text

OPTIONS = {
    "prompts": 'a "quoted" path\\with\tescapes\x7f and ünïcode 🙂',
    "n": 4,
    "top-p": 0.95,
    "temperature": 1e-05,
    "eps": math.inf,
    "chat-template": True,
    "stop": ["\n\n", "Question:"],
    "budgets": "0,1,2",
    "rl": None,
    "odd key": 1,
}


def test_the_study_file_reads_back_as_the_invocation_without_its_nulls():
    text = study_text({"command": "cross-sample", "options": OPTIONS})
    assert text.startswith("[cross-sample]\n")
    expected = {k: v for k, v in OPTIONS.items() if v is not None}
    assert tomllib.loads(text) == {"cross-sample": expected}


def test_a_lab_command_is_a_nested_section():
    text = study_text({"command": "lab build", "options": {"out-dir": "runs/lab", "seed": 0}})
    assert tomllib.loads(text) == {"lab": {"build": {"out-dir": "runs/lab", "seed": 0}}}


def test_the_invocation_is_read_from_parquet_a_directory_and_json(tmp_path):
    invocation = {"command": "score", "options": {"top-p": 0.7}}
    table = pa.table({"x": [1]}).replace_schema_metadata({INVOCATION_KEY: json.dumps(invocation)})
    pq.write_table(table, tmp_path / "t.parquet")
    (tmp_path / "parts").mkdir()
    pq.write_table(table, tmp_path / "parts" / "part-000000.parquet")  # no manifest
    (tmp_path / "summary.json").write_text(json.dumps({"invocation": invocation}))
    for name in ("t.parquet", "parts", "summary.json"):
        assert read_invocation(tmp_path / name) == invocation
    out = tmp_path / "study.toml"
    assert config(tmp_path / "t.parquet", out) == out.read_text() == "[score]\ntop-p = 0.7\n"
    with pytest.raises(DivscopeError, match="output exists"):
        config(tmp_path / "t.parquet", out)


@pytest.mark.parametrize(
    "name,content,message",
    [
        ("missing.parquet", None, "no such output"),
        ("rows.jsonl", '{"a": 1}\n', "a JSONL output keeps no metadata"),
        ("plain.json", '{"gini": 0.9}', "records no invocation"),
        ("broken.parquet", "not parquet", "not a readable divscope output"),
    ],
)
def test_an_output_without_an_invocation_is_named(tmp_path, name, content, message):
    if content is not None:
        (tmp_path / name).write_text(content)
    with pytest.raises(DivscopeError, match=message) as error:
        read_invocation(tmp_path / name)
    assert str(tmp_path / name) in str(error.value)
