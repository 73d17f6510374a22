"""`divscope.output`: manifests, atomic checksummed parts, resuming, and damage found on read."""

import json

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from divscope.distributed import World
from divscope.errors import DivscopeError
from divscope.io import read_table
from divscope.output import (
    INVOCATION_KEY,
    MANIFEST,
    Parts,
    frame_digest,
    part_name,
    recording,
    with_invocation,
    write_json,
)

SETTINGS = {"top_p": 0.7, "inputs_sha256": "abc"}


def _frame(unit):
    return pl.DataFrame({"unit": [unit] * 3, "value": [unit + 0.5, unit + 1.5, unit + 2.5]})


def _start(out, settings=SETTINGS, n_parts=3, **kwargs):
    flags = {"resume": False, "overwrite": False} | kwargs
    return Parts.start(out, "score", settings, n_parts, world=World(), **flags)


def _write(parts, units):
    for unit in units:
        parts.write(unit, _frame(unit), {"run": "test"})


def _complete(out):
    parts = _start(out)
    _write(parts, range(3))
    assert parts.finish(World())
    return parts


def test_a_complete_directory_reads_as_one_table_in_unit_order(tmp_path):
    out = tmp_path / "tokens"
    parts = _start(out)
    _write(parts, [2, 0])
    assert not parts.finish(World())  # part 1 missing: not complete
    with pytest.raises(DivscopeError, match=r"incomplete output of divscope score: 1 of 3 parts"):
        read_table(out)
    _write(parts, [1])
    assert parts.finish(World())
    assert read_table(out).equals(pl.concat([_frame(u) for u in range(3)]))
    manifest = json.loads((out / MANIFEST).read_text())
    assert (manifest["command"], manifest["parts"], manifest["settings"]) == ("score", 3, SETTINGS)


def test_a_single_file_is_assembled_and_the_parts_removed(tmp_path):
    for name in ("tokens.parquet", "tokens.jsonl"):
        out = tmp_path / name
        _complete(out)
        assert read_table(out).equals(pl.concat([_frame(u) for u in range(3)]))
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(name[:6])) == [
            n for n in sorted(["tokens.parquet", "tokens.jsonl"]) if (tmp_path / n).exists()
        ]
    assert not list(tmp_path.glob(".*"))


INVOCATION = {"command": "score", "options": {"top-p": 0.7, "out": "tokens"}}


def test_the_invocation_is_recorded_in_the_manifest_each_part_and_the_assembled_file(tmp_path):
    """Parts started while `recording` carry the invocation (not a setting: no digest changes);
    a single file keeps it; a run without one (from Python) records none."""
    directory, single = tmp_path / "tokens", tmp_path / "tokens.parquet"
    with recording(INVOCATION):
        started = [_start(out) for out in (directory, single)]
    for parts in started:
        _write(parts, range(3))
        assert parts.finish(World())
    assert _start(directory, resume=True).invocation is None  # the same settings
    assert json.loads((directory / MANIFEST).read_text())["invocation"] == INVOCATION
    for path in (directory / part_name(1), single):
        metadata = pq.read_schema(path).metadata
        assert json.loads(metadata[INVOCATION_KEY]) == INVOCATION
        assert json.loads(metadata[b"divscope"]) == {"run": "test"}
    _complete(tmp_path / "plain.parquet")
    assert INVOCATION_KEY not in pq.read_schema(tmp_path / "plain.parquet").metadata


def test_a_json_output_records_the_invocation_when_there_is_one(tmp_path):
    with recording(INVOCATION):
        write_json(with_invocation({"gini": 0.9}), tmp_path / "summary.json")
    assert json.loads((tmp_path / "summary.json").read_text()) == {
        "gini": 0.9,
        "invocation": INVOCATION,
    }
    assert with_invocation({"gini": 0.9}) == {"gini": 0.9}


def test_nothing_is_written_before_the_first_part(tmp_path):
    _start(tmp_path / "tokens")
    _start(tmp_path / "tokens.parquet")
    assert not list(tmp_path.iterdir())


def test_resume_keeps_finished_parts_and_checks_the_settings(tmp_path):
    out = tmp_path / "tokens"
    _write(_start(out), [0, 2])
    with pytest.raises(DivscopeError, match="pass --resume to continue it or --overwrite"):
        _start(out)
    assert _start(out, resume=True).done(range(3)) == {0, 2}
    other = SETTINGS | {"top_p": 0.9}
    changed = r"other settings or inputs \(top_p: was 0.7, now 0.9\)"
    with pytest.raises(DivscopeError, match=changed):
        _start(out, other, resume=True)
    with pytest.raises(DivscopeError, match=r"parts: was 3, now 4"):
        _start(out, n_parts=4, resume=True)
    assert _start(out, other, overwrite=True).done(range(3)) == set()
    assert not out.exists()
    with pytest.raises(DivscopeError, match="give one"):
        _start(out, resume=True, overwrite=True)


def test_resume_of_a_complete_single_file_does_nothing(tmp_path):
    out = tmp_path / "tokens.parquet"
    _complete(out)
    with pytest.raises(DivscopeError, match="output exists; pass --overwrite"):
        _start(out)
    parts = _start(out, resume=True)
    assert parts.finished and parts.finish(World())


def test_resume_without_a_manifest_is_a_clear_error(tmp_path):
    out = tmp_path / "tokens"
    _complete(out)
    (out / MANIFEST).unlink()
    with pytest.raises(DivscopeError, match=r"has no manifest \(manifest.json missing\), so it"):
        _start(out, resume=True)
    with pytest.raises(DivscopeError, match="was not written by divscope"):
        _start(out)


def test_another_commands_output_is_refused(tmp_path):
    out = tmp_path / "tokens"
    _complete(out)
    with pytest.raises(DivscopeError, match="output of divscope score, not of divscope generate"):
        Parts.start(out, "generate", SETTINGS, 3, resume=True, overwrite=False, world=World())


@pytest.mark.parametrize("damage", ["truncated", "corrupted"])
def test_a_damaged_part_is_named_on_resume_and_on_read(tmp_path, damage):
    out = tmp_path / "tokens"
    _complete(out)
    path = out / part_name(1)
    data = bytearray(path.read_bytes())
    if damage == "truncated":
        data = data[: len(data) // 2]
    else:  # same size, the last byte of a data page changed: only its checksum can tell
        column = pq.ParquetFile(path).metadata.row_group(0).column(1)
        start = column.dictionary_page_offset if column.has_dictionary_page else None
        data[(start or column.data_page_offset) + column.total_compressed_size - 1] ^= 0xFF
    path.write_bytes(bytes(data))
    reason = "Parquet magic bytes not found" if damage == "truncated" else "CRC checksum"
    message = rf"{path}: part is truncated or corrupted .*{reason}.*delete it and rerun"
    with pytest.raises(DivscopeError, match=message):
        read_table(out)
    with pytest.raises(DivscopeError, match=message):
        _start(out, resume=True).done(range(3))


def test_a_part_from_other_settings_or_another_unit_is_named(tmp_path):
    out, other = tmp_path / "tokens", tmp_path / "other"
    _complete(out)
    foreign = _start(other, SETTINGS | {"inputs_sha256": "def"})
    _write(foreign, [1])
    (out / part_name(1)).write_bytes((other / part_name(1)).read_bytes())
    with pytest.raises(DivscopeError, match=r"part-000001.parquet: part was made with other"):
        read_table(out)
    with pytest.raises(DivscopeError, match="made with other settings"):
        _start(out, resume=True).done(range(3))
    _complete(other.with_name("again"))
    (out / part_name(1)).write_bytes((other.with_name("again") / part_name(2)).read_bytes())
    with pytest.raises(DivscopeError, match="part holds unit 2, not 1"):
        read_table(out)


def test_a_killed_writer_leaves_only_a_hidden_temporary_which_resume_removes(tmp_path):
    out = tmp_path / "tokens"
    parts = _start(out)
    _write(parts, [0])
    stale = out / f".{part_name(1)}.tmp-99999"
    stale.write_bytes(b"half a part")
    assert read_table(out.parent / "tokens" / part_name(0)).height == 3
    assert _start(out, resume=True).done([1, 2]) == set()
    assert not stale.exists()


def test_shards_refuse_overwrite_and_single_files(tmp_path):
    with pytest.raises(DivscopeError, match="each shard would remove the others' parts"):
        Parts.start(tmp_path / "t", "score", SETTINGS, 3, resume=False, overwrite=True,
                    world=World(rank=0, size=2))  # fmt: skip


def test_an_empty_input_is_a_clear_error(tmp_path):
    with pytest.raises(DivscopeError, match="the input holds no rows"):
        _start(tmp_path / "t", n_parts=0)


def test_frame_digest_sees_every_value():
    frame = pl.DataFrame({"k": ["a", "b"], "ids": [[1, 2], [3]], "x": [1.0, 2.0]})
    digests = {
        frame_digest(frame),
        frame_digest(frame.with_columns(ids=pl.Series([[1], [2, 3]]))),  # same values, split
        frame_digest(frame.with_columns(k=pl.Series(["a", "c"]))),
        frame_digest(frame.with_columns(x=pl.Series([1.0, 2.5]))),
        frame_digest(frame.reverse()),
    }
    assert len(digests) == 5
    assert frame_digest(frame) == frame_digest(frame.clone())


def test_frame_digest_is_the_one_earlier_runs_recorded():
    # Manifests record `frame_digest` of the inputs, so a run resumes only where it is the
    # same as before: this value is what the polars implementation (up to issue 27) gave, and
    # an Arrow table of the same values (text as large_string or string_view) gives it too.
    frame = pl.DataFrame(
        {
            "prompt_id": ["a", "b"],
            "sample_id": pl.Series([0, 1], dtype=pl.Int32),
            "model": [None, "rl"],
            "ids": pl.Series([[1, 2], [3]], dtype=pl.List(pl.Int64)),
            "x": [0.5, 2.0],
            "ok": [True, None],
            "u": pl.Series([1, 2], dtype=pl.UInt8),
            "f": pl.Series([1, 2], dtype=pl.Float32),
            "fl": pl.Series([[0.5], [1.5, 2]], dtype=pl.List(pl.Float32)),
        }
    )
    recorded = "d71dbe71f46a4188572b8832e636a5c7aa8686076eca23117398b2edb9799138"
    table = frame.to_arrow()
    viewed = table.cast(
        pa.schema(
            pa.field(f.name, pa.string_view() if f.type == pa.large_string() else f.type)
            for f in table.schema
        )
    )
    assert frame_digest(frame) == frame_digest(table) == frame_digest(viewed) == recorded
