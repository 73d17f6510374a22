"""Every table divscope writes reads everywhere (docs/contracts.md): Hugging Face `datasets`
loads it and a `pyarrow.dataset` filter on an id or on a text column selects its rows. The
tables are what the commands write on the lab: the token table (`divscope score`), trajectories
(`divscope generate`) and cross-sample results (`divscope cross-sample`), each on two prompts."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from divscope.cli import app

LAB = Path(__file__).resolve().parents[1] / "fixtures" / "lab"
PROMPTS = ("eval-000", "eval-001")
TEXT = {"tokens": "token", "trajectories": "response", "cross-sample": "policy"}
"""A text column of each table, for the filter on text."""
SMALL_TEXT = {"string", "string_view"}
"""Arrow's text types other than `large_string`: what older readers and filters miss."""


def _run(*args) -> None:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict[str, Path]:
    """Each output table of the lab commands, by name: a directory of Parquet parts."""
    root = tmp_path_factory.mktemp("readable")
    prompts = root / "prompts.jsonl"
    with open(LAB / "prompts" / "eval.jsonl", encoding="utf-8") as lines:
        prompts.write_text("".join(next(lines) for _ in PROMPTS), encoding="utf-8")
    trajectories = root / "trajectories.jsonl"  # the lab's first trajectory of each prompt
    with open(LAB / "trajectories.jsonl", encoding="utf-8") as lines:
        kept = {}
        for line in lines:
            kept.update({p: line for p in PROMPTS if f'"{p}"' in line and p not in kept})
    trajectories.write_text("".join(kept.values()), encoding="utf-8")
    out = {name: root / name for name in TEXT}
    _run("score", trajectories, "--base", LAB / "base", "--rl", LAB / "rl", "-o", out["tokens"])
    _run("generate", prompts, "--model", LAB / "rl", "--n", 2, "--max-new-tokens", 16,
         "-o", out["trajectories"])  # fmt: skip
    _run("cross-sample", prompts, "--base", LAB / "base", "--rl", LAB / "rl",
         "--policy", "base,forward", "--eps", 0.05, "--budgets", "1", "--n", 1,
         "--max-new-tokens", 16, "--grader", "lab", "-o", out["cross-sample"])  # fmt: skip
    return out


def _parts(path: Path) -> list[str]:
    parts = sorted(str(p) for p in path.glob("part-*.parquet")) if path.is_dir() else [str(path)]
    assert parts, f"{path}: no Parquet parts"
    return parts


def _values(kind: pa.DataType) -> pa.DataType:
    """The type of a list's values (nested lists too); `kind` itself for a non-list."""
    while pa.types.is_list(kind) or pa.types.is_large_list(kind):
        kind = kind.value_type
    return kind


@pytest.mark.parametrize("name", sorted(TEXT))
def test_text_columns_are_large_strings(written, name):
    schema = pq.read_schema(_parts(written[name])[0])
    # `string_view` by name: pyarrow has no `is_string_view` before 16.
    other = {f.name: str(f.type) for f in schema if str(_values(f.type)) in SMALL_TEXT}
    assert not other, f"{name}: text columns not large_string: {other}"
    assert pa.types.is_large_string(_values(schema.field(TEXT[name]).type))


@pytest.mark.parametrize("name", sorted(TEXT))
def test_datasets_loads_every_table(written, name, tmp_path):
    import datasets  # here, not at collection: a heavy import, and no lean install has it

    parts = _parts(written[name])
    table = pa.concat_tables([pq.read_table(p) for p in parts])
    loaded = datasets.load_dataset(
        "parquet", data_files=parts, split="train", cache_dir=str(tmp_path / "hf")
    )
    assert loaded.num_rows == table.num_rows > 0
    assert loaded.column_names == table.column_names
    assert loaded[TEXT[name]] == table[TEXT[name]].to_pylist()
    assert sorted(set(loaded["prompt_id"])) == list(PROMPTS)


@pytest.mark.parametrize("name", sorted(TEXT))
def test_pyarrow_dataset_filters_on_ids_and_text(written, name):
    table = pa.concat_tables([pq.read_table(p) for p in _parts(written[name])])
    dataset = ds.dataset(_parts(written[name]), format="parquet")
    one = dataset.to_table(filter=pc.field("prompt_id") == PROMPTS[1])
    expected = [r for r in table.to_pylist() if r["prompt_id"] == PROMPTS[1]]
    assert 0 < one.num_rows < table.num_rows
    assert one.to_pylist() == expected
    text = table[TEXT[name]][0].as_py()
    matching = dataset.to_table(filter=pc.field(TEXT[name]) == text)
    assert matching.num_rows == sum(v == text for v in table[TEXT[name]].to_pylist()) > 0
    assert dataset.to_table(filter=pc.field(TEXT[name]).isin([text, "no such text"])).equals(
        matching
    )
