"""The lockstep decoder on CUDA, through `divscope.decoding.decode` only.

On a GPU a sequence's logits may depend on the batch it is decoded in (kernels pick other
reduction orders for other shapes), so the CPU claim "the same tokens at any batch size" is not
made here. What holds is: the same batches give the same tokens, run after run; and since a
policy changes which model's token is emitted but never which requests share a batch, the
policy invariants of tests/decoding/test_lockstep.py hold exactly, in bfloat16, on the lab
models. In float32 the tiny models decode on CUDA as on the CPU.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from divscope.decoding import DecodeConfig, Request, build_policy, decode
from divscope.scoring import StatsConfig
from tests.decoding.helpers import assert_same_decodes
from tests.tinymodels import make_model

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

LAB = Path(__file__).resolve().parents[2] / "fixtures" / "lab"
CONFIG = DecodeConfig(
    StatsConfig(temperature=1.0, top_p=0.7), max_new_tokens=64, batch_size=16, seed=3
)
NEVER = float("inf")  # an eps no JS reaches: never switch


@pytest.fixture(scope="module")
def lab():
    """The lab's base and rl models in bfloat16 on cuda, and 24 eval prompts × 2 samples."""
    from divscope.models.loading import load_model
    from divscope.models.tokenizers import load_tokenizer
    from divscope.prompts import prompt_token_ids, read_prompts_arrow

    tokenizer = load_tokenizer(str(LAB / "base"))
    models = {
        name: load_model(str(LAB / name), dtype="bfloat16", device="cuda")
        for name in ("base", "rl")
    }
    prompts = read_prompts_arrow(LAB / "prompts" / "eval.jsonl").slice(0, 24)
    ids = prompt_token_ids(prompts, tokenizer, source="eval")
    keys = prompts["prompt_id"].to_pylist()
    return models, keys, ids, len(tokenizer), [tokenizer.eos_token_id]


def _run(lab, policy, budget=-1, config=CONFIG, stats=None, **params):
    models, keys, ids, vocab, eos = lab
    requests = [
        Request(key, sample, tuple(prompt), budget)
        for key, prompt in zip(keys, ids, strict=True)
        for sample in range(2)
    ]
    return decode(
        models, requests, build_policy(policy, **params), config, vocab=vocab, eos_ids=eos,
        stats=stats,
    )  # fmt: skip


def _tokens(decoded):
    return [d.response_ids for d in decoded]


@pytest.mark.parametrize(
    "policy,budget,params",
    [
        ("base", -1, {}),
        ("forward", 2, {"eps": 0.05}),
        ("forward", -1, {"eps": 0.05}),
        ("random", -1, {"rate": 0.1}),
    ],
)
def test_the_same_batches_give_the_same_tokens(lab, policy, budget, params):
    first = _run(lab, policy, budget, **params)
    assert _run(lab, policy, budget, **params) == first
    assert policy == "base" or any(d.n_switches for d in first)


def test_forward_and_reverse_reduce_to_a_single_model(lab):
    base, rl = _tokens(_run(lab, "base")), _tokens(_run(lab, "rl"))
    assert base != rl
    assert _tokens(_run(lab, "forward", 0, eps=-1.0)) == base
    assert _tokens(_run(lab, "forward", -1, eps=NEVER)) == base
    assert _tokens(_run(lab, "forward", -1, eps=-1.0)) == rl
    assert _tokens(_run(lab, "reverse", 0, eps=-1.0)) == rl
    assert _tokens(_run(lab, "reverse", -1, eps=NEVER)) == rl
    assert _tokens(_run(lab, "reverse", -1, eps=-1.0)) == base


@pytest.mark.parametrize(
    "policy,params,same_as",
    [
        ("random", {"rate": 0.0}, "base"),
        ("random", {"rate": 1.0}, "rl"),
        ("mixture", {"alpha": 0.0}, "base"),
        ("mixture", {"alpha": 1.0}, "rl"),
        ("gated", {"tau": 1e9, "lam": 1.0}, "base"),
    ],
)
def test_degenerate_parameters_reproduce_a_single_model(lab, policy, params, same_as):
    assert _tokens(_run(lab, policy, **params)) == _tokens(_run(lab, same_as))


def _tiny_requests():
    prompts = {"a": (5, 6, 7), "b": (8,), "c": (9, 10, 11, 12, 13, 14), "d": (15, 16)}
    return [
        Request(p, s, ids, b) for b in (0, 2, -1) for p, ids in prompts.items() for s in range(3)
    ]


def _tiny_decode(models, policy, decoder="speculative", **params):
    config = DecodeConfig(
        StatsConfig(top_p=0.7), max_new_tokens=12, batch_size=5, seed=3, decoder=decoder
    )
    policy = build_policy(policy, **params)
    return decode(models, _tiny_requests(), policy, config, vocab=44, eos_ids=[2])


@pytest.mark.parametrize("policy,params", [("base", {}), ("forward", {"eps": 0.1})])
def test_float32_decoding_on_cuda_equals_the_cpu(policy, params):
    cpu = {
        name: make_model("llama", vocab_size=48, seed=s) for s, name in enumerate(("base", "rl"))
    }
    cuda = {
        name: make_model("llama", vocab_size=48, seed=s).to("cuda")
        for s, name in enumerate(("base", "rl"))
    }
    assert_same_decodes(_tiny_decode(cuda, policy, **params), _tiny_decode(cpu, policy, **params))


def test_an_output_head_on_another_device_decodes_the_same(tmp_path):
    """Decoder on cuda:0, output head on cuda:1, float32: the same responses. (A head on the
    CPU next to a GPU decoder is offloaded by accelerate, which `load_model` refuses.)"""
    pytest.importorskip("accelerate")  # transformers needs it for any device_map
    from divscope.models.loading import load_model

    for seed, name in enumerate(("base", "rl")):
        make_model("llama", vocab_size=48, seed=seed).save_pretrained(tmp_path / name)
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs: a head on the CPU would be offloaded (refused)")
    head = "cuda:1"
    split_map = {"model": "cuda:0", "lm_head": head}
    single = {
        n: load_model(str(tmp_path / n), dtype="float32", device="cuda:0") for n in ("base", "rl")
    }
    split = {
        n: load_model(str(tmp_path / n), dtype="float32", device_map=split_map)
        for n in ("base", "rl")
    }
    assert split["rl"].get_output_embeddings().weight.device == torch.device(head)
    assert_same_decodes(
        _tiny_decode(split, "forward", eps=0.1), _tiny_decode(single, "forward", eps=0.1)
    )


@pytest.mark.parametrize("decoder", ["reference", "speculative"])
def test_the_decode_loop_syncs_with_the_host_about_once_per_step(lab, decoder):
    """divscope's own lines make at most one synchronizing CUDA call per step (the top-p window
    check) in the reference decoder, whose finished rows are found from a copy queued the step
    before; the speculative decoder adds two per round (the verifying model's truncation, the
    round's rows retired), and a few per refill. Counted with torch's sync debug mode, from
    warnings raised in divscope's files (transformers' own code may sync on its own)."""
    import warnings

    from divscope.decoding import DecodeStats

    stats = DecodeStats()
    config = DecodeConfig(**{**CONFIG.__dict__, "decoder": decoder})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            decoded = _run(lab, "forward", -1, config=config, eps=0.05, stats=stats)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    ours = [w for w in caught if "divscope" in w.filename and "synchroniz" in str(w.message)]
    setup = 16  # per batch or refill: prompts, masks, uniforms, limits and budgets in
    batches = -(-len(decoded) // CONFIG.batch_size)
    where = sorted({f"{w.filename}:{w.lineno}" for w in ours})
    if decoder == "reference":
        assert len(ours) <= stats.steps + batches * setup, where
    else:
        assert stats.draft > 1
        assert len(ours) <= stats.steps + 2 * stats.rounds + setup * len(decoded), where


@pytest.mark.parametrize(
    "policy,budget,params",
    [
        ("forward", -1, {"eps": 0.05}),
        ("forward", 2, {"eps": 0.05}),
        ("gated", -1, {"tau": 1.0, "lam": 1.5}),
    ],
)
def test_the_speculative_decoder_agrees_with_the_reference_on_cuda(lab, policy, budget, params):
    """In bfloat16 the speculative decoder's k-position forwards round otherwise than one-token
    steps, so a near-tie may flip: at least 90% of the lab's responses are the same, tokens and
    switches (the measured share is printed); in float32 on tiny models, every one."""
    reference = DecodeConfig(**{**CONFIG.__dict__, "decoder": "reference"})
    want = _run(lab, policy, budget, config=reference, **params)
    got = _run(lab, policy, budget, **params)
    same = sum(
        (g.response_ids, g.switch_positions) == (w.response_ids, w.switch_positions)
        for g, w in zip(got, want, strict=True)
    )
    print(f"{policy} budget {budget}: {same}/{len(got)} responses the same in bfloat16")
    assert same >= 0.9 * len(got)
    models = {
        name: make_model("llama", vocab_size=48, seed=s).to("cuda")
        for s, name in enumerate(("base", "rl"))
    }
    tiny = [_tiny_decode(models, policy, decoder=d, **params) for d in ("speculative", "reference")]
    assert [d.response_ids for d in tiny[0]] == [d.response_ids for d in tiny[1]]
    assert [d.switch_positions for d in tiny[0]] == [d.switch_positions for d in tiny[1]]
