"""Placing the models of a run, on the CPU: each model on its own device (`--base-device`,
`--rl-device`), the output head computed on the statistics device, the errors of a bad device,
of own devices combined with a device map, of `--device-map` without accelerate, and of a device
map that offloads weights. tests/test_gpu_placement.py runs the same on GPUs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import divscope
from divscope.errors import DivscopeError
from divscope.io import read_metadata, read_token_table, read_trajectories, write_table
from divscope.models.head import OutputHead
from divscope.models.loading import check_not_offloaded, load_model, load_models
from divscope.params import ModelPair, Placement
from tests.tinymodels import make_model

LAB = Path(__file__).resolve().parents[1] / "fixtures" / "lab"


def test_own_cpu_devices_score_exactly_as_the_plain_run(tmp_path):
    trajectories = tmp_path / "trajectories.parquet"
    write_table(read_trajectories(LAB / "trajectories.jsonl").head(4), trajectories)
    models = ModelPair(str(LAB / "base"), str(LAB / "rl"))
    own = ModelPair(models.base, models.rl, Placement(base_device="cpu", rl_device="cpu"))
    divscope.score(trajectories, models, tmp_path / "plain.parquet", progress=False)
    divscope.score(trajectories, own, tmp_path / "own.parquet", progress=False)
    plain = read_token_table(tmp_path / "plain.parquet")
    assert read_token_table(tmp_path / "own.parquet").equals(plain)
    assert read_metadata(tmp_path / "own.parquet")["device"] == "auto, base=cpu, rl=cpu"
    assert read_metadata(tmp_path / "plain.parquet")["device"] == "auto"


def test_an_output_head_placed_on_its_own_device_is_the_same_head():
    model = make_model("llama", vocab_size=48, logit_scale=30.0)
    hidden = torch.randn(5, 32, generator=torch.Generator().manual_seed(0))
    placed = OutputHead(model, 44, device="cpu")
    assert placed.device == torch.device("cpu")
    assert placed.weight.data_ptr() == model.get_output_embeddings().weight.data_ptr()  # no copy
    assert torch.equal(placed(hidden), OutputHead(model, 44)(hidden))
    half = model.to(torch.bfloat16)
    wide = OutputHead(half, 44, "float32", device=torch.device("cpu"))
    assert wide.weight.dtype == torch.float32
    assert torch.equal(wide(hidden), OutputHead(half, 44, "float32")(hidden))


@pytest.fixture
def two_gpus(monkeypatch):
    """A machine that says it has two CUDA devices (nothing is placed on them)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)


PATHS = {"base": str(LAB / "base"), "rl": str(LAB / "rl")}


@pytest.mark.parametrize(
    "devices,message",
    [
        ({"rl": "cuda:2"}, r"--rl-device cuda:2: there are 2 CUDA device\(s\) \(cuda:0, cuda:1\)"),
        ({"base": "cuda:x"}, r"--base-device cuda:x: there are 2 CUDA device\(s\)"),
        ({"base": "gpu"}, r"--base-device 'gpu': use auto, cpu, cuda or cuda:N"),
    ],
)
def test_an_unknown_device_names_its_flag(two_gpus, devices, message):
    with pytest.raises(DivscopeError, match=message):
        load_models(PATHS, dtype="auto", device="cpu", device_map=None, devices=devices)


def test_a_cuda_device_without_cuda_names_its_flag(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(DivscopeError, match=r"^--rl-device cuda:1: no CUDA device is available; "
                       r"use --rl-device cpu\.$"):  # fmt: skip
        load_models(PATHS, dtype="auto", device="cpu", device_map=None, devices={"rl": "cuda:1"})


def test_own_devices_and_a_device_map_are_refused_together():
    with pytest.raises(DivscopeError, match=r"^--base-device cpu, --rl-device cpu cannot be "
                       r"combined with --device-map auto: "):  # fmt: skip
        load_models(PATHS, dtype="auto", device="auto", device_map="auto",
                    devices={"base": "cpu", "rl": "cpu"})  # fmt: skip


def test_a_gpu_model_loads_straight_onto_its_device_where_accelerate_is(monkeypatch):
    from divscope.models.loading import loading_map

    assert loading_map("cuda:1", None) == {"": "cuda:1"}  # accelerate: tests' extra
    assert loading_map("cpu", None) is None  # the CPU's loading is unchanged
    assert loading_map("cuda:0", "auto") == "auto"
    monkeypatch.setitem(sys.modules, "accelerate", None)  # `import accelerate` fails
    assert loading_map("cuda:1", None) is None  # into host memory, then moved


def test_a_one_device_map_loads_the_same_weights_bit_for_bit():
    """The loading a GPU gets (`{"": device}`), here onto the CPU: every parameter and buffer
    there, equal to the plain CPU load's."""
    plain = load_model(PATHS["base"], dtype="float32", device="cpu")
    straight = load_model(PATHS["base"], dtype="float32", device_map={"": "cpu"})
    want, got = plain.state_dict(), straight.state_dict()
    assert got.keys() == want.keys()
    assert all(torch.equal(got[k], want[k]) and got[k].device.type == "cpu" for k in want)
    for (name, buffer), (_, wanted) in zip(
        straight.named_buffers(), plain.named_buffers(), strict=True
    ):
        assert torch.equal(buffer, wanted), name  # the rotary frequencies too
    ids = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():
        assert torch.equal(straight(ids).logits, plain(ids).logits)


def test_a_device_map_without_accelerate_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "accelerate", None)  # `import accelerate` fails
    with pytest.raises(DivscopeError, match=r"^--device-map needs accelerate: pip install "
                       r"'divscope\[big\]'\.$"):  # fmt: skip
        load_model(PATHS["base"], device_map={"": "cpu"})


def test_a_device_map_that_offloads_weights_is_refused(tmp_path):
    from transformers import AutoModelForCausalLM

    make_model("llama", vocab_size=48).save_pretrained(tmp_path / "model")
    modules = {f"model.layers.{i}": "cpu" for i in range(2)}
    modules |= {"model.embed_tokens": "disk", "model.norm": "cpu", "model.rotary_emb": "cpu"}
    offloaded = AutoModelForCausalLM.from_pretrained(
        tmp_path / "model", device_map={**modules, "lm_head": "disk"},
        offload_folder=tmp_path / "offload",
    )  # fmt: skip
    with pytest.raises(DivscopeError) as error:
        check_not_offloaded(offloaded, "org/big-model")
    assert str(error.value) == (
        "model 'org/big-model': the device map offloaded model.embed_tokens, lm_head to the CPU "
        "or disk (the model does not fit on the GPUs); divscope needs every weight on a device. "
        "Use more or larger GPUs, a smaller --dtype, or --base-device/--rl-device on separate "
        "GPUs."
    )
    placed = load_model(str(tmp_path / "model"), device_map={"model": "cpu", "lm_head": "cpu"})
    check_not_offloaded(placed, "org/big-model")  # on devices, split or not: accepted
