"""Next-token training: pretraining on the task corpus (and the loop SFT reuses)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from divscope.lab.task import TaskConfig, corpus_solution, sample_problem


@dataclass(frozen=True)
class PretrainConfig:
    """Pretraining of `base` on an endless stream of corpus solutions."""

    steps: int = 1800
    """Optimizer steps."""
    batch_size: int = 32
    """Sequences per step."""
    lr: float = 2e-3
    """Peak learning rate (linear warm-up, cosine decay to 10%)."""
    warmup: int = 50
    """Warm-up steps."""
    weight_decay: float = 0.01
    """AdamW weight decay."""


def lm_batch(
    pairs: list[tuple[str, str]], tokenizer: PreTrainedTokenizerFast, loss_on_prompt: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids and labels of `prompt response <eos>` texts, right-padded.

    Returns:
        `input_ids` [batch, len] and `labels` [batch, len] (-100 on padding, and on the prompt
        unless `loss_on_prompt`).
    """
    rows, masks = [], []
    for prompt, response in pairs:
        p = tokenizer(prompt, add_special_tokens=False).input_ids
        r = tokenizer(response, add_special_tokens=False).input_ids + [tokenizer.eos_token_id]
        rows.append(p + r)
        masks.append([loss_on_prompt] * len(p) + [True] * len(r))
    width = max(map(len, rows))
    ids = torch.full((len(rows), width), tokenizer.pad_token_id)
    labels = torch.full((len(rows), width), -100)
    for i, (row, mask) in enumerate(zip(rows, masks, strict=True)):
        ids[i, : len(row)] = torch.tensor(row)
        keep = torch.tensor(mask)
        labels[i, : len(row)] = torch.where(keep, torch.tensor(row), -100)
    return ids, labels


def train_lm(
    model: PreTrainedModel,
    batches: Iterator[tuple[torch.Tensor, torch.Tensor]],
    *,
    steps: int,
    lr: float,
    warmup: int,
    weight_decay: float,
    log: Callable[[str], None],
    name: str,
) -> None:
    """AdamW on the next-token loss over `steps` batches; logs the loss every 10% of the run."""
    model.train()
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=weight_decay
    )
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: _lr_factor(s, warmup, steps))
    log_every = max(steps // 10, 1)
    running = 0.0
    for step in range(1, steps + 1):
        ids, labels = next(batches)
        loss = model(input_ids=ids, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        running += loss.item()
        if step % log_every == 0:
            log(f"{name} step {step}/{steps} loss {running / log_every:.4f}")
            running = 0.0
    model.eval()


def _lr_factor(step: int, warmup: int, steps: int) -> float:
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(steps - warmup, 1)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress))


def pretrain(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    task: TaskConfig,
    config: PretrainConfig,
    *,
    held_out: set[str],
    seed: int,
    log: Callable[[str], None],
) -> None:
    """Train `model` by next-token prediction on corpus solutions of fresh problems.

    Args:
        held_out: prompts never shown in pretraining (the eval set).
    """
    rng = random.Random(seed)

    def batches() -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        while True:
            pairs = []
            while len(pairs) < config.batch_size:
                problem = sample_problem(rng, task)
                if problem.prompt not in held_out:
                    pairs.append((problem.prompt, corpus_solution(problem, rng, task)))
            yield lm_batch(pairs, tokenizer, loss_on_prompt=False)

    train_lm(
        model,
        batches(),
        steps=config.steps,
        lr=config.lr,
        warmup=config.warmup,
        weight_decay=config.weight_decay,
        log=log,
        name="pretrain",
    )
