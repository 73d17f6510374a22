"""Eval accuracy of a lab model, with a 95% bootstrap confidence interval over prompts."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from divscope.estimators import bootstrap_ci
from divscope.lab.sampling import generate
from divscope.lab.task import verify


@dataclass(frozen=True)
class Accuracy:
    """Share of correct responses and its 95% CI.

    The CI is divscope's percentile bootstrap over prompts (`divscope.estimators.bootstrap_ci`):
    samples of one prompt are resampled together, since they are not independent.
    """

    accuracy: float
    ci_low: float
    ci_high: float
    n_prompts: int
    samples_per_prompt: int

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


def evaluate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    prompts: list[str],
    answers: list[str],
    *,
    samples_per_prompt: int,
    temperature: float | None,
    seed: int,
    max_new_tokens: int,
) -> tuple[Accuracy, list[list[list[int]]]]:
    """Sample (or greedily decode) responses to every prompt and grade them with the lab verifier.

    Returns:
        The accuracy, and the response ids per prompt per sample.
    """
    generator = torch.Generator().manual_seed(seed)
    prompt_ids = [tokenizer(p, add_special_tokens=False).input_ids for p in prompts]
    repeated = [ids for ids in prompt_ids for _ in range(samples_per_prompt)]
    flat = generate(
        model,
        repeated,
        eos_id=tokenizer.eos_token_id,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        generator=generator,
    )
    texts = tokenizer.batch_decode(flat, skip_special_tokens=True)
    correct = np.array(
        [verify(text, answers[i // samples_per_prompt]) for i, text in enumerate(texts)], float
    ).reshape(len(prompts), samples_per_prompt)
    interval = bootstrap_ci(correct.mean(axis=1), n_boot=2000, seed=seed)
    accuracy = Accuracy(
        interval.estimate, interval.low, interval.high, len(prompts), samples_per_prompt
    )
    grouped = [flat[i : i + samples_per_prompt] for i in range(0, len(flat), samples_per_prompt)]
    return accuracy, grouped
