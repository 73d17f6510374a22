"""The callback in a real TRL `GRPOTrainer` run on the lab, and in a plain `Trainer`."""

from __future__ import annotations

import math

import polars as pl
import pytest

import divscope
from divscope.errors import DivscopeError
from divscope.io import read_token_table
from divscope.monitor import STATISTICS, EvolutionDir, ProbeConfig, attach, step_statistics
from divscope.monitor.callback import SECONDS
from divscope.params import ModelPair
from divscope.prompts import prompt_token_ids, read_prompts
from divscope.scoring.engine import ScoreConfig
from tests.monitor.conftest import LAB
from tests.tinymodels import make_tokenizer

BASE = str(LAB / "base")


def lab_reward(completions: list[str], answer: list[str], **_) -> list[float]:
    """The lab's verifiable reward: 1 for a verified answer (the `lab` grader), else 0."""
    from divscope.grading import get_grader

    verify = get_grader("lab")
    pairs = zip(completions, answer, strict=True)
    return [float(verify(completion, gold)) for completion, gold in pairs]


def grpo_trainer(out, max_steps: int = 4):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from divscope.models.loading import load_model
    from divscope.models.tokenizers import load_tokenizer

    train = pl.read_ndjson(LAB / "prompts" / "train.jsonl").head(16).select("prompt", "answer")
    args = GRPOConfig(
        output_dir=str(out), max_steps=max_steps, per_device_train_batch_size=4,
        num_generations=4, max_completion_length=224, use_vllm=False, use_cpu=True,
        learning_rate=1e-3, logging_steps=1, save_strategy="steps", save_steps=2,
        report_to="none", seed=0, dataloader_num_workers=0,
    )  # fmt: skip
    return GRPOTrainer(
        model=load_model(BASE, device="cpu"), reward_funcs=lab_reward, args=args,
        train_dataset=Dataset.from_list(train.to_dicts()), processing_class=load_tokenizer(BASE),
    )  # fmt: skip


def same(got: dict[str, float], expected: dict[str, float]) -> bool:
    """Equal statistics, NaN (a statistic without tokens) equal to NaN."""
    return got.keys() == expected.keys() and all(
        got[k] == expected[k] or (math.isnan(got[k]) and math.isnan(expected[k])) for k in got
    )


def trajectories_of(table: pl.DataFrame, probe) -> pl.DataFrame:
    """The probe's trajectories of a step, back from its token table: the prompts' ids and the
    scored response tokens in order."""
    from divscope.models.tokenizers import load_tokenizer

    prompts = read_prompts(probe)
    ids = prompt_token_ids(prompts, load_tokenizer(BASE), source=str(probe))
    frame = pl.DataFrame(
        {"prompt_id": prompts["prompt_id"], "prompt_ids": ids},
        schema={"prompt_id": pl.String(), "prompt_ids": pl.List(pl.Int64())},
    )
    responses = (
        table.sort("position")
        .group_by("prompt_id", "sample_id", maintain_order=True)
        .agg(pl.col("token_id").cast(pl.Int64).alias("response_ids"))
    )
    return responses.join(frame, on="prompt_id").with_columns(model=pl.lit("rl"))


def test_grpo_run_logs_what_score_and_analyze_find(probe_prompts, tmp_path):
    trainer = grpo_trainer(tmp_path / "run")
    evolution = tmp_path / "evolution"
    # Each probe response scored alone, as `divscope score` scores so few (one part each):
    # the logged numbers are then those of `score`, bit for bit.
    config = ProbeConfig(every=2, max_new_tokens=48)
    alone = ScoreConfig(batch_tokens=1)
    callback = attach(trainer, BASE, probe_prompts, config, evolution, score=alone)
    trainer.train()
    assert callback.measured == [0, 2, 4]
    logged = {entry["step"]: entry for entry in trainer.state.log_history if STATISTICS[0] in entry}
    assert sorted(logged) == [0, 2, 4]
    assert all(entry[SECONDS] > 0 for entry in logged.values())
    # TRL's own metrics stay in its own entries, one per step.
    assert all("reward" not in entry for entry in logged.values())
    assert [e["step"] for e in trainer.state.log_history if "loss" in e] == [1, 2, 3, 4]
    directory = EvolutionDir(evolution)
    assert directory.steps() == [0, 2, 4]
    summary = directory.summary()
    for step, entry in logged.items():
        table = read_token_table(directory.table(step))
        assert same(step_statistics(table), {name: entry[name] for name in STATISTICS})
        row = summary.filter(pl.col("step") == step).row(0, named=True)
        assert same({name: row[name] for name in STATISTICS}, step_statistics(table))
        # `divscope score` afterwards, on the probe's samples of that step, against the policy
        # the trainer saved at that step (the base itself at step 0), then the analyses.
        policy = BASE if step == 0 else str(tmp_path / "run" / f"checkpoint-{step}")
        samples = tmp_path / f"samples-{step}.parquet"
        trajectories_of(table, probe_prompts).write_parquet(samples)
        scored = tmp_path / f"tokens-{step}.parquet"
        divscope.score(samples, ModelPair(BASE, policy), scored, progress=False)
        assert same(step_statistics(read_token_table(scored)), step_statistics(table))
        assert (
            read_token_table(scored)
            .sort("prompt_id", "position")
            .equals(table.sort("prompt_id", "position"))
        )
    # The policy moved away from the base: step 0 is the base against itself.
    assert logged[0]["divscope/js_mean"] == 0.0
    assert logged[4]["divscope/js_mean"] > 0.0


def test_plain_trainer_measures_at_the_right_steps(probe_prompts, tmp_path):
    from datasets import Dataset
    from transformers import Trainer, TrainingArguments

    from divscope.models.loading import load_model
    from divscope.models.tokenizers import load_tokenizer

    tokenizer = load_tokenizer(BASE)
    texts = pl.read_ndjson(LAB / "prompts" / "train.jsonl").head(8)["prompt"].to_list()
    rows = [{"input_ids": ids, "labels": ids} for ids in tokenizer(texts)["input_ids"]]
    args = TrainingArguments(
        str(tmp_path / "run"), max_steps=3, per_device_train_batch_size=1, use_cpu=True,
        report_to="none", learning_rate=1e-3, save_strategy="no", logging_steps=1,
    )  # fmt: skip
    model = load_model(BASE, device="cpu")
    trainer = Trainer(model, args, train_dataset=Dataset.from_list(rows),
                      processing_class=tokenizer)  # fmt: skip
    callback = attach(trainer, BASE, probe_prompts, ProbeConfig(every=2, max_new_tokens=16))
    trainer.train()
    assert callback.measured == [0, 2, 3]  # the start, every 2 steps, and the last step
    logged = [e for e in trainer.state.log_history if STATISTICS[0] in e]
    assert [e["step"] for e in logged] == [0, 2, 3]
    assert set(logged[0]) >= {*STATISTICS, SECONDS}
    assert model.training  # the monitor gave the policy back in train mode
    assert logged[2]["divscope/js_mean"] > 0.0


def test_bad_probe_or_tokenizer_fails_before_training(probe_prompts, tmp_path):
    from transformers import Trainer, TrainingArguments

    from divscope.models.loading import load_model
    from divscope.models.tokenizers import load_tokenizer

    args = TrainingArguments(str(tmp_path / "run"), max_steps=1, use_cpu=True, report_to="none")
    model = load_model(BASE, device="cpu")
    trainer = Trainer(model, args, processing_class=load_tokenizer(BASE))
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(DivscopeError, match=r"empty\.jsonl: the probe is empty"):
        attach(trainer, BASE, empty)
    other = Trainer(model, args, processing_class=make_tokenizer())
    with pytest.raises(DivscopeError, match="differ in their ordinary vocabulary"):
        attach(other, BASE, probe_prompts)
    assert trainer.state.global_step == 0 and not trainer.state.log_history
