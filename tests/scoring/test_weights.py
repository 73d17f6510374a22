"""σ, the weight-level relative gap ratio: hand-computed values, a float64 reference over real
(tiny and lab) checkpoints, sharded and sliced reading, and the errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from divscope.errors import DivscopeError
from divscope.scoring.weights import WeightGap, part_name, weights
from tests.tinymodels import make_model

LAB = Path(__file__).parents[2] / "fixtures" / "lab"


def _save(directory: Path, tensors: dict[str, torch.Tensor]) -> Path:
    directory.mkdir(parents=True)
    save_file(
        {name: t.contiguous() for name, t in tensors.items()}, directory / "model.safetensors"
    )
    return directory


def _save_sharded(directory: Path, tensors: dict[str, torch.Tensor], shards: int) -> Path:
    """`tensors` over `shards` files (round robin by sorted name) and their index."""
    directory.mkdir(parents=True)
    names = sorted(tensors)
    weight_map = {}
    for shard in range(shards):
        file = f"model-{shard + 1:05d}-of-{shards:05d}.safetensors"
        part = {name: tensors[name].contiguous() for name in names[shard::shards]}
        save_file(part, directory / file)
        weight_map.update(dict.fromkeys(part, file))
    index = {"metadata": {}, "weight_map": weight_map}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index))
    return directory


def _reference(base: dict[str, torch.Tensor], tuned: dict[str, torch.Tensor]) -> dict[str, float]:
    """σ per part and in total, the obvious way: whole tensors in float64."""
    parts: dict[str, list[str]] = {}
    for name in base:
        parts.setdefault(part_name(name), []).append(name)
    parts["total"] = list(base)

    def norm(tensors) -> float:
        return math.sqrt(sum(float((t.double() ** 2).sum()) for t in tensors))

    return {
        part: norm(tuned[n].double() - base[n].double() for n in names)
        / norm(base[n] for n in names)
        for part, names in parts.items()
    }


def _sigmas(gap: WeightGap, label: str) -> dict[str, float]:
    return {part.name: part.sigma(label) for part in (*gap.rows, gap.total)}


# Base: the embedding row [3, 4] (norm 5); layer 0: ones(2, 2) and a norm weight [2] (squares
# 4 + 4 = 8). Tuned: the same embedding; layer 0 with +1 at one entry of each (squares 1 + 1).
HAND_BASE = {
    "model.embed_tokens.weight": [[3.0, 4.0]],
    "model.layers.0.mlp.weight": [[1.0, 1.0], [1.0, 1.0]],
    "model.layers.0.norm.weight": [2.0],
}
HAND_TUNED = {
    "model.embed_tokens.weight": [[3.0, 4.0]],
    "model.layers.0.mlp.weight": [[2.0, 1.0], [1.0, 1.0]],
    "model.layers.0.norm.weight": [3.0],
}
HAND_SIGMA = {
    "model.embed_tokens": 0.0,
    "model.layers.0": math.sqrt(2) / math.sqrt(8),  # 0.5
    "total": math.sqrt(2) / math.sqrt(25 + 8),
}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
def test_sigma_matches_the_hand_computed_value(tmp_path, dtype):
    # rel 1e-15: accumulated in float32 the ratio would be off by ~1e-8.
    base = _save(tmp_path / "base", {k: torch.tensor(v, dtype=dtype) for k, v in HAND_BASE.items()})
    tuned = _save(tmp_path / "rl", {k: torch.tensor(v, dtype=dtype) for k, v in HAND_TUNED.items()})
    # Twice: the second tuned model is compared with the same base slices as the first.
    gap = weights(base, [tuned, tuned], labels=["rl", "again"], progress=False)
    assert _sigmas(gap, "rl") == pytest.approx(HAND_SIGMA, rel=1e-15)
    assert _sigmas(gap, "again") == _sigmas(gap, "rl")
    assert [part.name for part in gap.rows] == ["model.embed_tokens", "model.layers.0"]
    assert [part.n_params for part in gap.rows] == [2, 5]
    assert gap.total.n_params == 7
    assert gap.total.base_norm == pytest.approx(math.sqrt(33), rel=1e-15)
    assert gap.total.diff_norms["rl"] == pytest.approx(math.sqrt(2), rel=1e-15)


def test_a_tiny_model_against_the_float64_reference(tmp_path):
    base_model, tuned_model = make_model("llama", seed=0), make_model("llama", seed=1)
    with torch.no_grad():  # a tuned twin: the base plus a small update
        for mine, theirs in zip(tuned_model.parameters(), base_model.parameters(), strict=True):
            mine.copy_(theirs + 0.01 * mine)
    base_model.save_pretrained(tmp_path / "base")
    tuned_model.save_pretrained(tmp_path / "rl")
    gap = weights(tmp_path / "base", [tmp_path / "rl"], progress=False)
    base, tuned = base_model.state_dict(), tuned_model.state_dict()
    assert _sigmas(gap, "rl") == pytest.approx(_reference(base, tuned), rel=1e-12)
    assert [part.name for part in gap.rows] == [
        "model.embed_tokens", "model.layers.0", "model.layers.1", "model.norm", "lm_head",
    ]  # fmt: skip
    assert gap.total.n_params == sum(p.numel() for p in base_model.parameters())


def test_lab_sigma_of_rl_and_sft(tmp_path):
    """The lab's σ (README, "divscope weights"): RL moved its weights about a tenth as far as
    SFT, in total and in every part, as the paper reports for Qwen2.5-32B."""
    gap = weights(
        LAB / "base", [LAB / "rl", LAB / "sft"], out=tmp_path / "sigma.json", progress=False
    )
    from safetensors.torch import load_file

    base = load_file(LAB / "base" / "model.safetensors")
    for label in ("rl", "sft"):
        tuned = load_file(LAB / label / "model.safetensors")
        assert _sigmas(gap, label) == pytest.approx(_reference(base, tuned), rel=1e-12)
    assert gap.total.sigma("rl") == pytest.approx(0.02358, abs=5e-6)
    assert gap.total.sigma("sft") == pytest.approx(0.2481, abs=5e-5)
    assert all(part.sigma("rl") < part.sigma("sft") for part in gap.rows)
    assert json.loads((tmp_path / "sigma.json").read_text()) == gap.to_dict()


def test_slices_and_shards_give_the_same_sigma(tmp_path):
    generator = torch.Generator().manual_seed(0)
    shapes = {
        "model.embed_tokens.weight": (37, 5),
        "model.layers.0.attn.weight": (11, 3, 2),
        "model.layers.0.attn.bias": (11,),
        "model.layers.10.mlp.weight": (4, 9),
        "model.layers.2.mlp.weight": (4, 9),
        "model.scale": (),
        "lm_head.weight": (37, 5),
    }
    base = {name: torch.randn(shape, generator=generator) for name, shape in shapes.items()}
    tuned = {name: t + 0.1 * torch.randn(t.shape, generator=generator) for name, t in base.items()}
    one = weights(_save(tmp_path / "b", base), [_save(tmp_path / "t", tuned)], progress=False)
    sharded = weights(
        _save_sharded(tmp_path / "b3", base, 3),
        [_save_sharded(tmp_path / "t2", tuned, 2) / "model.safetensors.index.json"],
        labels=["t"],
        chunk_elements=4,  # slices of 1 row (rows wider than 4) up to 4 rows (the biases)
        progress=False,
    )
    assert _sigmas(one, "t") == pytest.approx(_reference(base, tuned), rel=1e-12)
    assert _sigmas(sharded, "t") == pytest.approx(_sigmas(one, "t"), rel=1e-12)
    # A tensor directly on `model` counts in the module `model`.
    assert [part.name for part in one.rows] == [
        "model.embed_tokens", "model.layers.0", "model.layers.2", "model.layers.10",
        "model", "lm_head",
    ]  # fmt: skip
    assert [part.n_params for part in sharded.rows] == [185, 77, 36, 36, 1, 185]


def test_several_tuned_models_labels_and_text(tmp_path):
    base = _save(tmp_path / "base", {k: torch.tensor(v) for k, v in HAND_BASE.items()})
    rl = _save(tmp_path / "rl", {k: torch.tensor(v) for k, v in HAND_TUNED.items()})
    gap = weights(base, [rl, base], labels=["RL"], progress=False)
    assert list(gap.tuned) == ["RL", "base"]
    assert gap.total.sigma("base") == 0.0
    lines = gap.to_text().splitlines()
    assert lines[1].split() == ["part", "parameters", "RL", "base"]
    assert lines[-1].split() == ["total", "7", f"{HAND_SIGMA['total']:#.4g}", "0.000"]
    assert lines[-2].split() == ["model.layers.0", "5", "0.5000", "0.000"]


def test_a_part_with_zero_base_weights_has_no_sigma(tmp_path):
    base = _save(tmp_path / "base", {"a.weight": torch.ones(2), "b.bias": torch.zeros(2)})
    tuned = _save(tmp_path / "rl", {"a.weight": torch.ones(2), "b.bias": torch.ones(2)})
    gap = weights(base, [tuned], progress=False)
    assert math.isnan(gap.rows[1].sigma("rl"))
    assert gap.to_dict()["rows"][1]["sigma"] == {"rl": None}
    assert gap.total.sigma("rl") == pytest.approx(1.0)


@pytest.mark.parametrize(
    "tuned,message",
    [
        ({"a.weight": torch.ones(2)}, r"'b\.weight' is in .*base but not in .*rl"),
        (
            {"a.weight": torch.ones(2), "b.weight": torch.ones(2), "c.weight": torch.ones(1)},
            r"'c\.weight' is in .*rl but not in .*base",
        ),
        (
            {"a.weight": torch.ones(2), "b.weight": torch.ones(3)},
            r"'b\.weight' has shape \[2\] in .*base but \[3\] in .*rl",
        ),
    ],
)
def test_tensors_that_differ_are_named(tmp_path, tuned, message):
    base = _save(tmp_path / "base", {"a.weight": torch.ones(2), "b.weight": torch.ones(2)})
    with pytest.raises(DivscopeError, match=message):
        weights(base, [_save(tmp_path / "rl", tuned)], progress=False)


def test_checkpoints_that_cannot_be_read(tmp_path):
    base = _save(tmp_path / "base", {"a.weight": torch.ones(2)})
    with pytest.raises(DivscopeError, match="no such file or directory"):
        weights(base, [tmp_path / "missing"], progress=False)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "pytorch_model.bin").write_bytes(b"")
    with pytest.raises(DivscopeError, match="no model.safetensors or model.safetensors.index"):
        weights(base, [tmp_path / "bin"], progress=False)
    sharded = _save_sharded(tmp_path / "sharded", {"a.weight": torch.ones(2)}, 1)
    (sharded / "model-00001-of-00001.safetensors").unlink()
    with pytest.raises(DivscopeError, match="names the shard model-00001-of-00001.safetensors"):
        weights(base, [sharded], progress=False)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(DivscopeError, match="not a readable safetensors file"):
        weights(base, [tmp_path / "broken"], progress=False)
    (tmp_path / "index").mkdir()
    (tmp_path / "index" / "model.safetensors.index.json").write_text("[]")
    with pytest.raises(DivscopeError, match="not a safetensors index"):
        weights(base, [tmp_path / "index"], progress=False)


@pytest.mark.parametrize(
    "tuned,labels,message",
    [
        ([], None, "at least one tuned model"),
        (["x/rl"], ["a", "b"], "--label given 2 times but only 1 tuned models"),
        (["x/rl", "y/rl"], None, "two tuned models are labelled 'rl'"),
    ],
)
def test_labels_are_checked_before_reading(tmp_path, tuned, labels, message):
    with pytest.raises(DivscopeError, match=message):
        weights(tmp_path / "nowhere", tuned, labels=labels, progress=False)


def test_an_existing_json_is_refused_before_reading(tmp_path):
    (tmp_path / "sigma.json").write_text("{}")
    with pytest.raises(DivscopeError, match="exists"):
        weights(tmp_path / "nowhere", ["rl"], out=tmp_path / "sigma.json", progress=False)
