"""The probe scorer on the lab: the same tables as `divscope generate` + `divscope score`."""

from __future__ import annotations

import polars as pl
import pytest
import torch

import divscope
from divscope.errors import DivscopeError
from divscope.generation.engine import Sampling
from divscope.generation.generate import GenerateConfig
from divscope.io import read_token_table, read_trajectories
from divscope.monitor import Probe, ProbeConfig, ProbeScorer
from divscope.params import ModelPair
from divscope.schema import TOKEN_TABLE
from divscope.scoring.engine import ScoreConfig, score_table
from tests.monitor.conftest import LAB, MAX_NEW_TOKENS, PROBE_PROMPTS
from tests.tinymodels import make_tokenizer

BASE, RL = str(LAB / "base"), str(LAB / "rl")
FLOATS = [c for c, dtype in TOKEN_TABLE.items() if dtype == pl.Float32()]


def without_source(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.drop("source").sort("prompt_id", "sample_id", "position")


def test_sampled_probe_is_generate_then_score(scorer, lab_rl, probe_prompts, tmp_path):
    tokens = scorer.score(lab_rl, step=3)
    assert tokens.equals(
        score_table(scorer.sample(lab_rl).with_columns(model=pl.lit("rl")), scorer.base, lab_rl,
                    scorer.tokenizer, progress=False)
    )  # fmt: skip
    assert list(tokens.columns) == list(TOKEN_TABLE)
    assert tokens["source"].unique().to_list() == ["rl"]
    assert tokens.select("prompt_id").n_unique() == PROBE_PROMPTS
    # The same samples from `divscope generate` (hf engine, the probe's seed), scored by
    # `divscope score`: the same table, but for `source` (generate names the model's path).
    sampling = Sampling(n=1, temperature=1.0, top_p=1.0, max_new_tokens=MAX_NEW_TOKENS, seed=0)
    generated = tmp_path / "rl.jsonl"
    divscope.generate(probe_prompts, RL, generated, GenerateConfig(sampling), progress=False)
    divscope.score(generated, ModelPair(BASE, RL), tmp_path / "tokens.parquet", progress=False)
    expected = read_token_table(tmp_path / "tokens.parquet")
    # `score` writes each of so few trajectories as a part of its own, scored alone; batched
    # together they pad to one width, which moves float32 sums in the last bits. Scored alone
    # (a budget of 1 token per batch), the probe's table is `score`'s, bit for bit.
    alone = ProbeScorer(BASE, probe_prompts, scorer.config, score=ScoreConfig(batch_tokens=1))
    assert without_source(alone.score(lab_rl, step=3)).equals(without_source(expected))
    assert without_source(tokens).drop(FLOATS).equals(without_source(expected).drop(FLOATS))
    sampled = scorer.sample(lab_rl).sort("prompt_id")
    assert sampled["response_ids"].to_list() == (
        read_trajectories(generated).sort("prompt_id")["response_ids"].to_list()
    )


def test_the_same_seed_draws_the_same_samples(scorer, lab_rl, probe_prompts):
    first, second = scorer.sample(lab_rl), scorer.sample(lab_rl)
    assert first.equals(second)
    other = ProbeScorer(BASE, probe_prompts, ProbeConfig(max_new_tokens=MAX_NEW_TOKENS, seed=1))
    assert other.sample(lab_rl)["response_ids"].to_list() != first["response_ids"].to_list()


def test_teacher_forced_probe_is_score(lab_rl, tmp_path):
    few = tmp_path / "few.jsonl"
    pl.read_ndjson(LAB / "trajectories.jsonl").head(6).write_ndjson(few)
    scorer = ProbeScorer(BASE, few, device="cpu")
    assert scorer.probe.teacher_forced
    tokens = scorer.score(lab_rl, step=0)
    divscope.score(few, ModelPair(BASE, RL), tmp_path / "tokens.parquet", progress=False)
    expected = read_token_table(tmp_path / "tokens.parquet")
    alone = ProbeScorer(BASE, few, score=ScoreConfig(batch_tokens=1)).score(lab_rl, step=0)
    assert without_source(alone).equals(without_source(expected))
    assert without_source(tokens).drop(FLOATS).equals(without_source(expected).drop(FLOATS))
    assert expected["source"].unique().to_list() == ["base"]  # the file's `model`
    assert tokens["source"].unique().to_list() == ["rl"]  # the policy measured


def test_the_policy_is_left_as_it_was(scorer, lab_rl):
    lab_rl.train()
    grads = [p.requires_grad for p in lab_rl.parameters()]
    scorer.score(lab_rl, step=1)
    assert lab_rl.training
    assert [p.requires_grad for p in lab_rl.parameters()] == grads
    assert all(p.grad is None for p in lab_rl.parameters())
    lab_rl.eval()
    scorer.score(lab_rl, step=2)
    assert not lab_rl.training
    assert not torch.is_inference_mode_enabled()


def test_an_empty_probe_is_refused(tmp_path):
    empty = tmp_path / "probe.jsonl"
    empty.write_text("")
    with pytest.raises(DivscopeError, match=r"probe\.jsonl: the probe is empty"):
        ProbeScorer(BASE, empty)
    with pytest.raises(DivscopeError, match="the probe is empty"):
        Probe.read(pl.DataFrame(schema={"prompt_id": pl.String(), "prompt": pl.String()}))
    with pytest.raises(DivscopeError, match="the probe is empty"):
        Probe.read([])


def test_a_tokenizer_that_differs_from_the_base_is_refused(probe_prompts):
    with pytest.raises(DivscopeError, match="differ in their ordinary vocabulary"):
        ProbeScorer(BASE, probe_prompts, tokenizer=make_tokenizer())


def test_bad_probe_rows_are_refused_naming_the_file(tmp_path):
    ids = tmp_path / "ids.jsonl"
    pl.DataFrame({"prompt_id": ["a"], "prompt_ids": [[3, 4, 99999]]}).write_ndjson(ids)
    with pytest.raises(DivscopeError, match=r"ids\.jsonl: prompt_id='a' holds token id 99999"):
        ProbeScorer(BASE, ids)
    responses = tmp_path / "trajectories.jsonl"
    pl.DataFrame(
        {"prompt_id": ["a"], "sample_id": [0], "prompt_ids": [[3, 4]], "response_ids": [[]]}
    ).write_ndjson(responses)
    with pytest.raises(DivscopeError, match=r"trajectories\.jsonl: empty response"):
        ProbeScorer(BASE, responses)
    with pytest.raises(DivscopeError, match=r"the probe \(given in memory\): prompts need"):
        Probe.read([{"prompt_id": "a", "question": "?"}])
    no_prompt = tmp_path / "no_prompt.jsonl"
    pl.DataFrame({"prompt_id": ["a"], "question": ["?"]}).write_ndjson(no_prompt)
    with pytest.raises(DivscopeError, match=r"no_prompt\.jsonl: prompts need 'prompt'"):
        Probe.read(no_prompt)


def test_a_length_cap_beyond_the_context_is_refused(probe_prompts):
    with pytest.raises(DivscopeError, match="exceeds the base model's context of 320"):
        ProbeScorer(BASE, probe_prompts, ProbeConfig(max_new_tokens=300))


@pytest.mark.parametrize(
    ("field", "value"), [("n", 0), ("every", 0), ("temperature", 0.0), ("top_p", 1.5)]
)
def test_bad_config_is_refused(field, value):
    with pytest.raises(DivscopeError, match=f"ProbeConfig.{field}"):
        ProbeConfig(**{field: value})
