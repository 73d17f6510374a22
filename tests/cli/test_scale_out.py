"""Scale-out end to end on the lab: torchrun (gloo, 2 processes), `--shard i/n`, and runs killed
with SIGKILL then resumed. Every output must equal the single-process one, row for row.

New processes each load torch and the lab: end-to-end tests (marker `e2e`), out of the default
tier; CI runs them once with `-m e2e`."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
import torch

import divscope
from divscope.decoding.cross_sample import Grid
from divscope.decoding.policies import Base, Forward
from divscope.io import read_cross_sample, read_table, read_token_table
from divscope.models.threads import torch_threads
from divscope.output import MANIFEST
from divscope.params import ModelPair, PartedOutput

LAB = Path(__file__).resolve().parents[2] / "fixtures" / "lab"
TRAJECTORIES = LAB / "trajectories.jsonl"
MODELS = ["--base", str(LAB / "base"), "--rl", str(LAB / "rl")]
pytestmark = pytest.mark.e2e


def _divscope(*args, torchrun=False, **kwargs):
    """`divscope ARGS` in a new process (under torchrun with 2 gloo processes); its result."""
    launcher = [sys.executable, "-m"]
    if torchrun:
        launcher += ["torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m"]
    command = [*launcher, "divscope", *map(str, args)]
    env = os.environ | {"OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, **kwargs
    )


def _finish(process, timeout=300):
    output, _ = process.communicate(timeout=timeout)
    assert process.returncode == 0, output
    return output


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """The lab's token table, scored by one process (16 parts)."""
    out = tmp_path_factory.mktemp("single") / "tokens"
    _finish(_divscope("score", TRAJECTORIES, *MODELS, "--out", out))
    return read_token_table(out)


def test_each_trajectory_keeps_its_source(single):
    # The lab's file holds base rollouts (samples 0-3) and RL trajectories (4-7); every test
    # below compares its table with this one, `source` included.
    models = read_table(TRAJECTORIES).select(
        "prompt_id", pl.col("sample_id").cast(pl.Int32), source="model"
    )
    sources = single.select("prompt_id", "sample_id", "source").unique()
    assert sources.sort(pl.all()).equals(models.sort(pl.all()))
    assert set(models["source"]) == {"base", "rl"}


def test_torchrun_scores_the_same_table_as_one_process(single, tmp_path):
    out = tmp_path / "tokens.parquet"
    output = _finish(_divscope("score", TRAJECTORIES, *MODELS, "--out", out, torchrun=True))
    assert read_token_table(out).equals(single)
    assert output.count("JS quantiles") == 1  # rank 0 reports the whole table
    assert output.count(f"wrote {out}") == 1 and not list(tmp_path.glob(".*"))
    assert "scoring (share 1 of 2): 2" in output  # each rank's progress names its share


def test_shards_cover_every_trajectory_once(single, tmp_path):
    # As many threads as the reference's process: a sum over the vocabulary (js_full) is split
    # between the threads, so its last bit may depend on their number.
    with torch_threads(1):
        _score_in_shards(tmp_path / "tokens")
    assert read_token_table(tmp_path / "tokens").equals(single)


def _score_in_shards(out):
    for rank in (2, 0, 1):
        models = ModelPair(str(LAB / "base"), str(LAB / "rl"))
        output = PartedOutput(out, shard=f"{rank}/3", resume=True)
        summary = divscope.score(TRAJECTORIES, models, output, progress=False)
        assert (summary is None) == (rank != 1)  # the last shard to finish completes the table


def _kill_when(process, ready, timeout=120):
    """SIGKILL `process` as soon as `ready()` holds."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert process.poll() is None, process.communicate()[0]
        assert time.monotonic() < deadline
        time.sleep(0.005)
    process.send_signal(signal.SIGKILL)
    process.wait()


def _parts(directory):
    return len(list(directory.glob("part-*.parquet"))) if directory.exists() else 0


@pytest.mark.parametrize("parts_before_kill", [0, 1, pytest.param(9, marks=pytest.mark.slow)])
def test_a_killed_score_resumes_to_the_same_table(single, tmp_path, parts_before_kill):
    out = tmp_path / "tokens"
    process = _divscope("score", TRAJECTORIES, *MODELS, "--out", out)
    _kill_when(process, lambda: _parts(out) >= parts_before_kill)
    kept = _parts(out)
    output = _finish(_divscope("score", TRAJECTORIES, *MODELS, "--out", out, "--resume"))
    assert read_token_table(out).equals(single)
    if kept:
        assert "this process scored" in output


@pytest.mark.slow
def test_a_killed_torchrun_resumes_with_one_process(single, tmp_path):
    out = tmp_path / "tokens.parquet"
    parts = tmp_path / ".tokens.parquet.parts"
    process = _divscope("score", TRAJECTORIES, *MODELS, "--out", out, torchrun=True,
                        start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while _parts(parts) < 4:
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.005)
    os.killpg(process.pid, signal.SIGKILL)  # torchrun and both workers
    process.wait()
    _finish(_divscope("score", TRAJECTORIES, *MODELS, "--out", out, "--resume"))
    assert read_token_table(out).equals(single)


@pytest.mark.parametrize(
    "before,after,change",
    [
        ([], ["--top-p", "0.9"], "top_p: was 0.7, now 0.9"),
        (["--source", "base"], ["--source", "rl"], 'source: was "base", now "rl"'),
    ],
)
def test_a_resume_with_other_settings_is_refused(tmp_path, before, after, change):
    trajectories = tmp_path / "trajectories.jsonl"  # without `model`: --source names it
    read_table(TRAJECTORIES).drop("model").write_ndjson(trajectories)
    out = tmp_path / "tokens"
    process = _divscope("score", trajectories, *MODELS, "--out", out, *before)
    _kill_when(process, lambda: _parts(out) >= 1)
    result = _finish_failing(
        _divscope("score", trajectories, *MODELS, "--out", out, "--resume", *after)
    )
    assert f"an earlier run used other settings or inputs ({change}" in result


def _finish_failing(process):
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 2, output
    return " ".join(output.split())


PROMPTS = LAB / "prompts" / "eval.jsonl"


def _prompts(tmp_path, n=12):
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(PROMPTS.read_text().splitlines(keepends=True)[:n]))
    return path


def test_torchrun_cross_samples_and_generates_as_one_process(tmp_path):
    prompts = _prompts(tmp_path)
    common = ["-n", 2, "--max-new-tokens", 24, "--seed", 3]  # torchrun takes --n for its own
    xs = ["cross-sample", prompts, *MODELS, "--policy", "base,forward", "--eps", 0.05,
          "--budgets", "0,2", "--grader", "lab", *common]  # fmt: skip
    _finish(_divscope(*xs, "--out", tmp_path / "one.parquet"))
    output = _finish(_divscope(*xs, "--out", tmp_path / "two.parquet", torchrun=True))
    one = read_cross_sample(tmp_path / "one.parquet")
    assert read_cross_sample(tmp_path / "two.parquet").equals(one)
    assert one.height == 12 * 2 * 3 and output.count("accuracy [95% CI]") == 1
    gen = ["generate", prompts, "--model", LAB / "rl", *common]
    _finish(_divscope(*gen, "--out", tmp_path / "g1"))
    _finish(_divscope(*gen, "--out", tmp_path / "g2", torchrun=True))
    assert read_table(tmp_path / "g2").equals(read_table(tmp_path / "g1"))


def test_a_killed_cross_sample_resumes_to_the_same_results(tmp_path):
    prompts = _prompts(tmp_path, n=24)
    config = divscope.DecodeConfig(max_new_tokens=24, seed=1)
    lab = ModelPair(str(LAB / "base"), str(LAB / "rl"))
    kwargs = dict(config=config, grid=Grid(budgets=(1,), n=2, grader="lab"), part_rows=8,
                  progress=False)  # fmt: skip
    policies = [Base(), Forward(eps=0.05)]
    reference = pl.from_arrow(
        divscope.cross_sample(prompts, lab, policies, tmp_path / "ref.jsonl", **kwargs)
    )
    out = tmp_path / "xs"
    # `part_rows` is not a flag (the CLI's parts hold 64 responses): the killed run is a script.
    script = (
        "import divscope, sys\n"
        "from divscope.decoding.cross_sample import Grid\n"
        "from divscope.decoding.policies import Base, Forward\n"
        "from divscope.params import ModelPair, PartedOutput\n"
        f"divscope.cross_sample({str(prompts)!r}, ModelPair({str(LAB / 'base')!r}, "
        f"{str(LAB / 'rl')!r}), [Base(), Forward(eps=0.05)], PartedOutput({str(out)!r}, "
        "resume=True), divscope.DecodeConfig(max_new_tokens=24, seed=1), "
        "Grid(budgets=(1,), n=2, grader='lab'), part_rows=8, progress=False)\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True)
    _kill_when(process, lambda: _parts(out) >= 2)
    assert 2 <= _parts(out) < 12  # 6 chunks of 4 prompts x 2 settings
    resumed = PartedOutput(out, resume=True)
    results = pl.from_arrow(divscope.cross_sample(prompts, lab, policies, resumed, **kwargs))
    assert results.equals(reference)
    assert json.loads((out / MANIFEST).read_text())["parts"] == 12
    assert read_cross_sample(out).equals(reference)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_gpus_the_processes_score_as_one(tmp_path):
    """torchrun with NCCL on two GPUs (two `--shard`s one after the other with one GPU): the
    same table as one process, each unit scored with the same batches."""
    on_gpu = ["--device", "cuda", "--dtype", "float32"]
    _finish(_divscope("score", TRAJECTORIES, *MODELS, *on_gpu, "--out", tmp_path / "one"))
    two = tmp_path / "two"
    if torch.cuda.device_count() >= 2:
        _finish(_divscope("score", TRAJECTORIES, *MODELS, *on_gpu, "--out", two, torchrun=True))
    else:
        for shard in ("1/2", "0/2"):
            args = ["--shard", shard, "--resume"]
            _finish(_divscope("score", TRAJECTORIES, *MODELS, *on_gpu, "--out", two, *args))
    one, other = read_token_table(tmp_path / "one"), read_token_table(two)
    assert one.select(pl.exclude(pl.Float32)).equals(other.select(pl.exclude(pl.Float32)))
    for name in one.select(pl.col(pl.Float32)).columns:
        assert (one[name] - other[name]).abs().max() <= 1e-5, name
