"""Cross-sampling on the committed lab models."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import torch

from divscope.decoding import DecodeConfig, Request, Stream, build_policy, decode, uniforms
from divscope.decoding.cross_sample import Grid, cross_sample
from divscope.decoding.randomness import inverse_cdf
from divscope.decoding.settings import Policies
from divscope.models.loading import load_model
from divscope.models.tokenizers import load_tokenizer
from divscope.params import ModelPair
from divscope.prompts import prompt_token_ids, read_prompts
from divscope.scoring.metrics import StatsConfig, truncate

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


def test_random_effective_matches_forwards_effective_count_on_the_lab_models(tmp_path):
    """`random-effective` beside forward on the lab: per (prompt, sample, budget) its effective
    count is forward's within one token, and at every switch the emitted token differs from
    the base model's independent draw there, recomputed by teacher forcing (no identity swap)."""
    prompts = tmp_path / "prompts.jsonl"
    read_prompts(LAB / "prompts" / "eval.jsonl").head(6).write_ndjson(prompts)
    config = DecodeConfig(StatsConfig(top_p=0.7), max_new_tokens=160, batch_size=12)
    results = pl.from_arrow(cross_sample(
        prompts, ModelPair(str(LAB / "base"), str(LAB / "rl")),
        Policies("forward,random-effective", eps=(0.05,)), tmp_path / "out.parquet",
        config, Grid(budgets=(2, -1), n=2), progress=False,
    ))  # fmt: skip
    key = ["prompt_id", "sample_id", "budget"]
    forward = results.filter(policy="forward").select(*key, forward="n_effective")
    matched = results.filter(policy="random-effective").join(forward, on=key)
    assert matched.height == 24
    assert ((matched["n_effective"] - matched["forward"]).abs() <= 1).all()
    assert matched["n_effective"].sum() > 0
    assert (matched["n_switches"] == matched["n_effective"]).all()
    # Listed before forward, it decodes forward itself first: the same responses.
    alone = pl.from_arrow(cross_sample(
        prompts, ModelPair(str(LAB / "base"), str(LAB / "rl")),
        Policies("random-effective,forward", eps=(0.05,)), tmp_path / "first.parquet",
        config, Grid(budgets=(2, -1), n=2), progress=False,
    ))  # fmt: skip
    columns = [*key, "response_ids", "switch_positions"]
    assert (
        alone.filter(policy="random-effective")
        .select(columns)
        .sort(key)
        .equals(results.filter(policy="random-effective").select(columns).sort(key))
    )

    tokenizer = load_tokenizer(str(LAB / "base"))
    base = load_model(str(LAB / "base"), device="cpu")
    ids = dict(
        zip(
            read_prompts(prompts)["prompt_id"],
            prompt_token_ids(read_prompts(prompts), tokenizer, source="eval"),
            strict=True,
        )
    )
    checked = 0
    for row in matched.filter(pl.col("n_switches") > 0).iter_rows(named=True):
        prompt, response = list(ids[row["prompt_id"]]), row["response_ids"]
        with torch.inference_mode():
            logits = base(input_ids=torch.tensor([prompt + response])).logits[0]
        logits = logits[len(prompt) - 1 : len(prompt) + len(response) - 1, : len(tokenizer)]
        key_ = ([row["prompt_id"]], [row["sample_id"]], len(response))
        independent = uniforms(config.seed, *key_, Stream.PRIMARY)[0]
        for position in row["switch_positions"]:
            dist = truncate(logits[position][None].float(), config.sampling)
            u = torch.tensor([independent[position]], dtype=torch.float64)
            assert int(inverse_cdf(dist, u)[0]) != response[position]
            checked += 1
    assert checked == matched["n_switches"].sum()
