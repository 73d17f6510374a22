import json
from pathlib import Path

from typer.testing import CliRunner

from divscope.cli import app

runner = CliRunner()
LAB = Path(__file__).parents[2] / "fixtures" / "lab"


def _run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_weights_prints_sigma_per_layer_for_each_tuned_model(tmp_path):
    out = tmp_path / "sigma.json"
    result = _run("weights", LAB / "base", LAB / "rl", LAB / "sft", "--label", "RL", "--json", out)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[1].split() == ["part", "parameters", "RL", "sft"]
    assert [line.split()[0] for line in lines[2:9]] == [
        "model.embed_tokens", "model.layers.0", "model.layers.1", "model.layers.2",
        "model.layers.3", "model.norm", "total",
    ]  # fmt: skip
    assert lines[8].split() == ["total", "454,752", "0.02358", "0.2481"]
    document = json.loads(out.read_text())
    assert document["tuned"] == {"RL": str(LAB / "rl"), "sft": str(LAB / "sft")}
    assert round(document["total"]["sigma"]["RL"], 5) == 0.02358
    assert f"Wrote {out}" in result.output


def test_weights_errors_are_one_line(tmp_path):
    result = _run("weights", LAB / "base", tmp_path)
    assert result.exit_code == 2
    assert result.output.startswith(f"Error: {tmp_path}: no model.safetensors")
    assert "Traceback" not in result.output
