"""`read_responses`: detection, the refusal of an unknown layout, --correct, ids from text, and
`score --from verl` on the lab's own samples."""

from __future__ import annotations

import json
import typing

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from divscope.errors import DivscopeError
from divscope.readers import FORMATS, FromFormat, Reading, formats, read_responses, reading_info


def test_the_detected_format_is_named_on_stderr(verl_dump, capsys):
    table = read_responses(verl_dump)
    assert capsys.readouterr().err == f"note: reading {verl_dump} as verl (12 responses)\n"
    assert reading_info(table) == {"format": "verl", "source": str(verl_dump), "responses": 12}


def test_divscope_files_are_read_as_they_are_and_silently(capsys):
    table = read_responses("fixtures/lab/trajectories.jsonl")
    assert capsys.readouterr().err == ""
    assert reading_info(table)["format"] == "divscope" and table.num_rows == 512


def test_an_unknown_layout_is_refused_with_each_formats_columns(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"question": "2 + 2?", "answer_text": "4"}) + "\n")
    with pytest.raises(DivscopeError) as refused:
        read_responses(path)
    message = str(refused.value)
    assert message.startswith(f"{path}: matches no known format (--from auto)")
    for known in formats():
        assert f"  {known.name}: {', '.join(known.expected)}\n" in message
    assert "  verl: input, output, score, step\n" in message
    assert "the file has: question, answer_text." in message


def test_from_names_the_format(verl_dump, capsys):
    assert read_responses(verl_dump, Reading("verl")).num_rows == 12
    assert "as verl" in capsys.readouterr().err
    assert typing.get_args(FromFormat) == ("auto", *FORMATS)


def test_a_file_not_of_the_format_given_is_refused():
    with pytest.raises(DivscopeError, match=r"--from verl expects the columns input, output, sco"):
        read_responses("fixtures/lab/trajectories.jsonl", Reading("verl"))


def test_correct_overrides_the_formats_own(verl_dump):
    own = read_responses(verl_dump)["correct"].to_pylist()
    flipped = [not c for c in own]
    lines = [json.loads(line) for line in verl_dump.read_text().splitlines()]
    for line, wrong in zip(lines, flipped, strict=True):
        line["judge"] = wrong
    verl_dump.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert read_responses(verl_dump, Reading(correct="judge"))["correct"].to_pylist() == flipped


def test_correct_that_is_no_grade_or_no_column_is_refused(verl_dump):
    with pytest.raises(DivscopeError, match=r"column 'pred' \(.*\) is not a reward or a grade"):
        read_responses(verl_dump, Reading(correct="pred"))
    with pytest.raises(DivscopeError, match=r"--correct 'graded' is not a column of the file"):
        read_responses(verl_dump, Reading(correct="graded"))


def test_text_becomes_ids_that_round_trip(verl_dump, lab_rl_rows, lab_tokenizer):
    table = read_responses(verl_dump, Reading("verl"), lambda: lab_tokenizer)
    assert table["prompt_ids"].to_pylist() == [r["prompt_ids"] for r in lab_rl_rows]
    # the lab's responses end in EOS (id 0), which verl's text lost and no reader adds back
    assert table["response_ids"].to_pylist() == [r["response_ids"][:-1] for r in lab_rl_rows]
    assert reading_info(table)["retokenized"] == {"responses": 12, "drifted": 0}


def test_score_from_verl_gives_the_native_token_table(tmp_path, verl_dump, lab_rl_rows):
    """The lab RL model's own samples, scored from divscope's trajectories and from a verl dump
    of them: the same token rows, except what the dump lacks (the key, EOS, lengths)."""
    from divscope.params import ModelPair
    from divscope.scoring.engine import ScoreConfig
    from divscope.scoring.score import score

    native_file = tmp_path / "native.jsonl"
    native_file.write_text("".join(json.dumps(r) + "\n" for r in lab_rl_rows))
    lab = ModelPair("fixtures/lab/base", "fixtures/lab/rl")
    score(native_file, lab, tmp_path / "native.parquet", progress=False)
    score(verl_dump, lab, tmp_path / "verl.parquet", ScoreConfig(source="rl"), Reading("verl"),
          progress=False)  # fmt: skip
    native, verl = (
        pq.read_table(tmp_path / "native.parquet"),
        pq.read_table(tmp_path / "verl.parquet"),
    )
    read = read_responses(verl_dump, Reading("verl"))
    # each response's key in the dump: its prompt's hash and its rank, by text
    keys: dict[tuple, list] = {}  # identical responses to one prompt share their text
    for p, r, pid, sid in zip(
        *(read[c].to_pylist() for c in ("prompt", "response", "prompt_id", "sample_id")),
        strict=True,
    ):
        keys.setdefault((p, r), []).append((pid, sid))  # fmt: skip
    renamed = {(r["prompt_id"], r["sample_id"]): keys[(r["prompt"], r["response"])].pop()
               for r in lab_rl_rows}  # fmt: skip
    lengths = {(r["prompt_id"], r["sample_id"]): len(r["response_ids"]) for r in lab_rl_rows}
    rows = native.to_pylist()
    kept = [r for r in rows if r["position"] < lengths[(r["prompt_id"], r["sample_id"])] - 1]
    assert len(rows) - len(kept) == len(lab_rl_rows)  # one EOS row each
    assert all(r["token_id"] == 0 for r in rows if r not in kept)
    for r in kept:
        r["prompt_id"], r["sample_id"] = renamed[(r["prompt_id"], r["sample_id"])]
    order = lambda r: (r["prompt_id"], r["sample_id"], r["position"])  # noqa: E731
    expected = pa.Table.from_pylist(sorted(kept, key=order), schema=native.schema)
    got = pa.Table.from_pylist(sorted(verl.to_pylist(), key=order), schema=verl.schema)
    assert got.num_rows == expected.num_rows == native.num_rows - 12
    lacks = {"n_tokens", "rel_position"}  # the response's length: EOS is not in the dump
    assert got["position"].to_pylist() == expected["position"].to_pylist()
    assert got["n_tokens"].to_numpy().tolist() == [n - 1 for n in expected["n_tokens"].to_pylist()]
    for column in expected.column_names:
        if column in lacks:
            continue
        ours, theirs = got[column].to_numpy(zero_copy_only=False), expected[column].to_numpy(
            zero_copy_only=False)  # fmt: skip
        if np.issubdtype(ours.dtype, np.floating):
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6, err_msg=column)
        else:
            assert ours.tolist() == theirs.tolist(), column
    metadata = json.loads(verl.schema.metadata[b"divscope"])
    assert metadata["reading"] == {
        "format": "verl", "source": str(verl_dump), "responses": 12,
        "retokenized": {"responses": 12, "drifted": 0},
    }  # fmt: skip
