import hashlib
import json

import pytest
from typer.testing import CliRunner

from divscope.cli import app
from divscope.errors import DivscopeError
from divscope.lab.family import BuildConfig, build


def test_build_refuses_a_non_empty_directory(tmp_path):
    (tmp_path / "keep.txt").write_text("x")
    with pytest.raises(DivscopeError, match="not empty"):
        build(tmp_path, config=BuildConfig.smoke())


def test_cli_reports_a_non_empty_directory_with_status_2(tmp_path):
    (tmp_path / "keep.txt").write_text("x")
    result = CliRunner().invoke(app, ["lab", "build", str(tmp_path), "--smoke"])
    assert result.exit_code == 2
    assert "not empty" in result.output


def _digests(root):
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "build.json"
    }


@pytest.mark.slow
def test_reduced_build_end_to_end_is_deterministic(tmp_path):
    config = BuildConfig.smoke()
    first = build(tmp_path / "a", seed=3, config=config)
    second = build(tmp_path / "b", seed=3, config=config)

    root = tmp_path / "a"
    for name in ("base", "rl", "sft", "rl-step-2"):
        assert (root / name / "model.safetensors").exists()
        assert (root / name / "tokenizer.json").exists()
    for split, n in (("train", config.n_train_prompts), ("eval", config.n_eval_prompts)):
        rows = [json.loads(line) for line in (root / "prompts" / f"{split}.jsonl").open()]
        assert len(rows) == n and set(rows[0]) == {"prompt_id", "prompt", "answer"}
    per_model = config.trajectory_prompts * config.trajectory_samples
    for file, n_models in (("trajectories.jsonl", 2), ("trajectories-sft.jsonl", 1)):
        trajectories = [json.loads(line) for line in (root / file).open()]
        assert len(trajectories) == n_models * per_model
    report = json.loads((root / "build.json").read_text())
    assert report["seed"] == 3 and set(report["eval"]) == set(report["models"])

    assert first["eval"] == second["eval"]
    assert _digests(tmp_path / "a") == _digests(tmp_path / "b")
