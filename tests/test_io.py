import json

import polars as pl
import pytest

from divscope.errors import DivscopeError
from divscope.io import (
    attach_token_ids,
    read_metadata,
    read_table,
    read_token_table,
    read_trajectories,
    scan_token_table,
)
from divscope.schema import TOKEN_TABLE
from divscope.tables import TokenTableWriter
from tests.tinymodels import make_tokenizer


def _write(path, rows):
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        pl.DataFrame(rows).write_parquet(path)
    return path


ID_ROWS = [
    {"prompt_id": "a", "sample_id": 0, "prompt_ids": [1, 5], "response_ids": [6, 7, 2]},
    {"prompt_id": "a", "sample_id": 1, "prompt_ids": [1, 5], "response_ids": [8]},
]


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_read_trajectories_jsonl_and_parquet_agree(tmp_path, suffix):
    frame = read_trajectories(_write(tmp_path / f"t{suffix}", ID_ROWS))
    assert frame["prompt_id"].dtype == pl.String
    assert frame["sample_id"].dtype == pl.Int32
    assert frame["response_ids"].to_list() == [[6, 7, 2], [8]]


@pytest.mark.parametrize(
    "rows,message",
    [
        ([{"prompt_id": "a", "prompt_ids": [1], "response_ids": [2]}], "'sample_id'"),
        ([{"prompt_id": "a", "sample_id": 0, "prompt_ids": [1]}], "either 'prompt_ids'"),
        (ID_ROWS + [ID_ROWS[0]], "duplicate key prompt_id='a', sample_id=0"),
        (
            [{"prompt_id": "a", "sample_id": 0, "prompt": "w1", "response": None}],
            "column 'response' is null",
        ),
        (
            [{"prompt_id": "a", "sample_id": "x", "prompt": "w1", "response": "w2"}],
            "column 'sample_id' has the wrong type: large_string, expected int32",
        ),
    ],
)
def test_read_trajectories_rejects_bad_input(tmp_path, rows, message):
    path = _write(tmp_path / "t.jsonl", rows)
    with pytest.raises(DivscopeError, match=message):
        read_trajectories(path)


def test_unreadable_and_missing_files(tmp_path):
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet")
    with pytest.raises(DivscopeError, match="broken.parquet: could not be read"):
        read_trajectories(broken)
    with pytest.raises(DivscopeError, match="no such file"):
        read_trajectories(tmp_path / "absent.jsonl")
    with pytest.raises(DivscopeError, match="unknown file type '.csv'"):
        read_trajectories(_write(tmp_path / "t.parquet", ID_ROWS).rename(tmp_path / "t.csv"))


def test_text_is_tokenized_like_ids(tmp_path):
    tokenizer = make_tokenizer()
    rows = [{"prompt_id": "p", "sample_id": 0, "prompt": "w1 w2", "response": "w3 w4"}]
    frame = attach_token_ids(read_trajectories(_write(tmp_path / "t.jsonl", rows)), tokenizer)
    w = tokenizer.convert_tokens_to_ids
    # The prompt gets the tokenizer's special tokens (none for this word-level tokenizer's
    # template), the response never does.
    assert frame["prompt_ids"].to_list() == [tokenizer("w1 w2")["input_ids"]]
    assert frame["response_ids"].to_list() == [[w("w3"), w("w4")]]


def _token_rows(n: int) -> pl.DataFrame:
    values = {}
    for column, dtype in TOKEN_TABLE.items():
        if dtype == pl.String:
            values[column] = [f"{column}{i}" for i in range(n)]
        elif dtype == pl.Boolean:
            values[column] = [None] * n
        else:
            values[column] = list(range(n))
    return pl.DataFrame(values).with_columns(pl.col(c).cast(t) for c, t in TOKEN_TABLE.items())


@pytest.mark.parametrize("name", ["tokens.parquet", "tokens_dir"])
def test_writer_roundtrip_single_file_and_parts(tmp_path, name):
    out = tmp_path / name
    with TokenTableWriter(out, {"top_p": 0.7}, rows_per_part=3) as writer:
        writer.write(_token_rows(2))
        writer.write(_token_rows(2))
        writer.write(_token_rows(2))
    table = read_token_table(out)
    assert table.height == 6
    assert table.schema == pl.Schema(TOKEN_TABLE)
    assert read_metadata(out) == {"top_p": 0.7}
    if out.is_dir():
        assert sorted(p.name for p in out.iterdir()) == ["part-00000.parquet", "part-00001.parquet"]
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_writer_refuses_existing_output_and_keeps_it_on_failure(tmp_path):
    out = tmp_path / "tokens.parquet"
    with TokenTableWriter(out, {"run": 1}) as writer:
        writer.write(_token_rows(1))
    with pytest.raises(DivscopeError, match="output exists; pass --overwrite"):
        TokenTableWriter(out, {"run": 2})
    with pytest.raises(KeyboardInterrupt), TokenTableWriter(out, {"run": 2}, overwrite=True) as w:
        w.write(_token_rows(5))
        raise KeyboardInterrupt
    assert read_metadata(out) == {"run": 1}
    assert read_token_table(out).height == 1
    assert [p.name for p in tmp_path.iterdir()] == ["tokens.parquet"]


def test_token_table_reader_names_missing_columns(tmp_path):
    path = tmp_path / "bad.parquet"
    _token_rows(1).drop("js").write_parquet(path)
    with pytest.raises(DivscopeError, match="missing column\\(s\\) 'js'"):
        read_token_table(path)


@pytest.mark.parametrize("name", ["old.parquet", "old_dir"])
def test_a_table_from_before_the_source_column_reads_with_a_null_source(tmp_path, name):
    old = _token_rows(3).drop("source")
    path = tmp_path / name
    if name.endswith(".parquet"):
        old.write_parquet(path)
    else:  # a directory of parts, as `divscope score` wrote them
        path.mkdir()
        old[:2].write_parquet(path / "part-00000.parquet")
        old[2:].write_parquet(path / "part-00001.parquet")
    table = read_token_table(path)
    assert table.schema == pl.Schema(TOKEN_TABLE)  # `source` where the contract puts it
    assert table["source"].null_count() == 3
    assert table.drop("source").equals(old)
    lazy = scan_token_table(path).filter(pl.col("source").is_null()).select("prompt_id")
    assert lazy.collect()["prompt_id"].to_list() == ["prompt_id0", "prompt_id1", "prompt_id2"]


def test_a_jsonl_table_keeps_its_column_order_past_32_columns(tmp_path):
    # polars infers the schema of more than 32 JSONL keys in hash order; cross-sample results
    # have 36 columns, and a resumed run must equal an uninterrupted one column for column.
    names = [f"column_{i}" for i in range(40)]
    rows = [{name: (None if i % 3 else i) for i, name in enumerate(names)} for _ in range(2)]
    rows[1]["late"] = 1  # a key only a later record holds comes last
    path = tmp_path / "wide.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    assert read_table(path).columns == [*names, "late"]
