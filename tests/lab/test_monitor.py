"""`divscope lab build --monitor`: the GRPO monitor of the lab (issue 31, item 4)."""

import hashlib
import json
import re
from pathlib import Path

import polars as pl
import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from divscope.errors import DivscopeError
from divscope.io import read_token_table
from divscope.lab.family import build
from divscope.lab.monitor import PROBE_ACCURACY, REWARD, GRPOMonitor, MonitorConfig
from divscope.lab.task import verify
from divscope.monitor import EvolutionDir, step_statistics
from divscope.scoring.engine import score_table

LAB = Path(__file__).resolve().parents[2] / "fixtures" / "lab"


def _digests(root):
    """sha256 of every file under `root` but build.json and the monitor's directory."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "build.json" and "monitor" not in p.relative_to(root).parts
    }


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """The smoke build with the monitor off and on, with their logs."""
    root = tmp_path_factory.mktemp("monitor")
    out = {}
    for name, monitor in (("off", False), ("on", True)):
        lines: list[str] = []
        report = build(root / name, seed=5, smoke=True, monitor=monitor, log=lines.append)
        out[name] = (root / name, report, lines)
    return out


@pytest.mark.slow
def test_monitor_off_writes_the_build_unchanged(builds):
    path, report, lines = builds["off"]
    assert not (path / "monitor").exists()
    assert "monitor" not in report
    assert list(report["timings"]) == [
        "pretrain",
        "grpo",
        "sft",
        "evaluate",
        "trajectories",
        "total",
    ]
    assert not any(line.startswith("monitor") for line in lines)


@pytest.mark.slow
def test_monitor_changes_no_weight_and_no_output(builds):
    off, on = builds["off"], builds["on"]
    assert _digests(off[0]) == _digests(on[0])  # every checkpoint, prompts, trajectories
    assert off[1]["eval"] == on[1]["eval"]
    assert on[1]["monitor"] == {"prompts": 8, "every": 2, "seed": 508}
    assert set(on[1]["timings"]) == set(off[1]["timings"]) | {"grpo_monitor"}


@pytest.mark.slow
def test_monitor_writes_each_measured_step(builds):
    path, report, lines = builds["on"]
    evolution = EvolutionDir(path / "monitor")
    assert evolution.steps() == [2, 4]  # every 2 of the smoke build's 4 rounds
    summary = evolution.summary()
    assert summary["step"].to_list() == [2, 4]
    logged = [line for line in lines if line.startswith("monitor step")]
    assert len(logged) == 2
    # reward: the mean of the rounds since the last measurement, from the rounds' own lines.
    rewards = [
        float(m.group(1))
        for line in lines
        if (m := re.match(r"grpo step \d+/4 reward (\S+)", line))
    ]
    expected = [(rewards[0] + rewards[1]) / 2, (rewards[2] + rewards[3]) / 2]
    assert summary[REWARD].to_list() == pytest.approx(expected, abs=1e-3)

    eval_rows = [json.loads(line) for line in (path / "prompts" / "eval.jsonl").open()][:8]
    answers = {row["prompt_id"]: row["answer"] for row in eval_rows}
    tokenizer = AutoTokenizer.from_pretrained(path / "base")
    for step, row in zip([2, 4], summary.iter_rows(named=True), strict=True):
        tokens = read_token_table(path / "monitor" / f"rl-step-{step}.parquet")
        # The probe: the first 8 eval prompts, one response each.
        assert sorted(tokens["prompt_id"].unique()) == sorted(answers)
        assert tokens["sample_id"].unique().to_list() == [0]
        # The logged statistics are the table's.
        for name, value in step_statistics(tokens).items():
            assert row[name] == pytest.approx(value, rel=1e-9, nan_ok=True), name
        # By hand: the share of tokens with JS > 0.1, and the probe's accuracy.
        assert row["divscope/js_above_0.1"] == pytest.approx((tokens["js"] > 0.1).mean())
        responses = tokens.sort("position").group_by("prompt_id").agg("token_id")
        correct = [
            verify(tokenizer.decode(ids, skip_special_tokens=True), answers[prompt_id])
            for prompt_id, ids in responses.iter_rows()
        ]
        assert row[PROBE_ACCURACY] == pytest.approx(sum(correct) / len(correct))
        assert row["seconds"] > 0


@pytest.mark.slow
def test_monitor_scores_equal_divscope_score_of_the_checkpoint(builds):
    """Round 2 is also saved as rl-step-2: the monitor's numbers at step 2 equal scoring its
    probe responses afterwards with divscope's scorer against that checkpoint."""
    path = builds["on"][0]
    tokens = read_token_table(path / "monitor" / "rl-step-2.parquet")
    trajectories = (
        tokens.sort("position")
        .group_by("prompt_id", "sample_id", maintain_order=True)
        .agg(pl.col("token_id").alias("response_ids"))
    )
    prompts = {
        r["prompt_id"]: r["prompt"]
        for r in map(json.loads, (path / "prompts" / "eval.jsonl").open())
    }
    tokenizer = AutoTokenizer.from_pretrained(path / "base")
    trajectories = trajectories.with_columns(
        pl.col("prompt_id")
        .map_elements(
            lambda p: tokenizer(prompts[p], add_special_tokens=False).input_ids,
            return_dtype=pl.List(pl.Int64),
        )
        .alias("prompt_ids")
    )
    base = AutoModelForCausalLM.from_pretrained(path / "base").eval()
    rl = AutoModelForCausalLM.from_pretrained(path / "rl-step-2").eval()
    again = score_table(trajectories, base, rl, tokenizer, progress=False)
    key = ["prompt_id", "sample_id", "position"]
    mine, theirs = tokens.sort(key), again.sort(key)
    assert mine["token_id"].to_list() == theirs["token_id"].to_list()
    for column in ("js", "ce_base_rl", "logp_base", "logp_rl", "overlap_1"):
        assert mine[column].to_list() == pytest.approx(theirs[column].to_list(), abs=1e-6), column


def test_monitor_config_without_monitor_is_refused(tmp_path):
    with pytest.raises(DivscopeError, match="monitor_config given without monitor"):
        build(tmp_path, smoke=True, monitor_config=MonitorConfig())


def test_monitor_config_refuses_zero():
    with pytest.raises(DivscopeError, match="must be >= 1"):
        MonitorConfig(every=0)


def test_monitor_refuses_a_probe_shorter_than_asked(tmp_path):
    base = AutoModelForCausalLM.from_pretrained(LAB / "base")
    tokenizer = AutoTokenizer.from_pretrained(LAB / "base")
    with (LAB / "prompts" / "eval.jsonl").open() as f:
        rows = [json.loads(line) for line in f][:4]
    with pytest.raises(DivscopeError, match="needs 32 eval prompts, there are 4"):
        GRPOMonitor(
            base, base, tokenizer, rows, tmp_path, config=MonitorConfig(), max_new_tokens=8,
            seed=0, log=print,
        )  # fmt: skip
