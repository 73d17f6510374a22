"""Each model on its own GPU (`--base-device cuda:0 --rl-device cuda:1`): `score` and
`cross-sample` equal the run with both models on cuda:0, the statistics being computed on the
base model's device from a copy of the RL model's output head. With one GPU both models go to
cuda:0 through the same flags (the test id says which ran).

float32 lab models: the same kernels on the same kind of GPU give the same values, so the
decoded responses must be identical; the token table's floats must agree within 1e-5 and its
discrete columns on all but 1% of the rows (a near-tie may break the other way).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import divscope
from divscope.io import (
    read_metadata,
    read_token_table,
    read_trajectories,
    write_table,
)
from divscope.params import ModelPair, Placement
from divscope.prompts import read_prompts
from tests.scoring.reference import DISCRETE_COLUMNS, FLOAT_COLUMNS

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

LAB = Path(__file__).resolve().parents[1] / "fixtures" / "lab"
MODELS = {"base": str(LAB / "base"), "rl": str(LAB / "rl")}
TWO_GPUS = torch.cuda.is_available() and torch.cuda.device_count() > 1
PLACEMENT = ("cuda:0", "cuda:1") if TWO_GPUS else ("cuda:0", "cuda:0")
PLACED = pytest.mark.parametrize(
    "base_device,rl_device", [PLACEMENT], ids=[f"base-{PLACEMENT[0]}-rl-{PLACEMENT[1]}"]
)


@PLACED
def test_score_with_each_model_on_its_own_gpu_equals_one_gpu(tmp_path, base_device, rl_device):
    trajectories = tmp_path / "trajectories.parquet"
    write_table(read_trajectories(LAB / "trajectories.jsonl").head(24), trajectories)
    one = ModelPair(**MODELS, placement=Placement(dtype="float32", device="cuda:0"))
    placed = Placement("float32", "cuda:0", base_device=base_device, rl_device=rl_device)
    own = ModelPair(**MODELS, placement=placed)
    divscope.score(trajectories, one, tmp_path / "one.parquet", progress=False)
    divscope.score(trajectories, own, tmp_path / "own.parquet", progress=False)
    want = read_token_table(tmp_path / "one.parquet")
    got = read_token_table(tmp_path / "own.parquet")
    assert got.select("prompt_id", "sample_id", "position", "token_id").equals(
        want.select("prompt_id", "sample_id", "position", "token_id")
    )
    for name in FLOAT_COLUMNS:
        assert np.allclose(got[name], want[name], atol=1e-5, rtol=0), name
    for name in DISCRETE_COLUMNS:
        assert (got[name] != want[name]).mean() <= 0.01, name
    metadata = read_metadata(tmp_path / "own.parquet")
    assert metadata["device"] == f"cuda:0, base={base_device}, rl={rl_device}"
    assert metadata["models"]["rl"]["device"] == rl_device


@PLACED
def test_cross_sample_with_each_model_on_its_own_gpu_equals_one_gpu(
    tmp_path, base_device, rl_device
):
    from divscope.decoding import DecodeConfig
    from divscope.decoding.cross_sample import Grid
    from divscope.decoding.policies import RL, Base, Forward
    from divscope.scoring import StatsConfig

    prompts = tmp_path / "prompts.parquet"
    write_table(read_prompts(LAB / "prompts" / "eval.jsonl").head(8), prompts)
    common = {
        "policies": [Base(), RL(), Forward(eps=0.05)],
        "config": DecodeConfig(StatsConfig(top_p=0.7), max_new_tokens=48, batch_size=8),
        "grid": Grid(budgets=(2, -1), n=2),
        "progress": False,
    }
    one = Placement(dtype="float32", device="cuda:0")
    own = Placement(dtype="float32", device="cuda:0", base_device=base_device,
                    rl_device=rl_device)  # fmt: skip
    want = divscope.cross_sample(prompts, ModelPair(**MODELS, placement=one),
                                 out=tmp_path / "one.parquet", **common)  # fmt: skip
    got = divscope.cross_sample(prompts, ModelPair(**MODELS, placement=own),
                                out=tmp_path / "own.parquet", **common)  # fmt: skip
    columns = ["policy", "budget", "prompt_id", "sample_id", "response_ids", "switch_positions"]
    assert got.select(columns).equals(want.select(columns))
    assert got.filter(got["policy"] == "forward")["n_switches"].sum() > 0
