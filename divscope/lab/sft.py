"""SFT control: `base` fine-tuned by next-token loss on a teacher's solutions.

The teacher (`divscope.lab.task.teacher_solution`) is always right but writes in its own phrasing
and layout, as distillation data usually does, so SFT moves `base` on most tokens while RL moves
it on a few decisions.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from divscope.lab.pretrain import lm_batch, train_lm


@dataclass(frozen=True)
class SFTConfig:
    """The SFT stage that turns `base` into `sft`."""

    steps: int = 600
    """Optimizer steps."""
    batch_size: int = 32
    """Sequences per step."""
    lr: float = 1e-3
    """Peak learning rate (linear warm-up, cosine decay to 10%)."""
    warmup: int = 20
    """Warm-up steps."""


def train_sft(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    prompts: list[str],
    solutions: list[str],
    config: SFTConfig,
    *,
    seed: int,
    log: Callable[[str], None],
) -> None:
    """Fine-tune `model` in place on `(prompt, solution)` pairs, loss on the solution only.

    Args:
        solutions: a correct solution per prompt (the build passes the teacher's).
    """
    rng = random.Random(seed)
    pairs = list(zip(prompts, solutions, strict=True))

    def batches() -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        while True:
            order = pairs[:]
            rng.shuffle(order)
            for start in range(0, len(order) - config.batch_size + 1, config.batch_size):
                batch = order[start : start + config.batch_size]
                yield lm_batch(batch, tokenizer, loss_on_prompt=False)

    train_lm(
        model,
        batches(),
        steps=config.steps,
        lr=config.lr,
        warmup=config.warmup,
        weight_decay=0.0,
        log=log,
        name="sft",
    )
