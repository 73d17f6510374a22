"""The lean GPU path (issue 27): `score` and `cross-sample` without a grader run with polars,
math-verify, scipy and matplotlib unimportable (`tests.lean`), and write what the full install
writes; `pytest -m gpu` collects there. Text columns are `large_string`; tables written before
(`string_view`, `string`) still read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from divscope.io import read_token_table
from divscope.schema import TOKEN_TABLE, TOKEN_TABLE_ARROW
from divscope.tables import read_arrow

ROOT = Path(__file__).resolve().parents[1]
LAB = ROOT / "fixtures" / "lab"


def _divscope(*args, lean: bool) -> subprocess.CompletedProcess:
    """`divscope ARGS`, `lean`: in a process where the analysis stack cannot be imported."""
    runner = ["-m", "tests.lean"] if lean else ["-m", "divscope"]
    command = [sys.executable, *runner, *map(str, args)]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    return run


def _same_output(got: Path, want: Path) -> None:
    """Same columns, types and values, and the same metadata but for its time of creation."""
    assert pq.read_schema(got).remove_metadata() == pq.read_schema(want).remove_metadata()
    assert pq.read_table(got).equals(pq.read_table(want))
    metadata = [json.loads(pq.read_schema(p).metadata[b"divscope"]) for p in (got, want)]
    for document in metadata:
        document.pop("created_at")
    assert metadata[0] == metadata[1]


@pytest.mark.e2e
def test_score_and_cross_sample_need_no_analysis_stack(tmp_path):
    few, prompts = tmp_path / "few.jsonl", tmp_path / "prompts.jsonl"
    lines = (LAB / "trajectories.jsonl").read_text().splitlines(keepends=True)
    few.write_text("".join(lines[:4]))
    lines = (LAB / "prompts" / "eval.jsonl").read_text().splitlines(keepends=True)
    prompts.write_text("".join(lines[:2]))
    lab = ["--base", LAB / "base", "--rl", LAB / "rl"]
    decode = ["--policy", "base,rl,forward:eps=0.05", "--budgets", "1", "--n", "2"]
    decode += ["--max-new-tokens", "16"]
    for lean, name in ((True, "lean"), (False, "full")):  # the full install: polars imported
        _divscope("score", few, *lab, "--out", tmp_path / f"{name}-tokens.parquet", lean=lean)
        run = _divscope("cross-sample", prompts, *lab, *decode,
                        "--out", tmp_path / f"{name}-xs.parquet", lean=lean)  # fmt: skip
        assert "12 responses, ungraded" in run.stdout  # 2 prompts x 2 samples x 3 policies
    _same_output(tmp_path / "lean-tokens.parquet", tmp_path / "full-tokens.parquet")
    _same_output(tmp_path / "lean-xs.parquet", tmp_path / "full-xs.parquet")
    schema = pq.read_schema(tmp_path / "lean-tokens.parquet")
    text = [schema.field(c).type for c in ("prompt_id", "source", "token")]
    assert text == [pa.large_string()] * 3
    switch_tokens = pq.read_schema(tmp_path / "lean-xs.parquet").field("switch_tokens").type
    assert switch_tokens == pa.large_list(pa.large_string())


@pytest.mark.e2e  # a subprocess collecting the whole suite: 15-30 s
def test_gpu_tests_collect_without_the_analysis_stack():
    script = (
        "import sys, pytest\n"
        "from tests.lean import hide\n"
        "hide()\n"
        "sys.exit(pytest.main(['-m', 'gpu', '--collect-only', '-q', '-p', 'no:cacheprovider',"
        " '-n', '0']))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "error" not in run.stdout.lower(), run.stdout
    for module in ("tests/test_gpu_placement.py", "tests/decoding/test_gpu.py",
                   "tests/scoring/test_gpu.py"):  # fmt: skip
        assert f"{module}::" in run.stdout, run.stdout
    assert "not collected, their imports are not installed here" in run.stdout
    assert "(needs polars)" in run.stdout


def test_token_tables_of_earlier_versions_still_read(tmp_path):
    # Up to issue 27 the token table's text was string_view; pyarrow writers elsewhere give
    # string. Both read as large_string (pyarrow) and String (polars).
    frame = pl.DataFrame([dict.fromkeys(TOKEN_TABLE) | {"token": " x"}], schema=TOKEN_TABLE)
    for text in (pa.string_view(), pa.string()):
        table = frame.to_arrow()
        table = table.cast(
            pa.schema(
                pa.field(f.name, text if f.type == pa.large_string() else f.type)
                for f in table.schema
            )
        )
        path = tmp_path / f"{text}.parquet"
        pq.write_table(table, path)
        assert pq.read_schema(path).field("token").type == text
        arrow = read_arrow(path)
        assert arrow.schema == pa.schema(list(TOKEN_TABLE_ARROW.items()))
        assert arrow["token"].to_pylist() == [" x"]
        assert read_token_table(path).schema == pl.Schema(TOKEN_TABLE)
