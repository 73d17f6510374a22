"""`Study`: the shared inputs of analyze, plot and report, and the --evolution step names."""

from __future__ import annotations

from pathlib import Path

import pytest

from divscope.analyses.study import Study, evolution_steps
from divscope.errors import DivscopeError
from divscope.testing import synthetic_tokens


def test_evolution_steps():
    assert evolution_steps(["a/rl-step-40.parquet", "100=b/final.parquet", "c/ckpt7"]) == {
        40: Path("a/rl-step-40.parquet"),
        100: Path("b/final.parquet"),
        7: Path("c/ckpt7"),
    }
    with pytest.raises(DivscopeError, match="cannot tell the training step"):
        evolution_steps(["rl.parquet"])
    with pytest.raises(DivscopeError, match="step 4 given twice"):
        evolution_steps(["x-4.parquet", "4=y.parquet"])


def test_an_evolution_directory_expands_to_its_step_tables(tmp_path):
    evolution = tmp_path / "evolution"
    evolution.mkdir()
    for step in (500, 30, 60):
        synthetic_tokens(n_prompts=1, n_samples=1, seed=step).write_parquet(
            evolution / f"rl-step-{step}.parquet"
        )
    (evolution / "summary.jsonl").write_text("{}\n")
    (evolution / ".rl-step-90.parquet.tmp").write_text("being written")
    expected = {s: evolution / f"rl-step-{s}.parquet" for s in (30, 60, 500)}
    assert evolution_steps([str(evolution)]) == expected
    assert list(evolution_steps([str(evolution)])) == [30, 60, 500]
    assert (
        evolution_steps([str(evolution), f"1000={tmp_path / 'x.parquet'}"])[1000].name
        == "x.parquet"
    )
    with pytest.raises(DivscopeError, match="step 60 given twice"):
        evolution_steps([str(evolution), str(expected[60])])
    # the token table defaults to the last step's
    study = Study(evolution=(str(evolution),))
    assert study.tokens == expected[500] and study.steps == expected
    assert Study(tmp_path / "rl.parquet", evolution=(str(evolution),)).tokens.name == "rl.parquet"


def test_a_directory_of_parts_stays_one_table_and_an_empty_one_is_refused(tmp_path):
    parts = tmp_path / "ckpt7"
    parts.mkdir()
    synthetic_tokens(n_prompts=1, n_samples=1).write_parquet(parts / "part-00000.parquet")
    assert evolution_steps([str(parts)]) == {7: parts}
    empty = tmp_path / "evolution"
    empty.mkdir()
    with pytest.raises(DivscopeError, match="without rl-step-N.parquet tables"):
        evolution_steps([str(empty)])
    with pytest.raises(DivscopeError, match="give TOKENS, or --evolution"):
        Study()


def test_difficulty_reads_graded_responses_of_any_format(tmp_path):
    import json

    from divscope.readers import Reading

    dump = tmp_path / "0.jsonl"
    scores = {"easy": [1.0, 1.0], "mid": [1.0, 0.0], "hard": [0.0, 0.0]}
    dump.write_text("".join(
        json.dumps({"input": q, "output": f" try {i}", "score": s, "step": 0, "acc": s > 0}) + "\n"
        for q, values in scores.items() for i, s in enumerate(values)
    ))  # fmt: skip
    tokens = tmp_path / "tokens.parquet"
    synthetic_tokens(n_prompts=1, n_samples=1).write_parquet(tokens)
    study = Study(tokens, difficulty=dump,
                  difficulty_reading=Reading("verl", correct="acc"))  # fmt: skip
    tertiles = study.tables.difficulty
    assert tertiles["pass_at_1"].to_list() == [0.0, 0.5, 1.0]
    assert tertiles["difficulty"].to_list() == ["hard", "medium", "easy"]


def test_difficulty_of_ungraded_responses_says_to_grade_them(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    generated = tmp_path / "gen.parquet"
    prompt = [{"role": "user", "content": "2 + 2?"}]
    pq.write_table(pa.table({"prompt": [prompt], "responses": [[" 4", " 5"]]}), generated)
    tokens = tmp_path / "tokens.parquet"
    synthetic_tokens(n_prompts=1, n_samples=1).write_parquet(tokens)
    with pytest.raises(DivscopeError, match=r"gen.parquet: no 'correct' column \(read as verl-gen"):
        _ = Study(tokens, difficulty=generated).tables
