"""The scoring engine on CUDA: bfloat16 against the float64 reference, and a split device map.

bfloat16 keeps 8 significant bits, so the logits of a bf16 model differ from its float32
checkpoint's by up to about 0.03 nats on these tiny models (logit scale 12), and every statistic
moves with them. The bf16 table is compared with the float64 reference of the float32 model
(tests/scoring/reference.py) under tolerances about 4x the largest deviation measured with bf16
weights on the CPU (the same rounding; the CUDA kernels add their own few ulps):

- `logp_*`, `entropy_*`, `ce_base_rl`: 0.1 nats (measured 0.03);
- `kl_*`: 0.05 nats (0.012); `js_full`: 0.01 (0.002); top-p `js`: 0.05 (0.014: a token at
  the nucleus boundary may fall on either side);
- `p_top1_*`, `p_base_of_rl_top1`: 0.03 (0.007);
- `nucleus_*`: within 2 tokens (1).

Discrete columns (top-1, ranks, overlaps) are compared exactly where the reference order is
not a near-tie at bf16 resolution: two tokens whose float64 logits are closer than 0.15 nats
(`BF16_TIE`, 2.5x the largest difference of two bf16 logit errors) may swap, the reference's
own 1e-6 threshold being meant for float32. At least 40% of the rows must be compared. The same
tolerances hold with the output head in float32 (`head_dtype="float32"`).
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING

import numpy as np
import pytest
import torch

from divscope.schema import OVERLAP_KS
from divscope.scoring import ScoreConfig, StatsConfig, score_table
from tests.scoring.reference import DISCRETE_COLUMNS, FLOAT_COLUMNS, reference_row, rl_twin
from tests.tinymodels import make_model, make_tokenizer

if TYPE_CHECKING:
    import polars as pl

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

VOCAB = 301  # tokenizer size
HEAD_ROWS = 320  # padded output head
CONTEXT = 256
BF16_TIE = 0.15  # nats: float64 logits closer than this may be ordered either way in bf16
BF16_TOLERANCE = {
    **dict.fromkeys(("logp_base", "logp_rl", "entropy_base", "entropy_rl", "ce_base_rl"), 0.1),
    **dict.fromkeys(("kl_base_rl", "kl_rl_base", "js"), 0.05),
    "js_full": 0.01,
    **dict.fromkeys(("p_top1_base", "p_top1_rl", "p_base_of_rl_top1"), 0.03),
}
NUCLEUS_TOLERANCE = 2  # tokens


@pytest.fixture(autouse=True)
def _polars():
    """These checks compare polars tables: on a GPU image without polars they are skipped (the
    module still collects; docs/gpu.md)."""
    pytest.importorskip("polars", reason="tests/scoring/test_gpu.py compares polars tables")


@pytest.fixture(scope="module")
def tokenizer():
    return make_tokenizer([f"t{i}" for i in range(VOCAB)], specials=False)


@pytest.fixture(scope="module", params=["qwen2", "llama"])
def pair(request):
    """A float32 base/rl pair on the CPU (the reference's models)."""
    base = make_model(request.param, HEAD_ROWS, seed=0, max_positions=CONTEXT, logit_scale=12.0)
    return base, rl_twin(base, seed=1)


def _trajectories(n: int, seed: int) -> pl.DataFrame:
    import polars as pl

    g = torch.Generator().manual_seed(seed)

    def ids(lo: int, hi: int) -> list[int]:
        length = int(torch.randint(lo, hi + 1, (1,), generator=g))
        return torch.randint(0, VOCAB, (length,), generator=g).tolist()

    return pl.DataFrame(
        {
            "prompt_id": [f"p{i:02d}" for i in range(n)],
            "sample_id": [0] * n,
            "prompt_ids": [ids(1, 16) for _ in range(n)],
            "response_ids": [ids(8, 48) for _ in range(n)],
        }
    )


def _score(
    trajectories, base, rl, tokenizer, top_p=0.7, temperature=1.0, head_dtype=None
) -> pl.DataFrame:
    stats = StatsConfig(top_p=top_p, temperature=temperature)
    config = ScoreConfig(stats, batch_tokens=256, head_dtype=head_dtype)
    table = score_table(trajectories, base, rl, tokenizer, config, progress=False)
    return table.sort("prompt_id", "sample_id", "position")


def _logits(model, prompt: list[int], response: list[int]) -> torch.Tensor:
    """The model's own unbatched forward on its device: row t predicts response token t."""
    device = model.get_input_embeddings().weight.device
    with torch.no_grad():
        logits = model(torch.tensor([prompt + response], device=device)).logits[0, :, :VOCAB]
    return logits[len(prompt) - 1 : len(prompt) - 1 + len(response)].double().cpu()


def _bf16_ties(logits_base, logits_rl, top_p: float, temperature: float) -> dict[str, bool]:
    """Per discrete column, whether bf16 rounding may change the float64 answer: some order
    it depends on compares two logits closer than `BF16_TIE`."""
    lb, lr = logits_base.numpy(), logits_rl.numpy()
    ob, orl = np.argsort(-lb, kind="stable"), np.argsort(-lr, kind="stable")

    def close(logits, u, v) -> bool:
        return abs(logits[u] - logits[v]) < BF16_TIE

    tie = {"top1_base": close(lb, ob[0], ob[1]), "top1_rl": close(lr, orl[0], orl[1])}
    tie["p_base_of_rl_top1"] = tie["top1_rl"]
    for k in (1, 2, 3):
        v = orl[k - 1]
        rl_order = any(close(lr, orl[i], orl[i + 1]) for i in range(max(0, k - 2), k))
        base_rank = bool(np.any(np.abs(np.delete(lb, v) - lb[v]) < BF16_TIE))
        tie[f"rl_top{k}_rank_in_base"] = rl_order or base_rank
    for k in OVERLAP_KS:
        n = min(k, VOCAB)
        tie[f"overlap_{k}"] = n < VOCAB and (
            close(lb, ob[n - 1], ob[n]) or close(lr, orl[n - 1], orl[n])
        )
    return tie


def _compare_bf16(table, trajectories, base, rl, top_p, temperature) -> dict[str, int]:
    """Assert every row within the bf16 tolerances; discrete columns compared per column."""
    compared = dict.fromkeys(DISCRETE_COLUMNS, 0)
    rows = iter(table.to_dicts())
    for traj in trajectories.sort("prompt_id", "sample_id").iter_rows(named=True):
        logits_b = _logits(base, traj["prompt_ids"], traj["response_ids"])
        logits_r = _logits(rl, traj["prompt_ids"], traj["response_ids"])
        for t, token in enumerate(traj["response_ids"]):
            row, where = next(rows), f"{traj['prompt_id']}@{t}"
            assert (row["prompt_id"], row["position"]) == (traj["prompt_id"], t)
            want, _ = reference_row(logits_b[t], logits_r[t], token, top_p, temperature)
            tie = _bf16_ties(logits_b[t], logits_r[t], top_p, temperature)
            for name in FLOAT_COLUMNS:
                if tie.get(name, False):
                    continue
                assert abs(row[name] - want[name]) <= BF16_TOLERANCE[name], (
                    f"{where} {name}: {row[name]} vs reference {want[name]}"
                )
            for name in ("nucleus_base", "nucleus_rl"):
                assert abs(row[name] - want[name]) <= NUCLEUS_TOLERANCE, (where, name)
            for name in DISCRETE_COLUMNS:
                if name.startswith("nucleus") or tie[name]:
                    continue
                assert abs(row[name] - want[name]) < 1e-6, (
                    f"{where} {name}: {row[name]} vs reference {want[name]}"
                )
                compared[name] += 1
    return compared


@pytest.mark.parametrize("head_dtype", [None, "float32"])
@pytest.mark.parametrize("top_p,temperature", [(0.7, 1.0), (0.9, 0.7)])
def test_cuda_bfloat16_scoring_matches_the_float64_reference(
    pair, tokenizer, top_p, temperature, head_dtype
):
    base, rl = pair
    on_cuda = [copy.deepcopy(m).to("cuda", torch.bfloat16) for m in (base, rl)]
    trajectories = _trajectories(12, seed=0)
    table = _score(trajectories, *on_cuda, tokenizer, top_p, temperature, head_dtype)
    assert table.height == trajectories["response_ids"].list.len().sum()
    compared = _compare_bf16(table, trajectories, base, rl, top_p, temperature)
    for name in ("top1_base", "top1_rl", "overlap_1"):
        assert compared[name] >= 0.4 * table.height, (name, compared[name], table.height)


def test_an_output_head_on_another_device_scores_the_same(tmp_path, tokenizer):
    """`device_map` puts the decoder on cuda:0 and the output head on cuda:1, in
    float32: the split run equals the single-device one within 1e-4, and a discrete value may
    differ only at a reference near-tie."""
    pytest.importorskip("accelerate")  # transformers needs it for any device_map
    from divscope.models.loading import load_model

    base = make_model("llama", HEAD_ROWS, seed=0, max_positions=CONTEXT, logit_scale=12.0)
    cpu = {"base": base, "rl": rl_twin(base, seed=1)}
    for name, model in cpu.items():
        model.save_pretrained(tmp_path / name)
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs: a head on the CPU would be offloaded (refused)")
    head = "cuda:1"
    split_map = {"model": "cuda:0", "lm_head": head}
    single = [load_model(str(tmp_path / n), dtype="float32", device="cuda:0") for n in cpu]
    split = [load_model(str(tmp_path / n), dtype="float32", device_map=split_map) for n in cpu]
    assert split[0].get_output_embeddings().weight.device == torch.device(head)
    trajectories = _trajectories(10, seed=1)
    want = _score(trajectories, *single, tokenizer)
    got = _score(trajectories, *split, tokenizer)
    assert got["token_id"].to_list() == want["token_id"].to_list()
    for name in FLOAT_COLUMNS:
        assert np.allclose(got[name], want[name], atol=1e-4, rtol=0), name
    import polars as pl

    differ = pl.any_horizontal(pl.col(c) != want[c] for c in DISCRETE_COLUMNS)
    for row in got.with_row_index().filter(differ).iter_rows(named=True):
        traj = trajectories.filter(pl.col("prompt_id") == row["prompt_id"]).row(0, named=True)
        t = row["position"]
        logits_b = _logits(cpu["base"], traj["prompt_ids"], traj["response_ids"])[t]
        logits_r = _logits(cpu["rl"], traj["prompt_ids"], traj["response_ids"])[t]
        _, tie = reference_row(logits_b, logits_r, None, 0.7, 1.0)
        for name in DISCRETE_COLUMNS:
            assert row[name] == want[row["index"], name] or tie[name], (name, row)


def _masked_states(model, prompts, responses, width: int) -> torch.Tensor:
    """The response positions' states of the forward with a padding mask, as float32."""
    inputs = [p + r[:-1] for p, r in zip(prompts, responses, strict=True)]
    ids = torch.zeros(len(inputs), width, dtype=torch.int64)
    mask = torch.zeros_like(ids)
    for i, x in enumerate(inputs):
        ids[i, : len(x)], mask[i, : len(x)] = torch.tensor(x), 1
    with torch.inference_mode():
        out = model.get_decoder()(input_ids=ids.cuda(), attention_mask=mask.cuda())
    return torch.cat([
        out.last_hidden_state[i, len(p) - 1 : len(p) - 1 + len(r)]
        for i, (p, r) in enumerate(zip(prompts, responses, strict=True))
    ]).float()  # fmt: skip


@pytest.mark.parametrize("arch", ["qwen2", "llama"])
def test_right_padded_batches_take_the_flash_kernel_with_the_masked_states(arch):
    """Without a padding mask SDPA may take its flash kernel (here the only one allowed; it
    takes no mask). float32: the states at every response position are the masked forward's
    within 1e-5 (other kernels, other rounding). bfloat16: they are as close to the float32
    masked states as the bf16 masked forward's are (within 2x its largest error)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from divscope.scoring.engine import _response_hidden

    g = torch.Generator().manual_seed(0)
    sizes = [(7, 40), (1, 3), (30, 1), (12, 29), (2, 5)]
    prompts = [torch.randint(1, VOCAB, (p,), generator=g).tolist() for p, _ in sizes]
    responses = [torch.randint(1, VOCAB, (r,), generator=g).tolist() for _, r in sizes]
    width = 64  # padding in every row
    base = make_model(arch, HEAD_ROWS, seed=0, max_positions=CONTEXT, logit_scale=12.0)
    wide = copy.deepcopy(base).to("cuda")
    reference = _masked_states(wide, prompts, responses, width)
    with torch.inference_mode():
        got = _response_hidden(wide, prompts, responses, width).float()
    assert torch.allclose(got, reference, atol=1e-5, rtol=0)
    half = copy.deepcopy(base).to("cuda", torch.bfloat16)
    masked_error = (_masked_states(half, prompts, responses, width) - reference).abs().max()
    with torch.inference_mode():
        unmasked = _response_hidden(half, prompts, responses, width).float()
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            flash = _response_hidden(half, prompts, responses, width).float()
    for states in (unmasked, flash):
        assert (states - reference).abs().max() <= 2 * masked_error, (arch, masked_error)
