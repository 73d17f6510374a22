"""`divscope watch`: one line per checkpoint, a resumed run skips what is there, Ctrl-C ends
cleanly after the checkpoint being scored, errors in one line."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from divscope.cli import app

LAB = Path(__file__).resolve().parents[2] / "fixtures" / "lab"
runner = CliRunner()


@pytest.fixture
def checkpoints(tmp_path) -> Path:
    """checkpoint-30 and checkpoint-60 (the lab's) and a probe of 4 prompts."""
    root = tmp_path / "checkpoints"
    for step in (30, 60):
        shutil.copytree(LAB / f"rl-step-{step}", root / f"checkpoint-{step}")
    pl.read_ndjson(LAB / "prompts" / "eval.jsonl").head(4).write_ndjson(tmp_path / "probe.jsonl")
    return root


def arguments(checkpoints: Path, *more: str) -> list[str]:
    probe = checkpoints.parent / "probe.jsonl"
    return ["watch", str(checkpoints), "--base", str(LAB / "base"), "--probe", str(probe),
            "--device", "cpu", "--max-new-tokens", "8", *more]  # fmt: skip


def test_watch_prints_a_line_per_checkpoint_and_resumes(checkpoints):
    out = checkpoints / "divscope-evolution"  # the default
    incomplete = checkpoints / "checkpoint-90"  # saved up to its config: no weights yet
    incomplete.mkdir()
    shutil.copyfile(LAB / "rl-step-90" / "config.json", incomplete / "config.json")
    result = runner.invoke(app, arguments(checkpoints))
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("step ")]
    assert [line.split(":")[0] for line in lines] == ["step 30", "step 60"]
    assert "js>0.1 " in lines[0] and "Gini(ce) " in lines[0] and "(checkpoint-30)" in lines[0]
    assert f"Scored 2 checkpoints into {out}" in result.output
    assert "watch: checkpoint-90 not scored: no weights file" in result.output
    assert sorted(p.name for p in out.iterdir()) == [
        "rl-step-30.parquet", "rl-step-60.parquet", "summary.jsonl",
    ]  # fmt: skip
    again = runner.invoke(app, arguments(checkpoints))
    assert again.exit_code == 0, again.output
    assert "Scored 0 checkpoints, 2 already there" in again.output


def test_watch_errors_are_one_line(checkpoints, tmp_path):
    shard = checkpoints / "global_step_90" / "actor" / "model_world_size_1_rank_0.pt"
    shard.parent.mkdir(parents=True)
    shard.write_bytes(b"x")
    result = runner.invoke(app, arguments(checkpoints))
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "global_step_90: a sharded FSDP checkpoint" in result.output
    assert "python -m verl.model_merger merge" in result.output
    missing = runner.invoke(app, arguments(tmp_path / "none"))
    assert missing.exit_code == 2 and "no such directory of checkpoints" in missing.output


@pytest.mark.e2e
def test_ctrl_c_ends_a_follow_cleanly_after_the_checkpoint(checkpoints):
    """A --follow run in its own process: it scores what is there, waits, and the first
    SIGINT ends it with status 0 and the usual last line."""
    out = checkpoints.parent / "evolution"
    command = [sys.executable, "-m", "divscope", *arguments(checkpoints, "--follow",
               "--every-seconds", "0.2", "-o", str(out))]  # fmt: skip
    env = os.environ | {"OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    )
    deadline = time.monotonic() + 300
    while not (out / "rl-step-60.parquet").exists():
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=120)
    assert process.returncode == 0, output
    assert "waiting for new checkpoints" in output
    assert "Scored 2 checkpoints (stopped by Ctrl-C)" in output
