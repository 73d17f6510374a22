"""Cross-sampling on the committed lab models."""

from __future__ import annotations

from pathlib import Path

from divscope.decoding import DecodeConfig, Request, build_policy, decode
from divscope.models.loading import load_model
from divscope.models.tokenizers import load_tokenizer
from divscope.prompts import prompt_token_ids, read_prompts

LAB = Path(__file__).resolve().parents[2] / "fixtures" / "lab"


def test_reproduction_invariants_on_the_lab_models():
    tokenizer = load_tokenizer(str(LAB / "base"))
    models = {name: load_model(str(LAB / name), device="cpu") for name in ("base", "rl")}
    prompts = read_prompts(LAB / "prompts" / "eval.jsonl").head(16)
    ids = prompt_token_ids(prompts, tokenizer, source="eval")
    keys = prompts["prompt_id"].to_list()
    config = DecodeConfig(max_new_tokens=40, batch_size=16)

    def run(policy, budget, **params):
        requests = [
            Request(k, s, tuple(i), budget) for k, i in zip(keys, ids, strict=True)
            for s in range(2)
        ]  # fmt: skip
        decoded = decode(
            models, requests, build_policy(policy, **params), config,
            vocab=len(tokenizer), eos_ids=[tokenizer.eos_token_id],
        )  # fmt: skip
        return [d.response_ids for d in decoded]

    base, rl = run("base", -1), run("rl", -1)
    assert run("forward", 0, eps=-1.0) == base
    assert run("forward", -1, eps=-1.0) == rl
    assert base != rl
