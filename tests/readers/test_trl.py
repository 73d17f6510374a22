"""TRL's completion logs (`divscope.readers.trl`)."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from divscope.errors import DivscopeError
from divscope.readers import ReadContext, format_module
from divscope.tables import read_arrow
from tests.readers.eval_writers import TRL_FIXTURE, all_layouts, write_trl

FORMAT = format_module("trl").FORMAT


def read(path, correct=None):
    return FORMAT.read(read_arrow(path), ReadContext(source=str(path), correct=correct))


def test_columns_map_onto_trajectories(tmp_path):
    table = read(write_trl(tmp_path / "completions_00010.parquet"))
    assert table.column_names[:5] == ["prompt_id", "sample_id", "prompt", "response", "correct"]
    assert table.column_names[5:] == [
        "step",
        "accuracy_reward",
        "format_reward",
        "extracted",
        "advantage",
    ]
    rows = table.to_pylist()
    assert [r["sample_id"] for r in rows] == [0, 1, 0, 1]
    assert rows[0]["prompt_id"] == rows[1]["prompt_id"] != rows[2]["prompt_id"]
    assert rows[1]["response"] == " 3 - 2 = 1. So the answer is \\boxed{1}."
    assert [r["correct"] for r in rows] == [True, False, True, False]
    assert {r["step"] for r in rows} == {10}
    assert table.schema.field("sample_id").type == pa.int32()


def test_trls_own_log_maps_onto_trajectories():
    raw = read_arrow(TRL_FIXTURE)
    table = read(TRL_FIXTURE)
    # two rewards of the user's own, none called accuracy_reward: ungraded unless --correct
    assert table.column_names == [
        "prompt_id",
        "sample_id",
        "prompt",
        "response",
        "step",
        "boxed_answer",
        "ends_with_period",
        "advantage",
    ]
    assert table["response"].equals(raw["completion"])
    assert table["sample_id"].to_pylist() == [0, 1, 0, 1]
    assert len(set(table["prompt_id"].to_pylist())) == 2
    graded = read(TRL_FIXTURE, correct="boxed_answer")
    assert graded["correct"].to_pylist() == [v > 0 for v in raw["boxed_answer"].to_pylist()]


def test_prompt_ids_are_the_same_in_every_step(tmp_path):
    first = read(write_trl(tmp_path / "a.parquet", step=10))
    later = read(write_trl(tmp_path / "b.parquet", step=20))
    assert first.column("prompt_id").equals(later.column("prompt_id"))


def test_a_prompt_seen_again_gets_the_next_sample_ids(tmp_path):
    path = write_trl(tmp_path / "c.parquet")
    raw = read_arrow(path)
    pq.write_table(pa.concat_tables([raw, raw]), path)
    table = read(path)
    keys = list(zip(table["prompt_id"].to_pylist(), table["sample_id"].to_pylist(), strict=True))
    assert len(set(keys)) == 8
    assert table["sample_id"].to_pylist() == [0, 1, 0, 1, 2, 3, 2, 3]


def test_correct_names_another_reward(tmp_path):
    table = read(write_trl(tmp_path / "c.parquet"), correct="format_reward")
    assert table["correct"].to_pylist() == [True] * 4


def test_the_only_reward_grades_and_several_without_accuracy_leave_it_ungraded(tmp_path):
    path = write_trl(tmp_path / "c.parquet")
    raw = read_arrow(path)
    pq.write_table(raw.drop_columns(["accuracy_reward", "extracted"]), path)
    assert read(path)["correct"].to_pylist() == [True] * 4
    pq.write_table(raw.drop_columns(["accuracy_reward"]), path)
    assert "correct" not in read(path).column_names


def test_an_unknown_or_unusable_correct_column_is_refused(tmp_path):
    path = write_trl(tmp_path / "c.parquet")
    with pytest.raises(DivscopeError, match=r"'nope'.*accuracy_reward"):
        read(path, correct="nope")
    with pytest.raises(DivscopeError, match=r"c.parquet.*'extracted'"):
        read(path, correct="extracted")


def test_detected_on_its_own_files_only(tmp_path):
    for name, paths in all_layouts(tmp_path).items():
        for path in paths:
            assert FORMAT.matches(read_arrow(path).column_names) == (name == "trl"), path


def test_the_table_is_valid_trajectories(tmp_path):
    from divscope.tables import read_trajectories_arrow

    table = read(write_trl(tmp_path / "completions_00010.parquet"))
    assert read_trajectories_arrow(table).num_rows == 4
