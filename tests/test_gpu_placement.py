"""Each model on its own GPU (`--base-device cuda:0 --rl-device cuda:1`): `score` and
`cross-sample` equal the run with both models on cuda:0, the statistics being computed on the
base model's device from a copy of the RL model's output head. With one GPU both models go to
cuda:0 through the same flags (the test id says which ran).

float32 lab models: the same kernels on the same kind of GPU give the same values, so the
decoded responses must be identical; the token table's floats must agree within 1e-5 and its
discrete columns on all but 1% of the rows (a near-tie may break the other way).

Lean: pyarrow and numpy only (no polars), so that `pytest -m gpu` runs on a GPU image that has
only what `score` and `cross-sample` need (docs/gpu.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import torch

import divscope
from divscope.params import ModelPair, Placement
from divscope.prompts import read_prompts_arrow
from divscope.tables import read_arrow, read_trajectories_arrow
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
    pq.write_table(read_trajectories_arrow(LAB / "trajectories.jsonl").slice(0, 24), trajectories)
    one = ModelPair(**MODELS, placement=Placement(dtype="float32", device="cuda:0"))
    placed = Placement("float32", "cuda:0", base_device=base_device, rl_device=rl_device)
    own = ModelPair(**MODELS, placement=placed)
    divscope.score(trajectories, one, tmp_path / "one.parquet", progress=False)
    divscope.score(trajectories, own, tmp_path / "own.parquet", progress=False)
    want = read_arrow(tmp_path / "one.parquet")
    got = read_arrow(tmp_path / "own.parquet")
    key = ["prompt_id", "sample_id", "position", "token_id"]
    assert got.select(key).equals(want.select(key))
    for name in FLOAT_COLUMNS:
        assert np.allclose(got[name].to_numpy(), want[name].to_numpy(), atol=1e-5, rtol=0), name
    for name in DISCRETE_COLUMNS:
        assert (got[name].to_numpy() != want[name].to_numpy()).mean() <= 0.01, name
    metadata = json.loads(pq.read_schema(tmp_path / "own.parquet").metadata[b"divscope"])
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
    pq.write_table(read_prompts_arrow(LAB / "prompts" / "eval.jsonl").slice(0, 8), prompts)
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
    forward = got.filter(pc.equal(got["policy"], "forward"))
    assert pc.sum(forward["n_switches"]).as_py() > 0


@PLACED
def test_models_on_their_own_gpus_are_scored_at_once(base_device, rl_device):
    """`--base-device cuda:0 --rl-device cuda:1` makes the scoring engine run both forwards at
    once (`on_separate_gpus`; the table is the same, tested above); one GPU keeps them in turn."""
    from divscope.models.loading import load_model
    from divscope.models.placement import on_separate_gpus

    base = load_model(MODELS["base"], dtype="float32", device=base_device)
    rl = load_model(MODELS["rl"], dtype="float32", device=rl_device)
    assert on_separate_gpus(base, rl) == TWO_GPUS
    assert not on_separate_gpus(base, load_model(MODELS["rl"], dtype="float32", device="cpu"))


def _anonymous_bytes() -> int:
    """This process's resident anonymous memory (not the page cache of mapped files)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    pytest.skip("no RssAnon in /proc/self/status")


def test_a_model_loads_straight_onto_its_gpu(tmp_path):
    """No host copy: a float32 checkpoint loaded in bfloat16 onto cuda:0 leaves it on the GPU,
    bit for bit the CPU load's weights moved there, and the host's anonymous memory grows by
    less than half of its bfloat16 weights at any moment (the same load onto the CPU grows it by
    all of them: 549 MiB for these 548 MiB, measured). The lab loads bit for bit too."""
    import threading
    import time

    pytest.importorskip("accelerate")  # without it a GPU load goes through host memory
    from transformers import AutoModelForCausalLM, LlamaConfig

    from divscope.models.loading import load_model

    lab = load_model(MODELS["base"], dtype="float32", device="cuda:0")
    cpu = load_model(MODELS["base"], dtype="float32", device="cpu").state_dict()
    for name, value in lab.state_dict().items():
        assert value.device == torch.device("cuda:0") and torch.equal(value.cpu(), cpu[name])
    config = LlamaConfig(vocab_size=8192, hidden_size=1024, intermediate_size=2816,
                         num_hidden_layers=24, num_attention_heads=8, num_key_value_heads=2,
                         tie_word_embeddings=False)  # fmt: skip
    AutoModelForCausalLM.from_config(config, dtype=torch.float32).save_pretrained(tmp_path)
    torch.zeros(1, device="cuda:0")  # the CUDA context's own host memory comes first
    start = peak = _anonymous_bytes()
    loading = threading.Event()

    def sample() -> None:
        nonlocal peak
        while loading.is_set():
            peak = max(peak, _anonymous_bytes())
            time.sleep(0.002)

    loading.set()
    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        model = load_model(str(tmp_path), dtype="bfloat16", device="cuda:0")
    finally:
        loading.clear()
        sampler.join()
    weights = sum(p.numel() * p.element_size() for p in model.parameters())  # 548 MiB
    assert {p.device for p in model.parameters()} == {torch.device("cuda:0")}
    assert peak - start < weights / 2, (peak - start, weights)
