"""The memory arithmetic of a Qwen2.5-7B and a Qwen2.5-32B pair on 80 GB and 141 GB GPUs.

    python bench/memory.py                 # the Markdown table (a few seconds, no download)
    python bench/memory.py --new-tokens 4000

Every number comes from divscope's own planner (`divscope.memory_plan`), run on models built on
the meta device from the real configs (no weights are allocated or downloaded), in bf16, with
`--max-memory` set to the GPU's whole memory as `nvidia-smi` reports it (H100 80GB: 81,559 MiB;
H200: 143,771 MiB). Two placements per GPU size: both models of the pair on one GPU, and one
model per GPU (`--base-device cuda:0 --rl-device cuda:1`). Scoring plans for trajectories of up
to `--prompt` + `--new-tokens` tokens, decoding for prompts of `--prompt` tokens and responses of
`--new-tokens`.

Columns: weights, KV cache per token and KV cache of 32 sequences of 8,192 tokens are per
model; `chunk rows` and `batch tokens` are what `divscope score` plans (and the memory of one
chunk's `[rows, V]` float32 buffers and of one batch's forward), `batch size` what
`divscope cross-sample` plans for the pair. A cell reads "does not fit" where the planner
refuses (the weights alone, or one sequence, exceed the budget).
"""

from __future__ import annotations

import argparse

import torch
from transformers import AutoModelForCausalLM, Qwen2Config

from divscope.errors import DivscopeError
from divscope.memory_plan import (
    format_bytes,
    kv_bytes_per_token,
    plan_decoding,
    plan_scoring,
    weight_bytes,
)

VOCAB = 151_665
"""Qwen2.5's tokenizer size (its output head has 152,064 rows; the padding ones are dropped)."""
MODELS = {
    "Qwen2.5-7B": Qwen2Config(
        vocab_size=152_064, hidden_size=3_584, intermediate_size=18_944, num_hidden_layers=28,
        num_attention_heads=28, num_key_value_heads=4, tie_word_embeddings=False,
        max_position_embeddings=32_768,
    ),
    "Qwen2.5-32B": Qwen2Config(
        vocab_size=152_064, hidden_size=5_120, intermediate_size=27_648, num_hidden_layers=64,
        num_attention_heads=40, num_key_value_heads=8, tie_word_embeddings=False,
        max_position_embeddings=32_768,
    ),
}  # fmt: skip
GPUS = {"80 GB": 81_559 * 2**20, "141 GB": 143_771 * 2**20}
"""GPU memory as nvidia-smi reports it (H100 80GB, H200)."""
PLACEMENTS = {
    "both on one GPU": {"base": "cuda:0", "rl": "cuda:0"},
    "one per GPU": {"base": "cuda:0", "rl": "cuda:1"},
}
KV_ROWS, KV_TOKENS = 32, 8_192


def meta_pair(config: Qwen2Config) -> dict[str, torch.nn.Module]:
    """A base and an RL model of `config` on the meta device, in bf16."""
    with torch.device("meta"):
        return {
            name: AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
            for name in ("base", "rl")
        }


def row(name: str, pair, gpu: str, where: str, prompt: int, new_tokens: int) -> str:
    """One Markdown row: the arithmetic of `pair` on `gpu` placed as `where`."""
    models, memory, placement = pair, GPUS[gpu], PLACEMENTS[where]
    kv = kv_bytes_per_token(models["base"], 2)
    cells = [
        name, f"{gpu}, {where}", format_bytes(weight_bytes(models["base"])), format_bytes(kv),
        format_bytes(kv * KV_ROWS * KV_TOKENS),
    ]  # fmt: skip
    try:
        scoring = plan_scoring(
            models, VOCAB, max_memory=memory, chunk_rows=None, batch_tokens=None,
            longest=prompt + new_tokens - 1, placement=placement,
        )  # fmt: skip
        cells += [
            f"{scoring.chunk_rows:,} ({format_bytes(scoring.chunk_bytes)})",
            f"{scoring.batch_tokens:,} ({format_bytes(scoring.batch_bytes)})",
        ]
    except DivscopeError:
        cells += ["does not fit"] * 2
    try:
        decoding = plan_decoding(
            models, VOCAB, max_memory=memory, longest=prompt + new_tokens, prompt=prompt,
            batch_size=None, placement=placement,
        )  # fmt: skip
        cells.append(f"{decoding.batch_size:,}")
    except DivscopeError:
        cells.append("does not fit")
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompt", type=int, default=192, help="prompt tokens")
    parser.add_argument("--new-tokens", type=int, default=8_000, help="response tokens")
    args = parser.parse_args()
    print(
        "| pair | GPUs | weights / model | KV cache / token / model | "
        f"KV cache of {KV_ROWS} x {KV_TOKENS:,} tokens / model | chunk rows (buffers) | "
        "batch tokens (forward) | batch size |"
    )
    print("|" + "---|" * 8)
    for name, config in MODELS.items():
        pair = meta_pair(config)
        for gpu in GPUS:
            for where in PLACEMENTS:
                print(row(name, pair, gpu, where, args.prompt, args.new_tokens))


if __name__ == "__main__":
    main()
