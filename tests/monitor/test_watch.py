"""`divscope.watch`: checkpoints scored as they appear, in step order, resumed after a stop."""

from __future__ import annotations

import json
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from divscope.errors import DivscopeError
from divscope.io import read_metadata, read_token_table
from divscope.monitor import ProbeConfig, step_statistics
from divscope.monitor.watch import Watched, find_checkpoints, watch
from tests.monitor.conftest import LAB

STEPS = (30, 60, 90, 120)
SMALL = ProbeConfig(max_new_tokens=12)
BASE = str(LAB / "base")
WEIGHTS = "model.safetensors"


def save_checkpoint(step: int, root: Path, *, weights: bool = True) -> Path:
    """Write the lab's checkpoint of `step` as a trainer does: checkpoint-N/, config and
    tokenizer first, the weights last (when `weights`)."""
    target = root / f"checkpoint-{step}"
    target.mkdir(parents=True, exist_ok=True)
    for source in sorted((LAB / f"rl-step-{step}").iterdir()):
        if source.name != WEIGHTS:
            shutil.copyfile(source, target / source.name)
    if weights:
        shutil.copyfile(LAB / f"rl-step-{step}" / WEIGHTS, target / WEIGHTS)
    return target


def wait_for(path: Path, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def one_pass(tmp_path_factory, probe_prompts):
    """The reference: one pass over a directory that already holds every checkpoint."""
    root = tmp_path_factory.mktemp("one-pass")
    for step in STEPS:
        save_checkpoint(step, root / "checkpoints")
    report = watch(root / "checkpoints", BASE, probe_prompts, root / "evolution", SMALL,
                   device="cpu", progress=False)  # fmt: skip
    return report


def test_one_pass_scores_every_checkpoint_in_step_order(one_pass):
    assert [s.step for s in one_pass.scored] == list(STEPS) and one_pass.skipped == []
    summary = one_pass.summary
    assert summary["step"].to_list() == list(STEPS)
    for watched in one_pass.scored:
        table = read_token_table(one_pass.out / f"rl-step-{watched.step}.parquet")
        # the summary's statistics are those of the step's token table
        expected = step_statistics(table)
        row = summary.filter(pl.col("step") == watched.step).row(0, named=True)
        assert {k: row[k] for k in expected} == pytest.approx(expected, nan_ok=True)
        assert table["prompt_id"].n_unique() == 4 and set(table["source"]) == {"rl"}
        metadata = read_metadata(one_pass.out / f"rl-step-{watched.step}.parquet")
        assert metadata["step"] == watched.step
        assert metadata["checkpoint"].endswith(f"checkpoint-{watched.step}")


def test_follow_scores_checkpoints_as_they_appear_and_resumes_after_a_stop(
    tmp_path, probe_prompts, one_pass
):
    checkpoints, out = tmp_path / "checkpoints", tmp_path / "evolution"
    checkpoints.mkdir()
    following = Watched(checkpoints, follow=True, every_seconds=0.1, stop_after_idle=300)

    def start(stop: threading.Event, lines: list):
        return pool.submit(watch, following, BASE, probe_prompts, out, SMALL, device="cpu",
                           progress=False, stop=stop, on_step=lines.append)  # fmt: skip

    with ThreadPoolExecutor(1) as pool:
        # first run: checkpoint-30 appears, is scored; then the run is stopped
        stop, lines = threading.Event(), []
        first = start(stop, lines)
        save_checkpoint(30, checkpoints)
        wait_for(out / "rl-step-30.parquet")
        stop.set()
        report = first.result(timeout=120)
        assert [s.step for s in report.scored] == [30] and report.interrupted

        # while no watch runs, checkpoint-60 is saved; the second run skips 30, scores 60
        save_checkpoint(60, checkpoints)
        stop, lines = threading.Event(), []
        second = start(stop, lines)
        wait_for(out / "rl-step-60.parquet")
        # checkpoint-90 without its weights yet (being written): not scored, no error
        save_checkpoint(90, checkpoints, weights=False)
        time.sleep(0.5)
        assert not (out / "rl-step-90.parquet").exists()
        shutil.copyfile(LAB / "rl-step-90" / WEIGHTS, checkpoints / "checkpoint-90" / WEIGHTS)
        save_checkpoint(120, checkpoints)
        wait_for(out / "rl-step-120.parquet")
        stop.set()
        report = second.result(timeout=120)
    assert report.skipped == [30]
    assert [s.step for s in report.scored] == [60, 90, 120] == [s.step for s in lines]
    # the result equals a one-pass run's: the same tables and statistics
    for step in STEPS:
        name = f"rl-step-{step}.parquet"
        assert_frame_equal(read_token_table(out / name), read_token_table(one_pass.out / name))
    seconds = pl.exclude("seconds")
    assert_frame_equal(report.summary.select(seconds), one_pass.summary.select(seconds))


def test_follow_stops_after_idle(tmp_path, probe_prompts):
    (tmp_path / "checkpoints").mkdir()
    watched = Watched(tmp_path / "checkpoints", follow=True, every_seconds=0.05,
                      stop_after_idle=0.3)  # fmt: skip
    start = time.monotonic()
    report = watch(watched, BASE, probe_prompts, tmp_path / "out", SMALL, device="cpu",
                   progress=False)  # fmt: skip
    assert report.scored == [] and not report.interrupted
    assert time.monotonic() - start < 60


def test_a_verl_checkpoint_of_fsdp_shards_must_be_merged_first(tmp_path, probe_prompts):
    checkpoints = tmp_path / "checkpoints"
    actor = checkpoints / "global_step_10" / "actor"
    (actor / "huggingface").mkdir(parents=True)
    shutil.copyfile(LAB / "base" / "config.json", actor / "huggingface" / "config.json")
    (actor / "model_world_size_2_rank_0.pt").write_bytes(b"shard")
    with pytest.raises(DivscopeError, match=r"global_step_10: a sharded FSDP .* merge it first"):
        watch(checkpoints, BASE, probe_prompts, tmp_path / "out", SMALL, device="cpu",
              progress=False)  # fmt: skip
    assert not (tmp_path / "out").exists()
    # once merged (weights beside the config in actor/huggingface), it is a checkpoint
    shutil.copyfile(LAB / "rl-step-30" / WEIGHTS, actor / "huggingface" / WEIGHTS)
    (found,) = find_checkpoints(checkpoints)
    assert (found.step, found.model, found.missing) == (10, actor / "huggingface", None)


def test_checkpoint_names(tmp_path):
    for name in ("checkpoint-500", "global_step_40", "step-7", "rl-step-90", "runs", "v2x"):
        save_checkpoint(30, tmp_path).rename(tmp_path / name)
    (tmp_path / "checkpoint-600").mkdir()  # no config.json: not (yet) a checkpoint
    found = find_checkpoints(tmp_path)
    assert [(c.step, c.path.name) for c in found] == [
        (7, "step-7"), (40, "global_step_40"), (90, "rl-step-90"), (500, "checkpoint-500"),
    ]  # fmt: skip
    (tmp_path / "step-90").mkdir()
    shutil.copyfile(LAB / "base" / "config.json", tmp_path / "step-90" / "config.json")
    with pytest.raises(DivscopeError, match="step 90 named twice"):
        find_checkpoints(tmp_path)


def test_a_sharded_checkpoint_waits_for_every_shard_its_index_names(tmp_path):
    target = save_checkpoint(30, tmp_path)
    (target / WEIGHTS).rename(target / "model-00001-of-00002.safetensors")
    shards = {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}
    (target / "model.safetensors.index.json").write_text(json.dumps({"weight_map": shards}))
    (found,) = find_checkpoints(tmp_path)
    assert "model-00002-of-00002.safetensors, not there yet" in found.missing


@pytest.mark.parametrize(
    "rows,message",
    [
        ([], "the probe is empty"),
        ([{"prompt_id": "a", "prompt_ids": [1, 10**9]}], "1000000000"),
    ],
)
def test_a_bad_probe_is_refused_before_any_checkpoint_is_scored(tmp_path, rows, message):
    save_checkpoint(30, tmp_path / "checkpoints")
    probe = tmp_path / "probe.jsonl"
    probe.write_text("".join(f"{pl.DataFrame([row]).write_ndjson()}" for row in rows))
    with pytest.raises(DivscopeError, match=message):
        watch(tmp_path / "checkpoints", BASE, probe, tmp_path / "out", SMALL, device="cpu",
              progress=False)  # fmt: skip
    assert not (tmp_path / "out").exists()


def test_an_evolution_of_another_probe_is_not_resumed(tmp_path, probe_prompts, one_pass):
    out = tmp_path / "evolution"
    shutil.copytree(one_pass.out, out)
    other = tmp_path / "other.jsonl"
    pl.read_ndjson(probe_prompts).head(2).write_ndjson(other)
    with pytest.raises(DivscopeError, match="holds an evolution of another probe"):
        watch(one_pass.out.parent / "checkpoints", BASE, other, out, SMALL, device="cpu",
              progress=False)  # fmt: skip


def test_plot_of_the_evolution_directory_draws_fig_11_over_the_steps(tmp_path, one_pass):
    import divscope
    from divscope import figures
    from divscope.analyses import shared_trajectories
    from divscope.analyses.study import Study
    from divscope.io import scan_token_table

    study = Study(evolution=(str(one_pass.out),))
    assert study.tokens == one_pass.out / "rl-step-120.parquet"
    tables = {step: scan_token_table(path) for step, path in study.steps.items()}
    figure = figures.evolution(tables)
    assert [axes.get_xlabel() for axes in figure.axes] == ["RL training step"] * 3
    for axes in figure.axes[:2]:  # the percentiles and the divergent share, at every step
        assert list(axes.lines[0].get_xdata()) == list(STEPS)
    # each step sampled its own responses from its checkpoint with the same seed: the same
    # tokens as the final step's where the policies drew them, others elsewhere (step 30)
    key = ["prompt_id", "sample_id", "position", "token_id"]
    rows = {step: set(t.select(key).collect().rows()) for step, t in tables.items()}
    shared = shared_trajectories(tables)
    assert shared == {step: rows[step] == rows[120] for step in STEPS}
    assert not shared[30] and shared[120]
    others = ", ".join(str(step) for step in STEPS if not shared[step])
    report = divscope.plot(study, tmp_path / "figures", names=["evolution"], formats=("png",))
    assert [p.name for p in report.written["evolution"]] == ["evolution.png"]
    index = (tmp_path / "figures" / "index.md").read_text()
    assert f"The tables of step(s) {others} score other responses" in index
