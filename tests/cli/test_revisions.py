"""The command line with models by revision (`--rl-revision`, `ID@REVISION`) and `hf://`
inputs, from a Hub cache offline (`offline_hub`): what score and generate record of them."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from divscope.analyses.study import evolution_steps
from divscope.cli import app
from divscope.io import read_metadata, read_table

LAB = Path("fixtures/lab")
runner = CliRunner()


def _few(tmp_path: Path, source: Path, n: int) -> Path:
    few = tmp_path / "few.jsonl"
    with source.open() as lines:
        few.write_text("".join(line for _, line in zip(range(n), lines, strict=False)))
    return few


def test_score_records_the_revision_its_commit_and_the_hf_input(tmp_path, offline_hub):
    offline_hub.add("org/run", LAB / "rl-step-30")
    step = offline_hub.add("org/run", LAB / "rl", revision="step-1")
    few = _few(tmp_path, LAB / "trajectories.jsonl", 4)
    offline_hub.add("org/study", few, folder="rollouts/few.jsonl", kind="dataset")
    given = "hf://datasets/org/study/rollouts/few.jsonl"
    out = tmp_path / "tokens"  # a directory of parts, with its manifest
    result = runner.invoke(app, [
        "score", given, "--base", str(LAB / "base"), "--rl", "org/run", "--rl-revision",
        "step-1", "-o", str(out), "--device", "cpu",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    metadata = read_metadata(out)
    assert metadata["trajectories"] == given
    rl = metadata["models"]["rl"]
    assert (rl["name_or_path"], rl["revision"], rl["commit_hash"]) == ("org/run", "step-1", step)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["settings"]["models"]["rl"] == "org/run@step-1"
    assert evolution_steps([str(out)]) == {1: out}  # the step, from the revision


def test_generate_names_its_model_with_the_revision(tmp_path, offline_hub):
    step = offline_hub.add("org/run", LAB / "rl", revision="step-1")
    prompts = _few(tmp_path, LAB / "prompts/eval.jsonl", 1)
    out = tmp_path / "rl.parquet"
    result = runner.invoke(app, [
        "generate", str(prompts), "--model", "org/run@step-1", "-o", str(out), "--n", "1",
        "--max-new-tokens", "4", "--device", "cpu",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert read_table(out)["model"].to_list() == ["org/run@step-1"]
    assert read_metadata(out)["model"] == "org/run@step-1"
    assert read_metadata(out)["models"]["model"] == {
        "name_or_path": "org/run",
        "revision": "step-1",
        "subfolder": None,
        "commit_hash": step,
    }
