"""GRPO: group-relative policy optimization on the lab's verifiable reward.

Per step: draw `prompts_per_step` training prompts, sample `group_size` responses to each at
T=1, reward 1 for a verified answer and 0 otherwise, normalize rewards within each group, and
take `minibatches` clipped-ratio policy-gradient steps on the batch, with a KL penalty to the
frozen `base` (as in DeepSeekMath's GRPO). The ratio is taken against the policy that sampled the
batch, so it is 1 on the first minibatch and clipping acts on the later ones. No SFT stage: the
reward is the only training signal besides the pull back to `base`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from divscope.lab.sampling import generate
from divscope.lab.task import verify


@dataclass(frozen=True)
class GRPOConfig:
    """The GRPO stage that turns `base` into `rl`."""

    steps: int = 150
    """Sampling rounds (each followed by `minibatches` optimizer steps)."""
    prompts_per_step: int = 8
    """Distinct prompts per round."""
    group_size: int = 8
    """Responses sampled per prompt; advantages are normalized within this group."""
    lr: float = 1e-4
    """AdamW learning rate (after a linear warm-up)."""
    warmup: int = 10
    """Warm-up rounds: a fresh Adam state makes sign-like, noisy first updates."""
    beta: float = 0.04
    """Weight of the per-token KL penalty to `base` (the k3 estimator of DeepSeekMath's GRPO)."""
    clip_eps: float = 0.2
    """PPO clip range: the ratio is clipped to [1 - clip_eps, 1 + clip_eps]."""
    minibatches: int = 2
    """Optimizer steps per round, each on a disjoint slice of the round's responses."""
    temperature: float = 1.0
    """Sampling temperature of the rollouts."""
    max_new_tokens: int = 224
    """Length cap of a rollout."""
    checkpoint_every: int = 30
    """Save `rl-step-N` every this many rounds (the last round is saved as `rl`)."""


def group_advantages(rewards: torch.Tensor, eps: float = 1e-4) -> torch.Tensor:
    """GRPO advantages: `(r - mean(group)) / (std(group) + eps)`, per group.

    Args:
        rewards: [groups, group_size] rewards.
        eps: keeps groups of equal rewards (std 0) at advantage 0.

    Returns:
        [groups, group_size] advantages. The std is the sample std (n - 1), as in TRL.

    >>> group_advantages(torch.tensor([[1.0, 0.0, 0.0, 0.0]])).round(decimals=3)
    tensor([[ 1.5000, -0.5000, -0.5000, -0.5000]])
    """
    mean = rewards.mean(dim=1, keepdim=True)
    std = rewards.std(dim=1, keepdim=True)
    return (rewards - mean) / (std + eps)


def grpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_eps: float,
    ref_logp: torch.Tensor | None = None,
    beta: float = 0.0,
) -> torch.Tensor:
    """The clipped GRPO surrogate loss (to minimize).

    loss = mean over responses of [ mean over the response's tokens of
           −min(ρ_t A, clip(ρ_t, 1 − ε, 1 + ε) A) + β k3_t ],
    ρ_t = exp(logp_t − old_logp_t),  k3_t = exp(ref_t − logp_t) − (ref_t − logp_t) − 1
    (an unbiased, non-negative estimate of KL(π‖π_ref) at token t).

    Args:
        logp: [batch, len] log-probabilities of the sampled tokens under the current policy.
        old_logp: [batch, len] the same under the sampling policy (no gradient).
        advantages: [batch] one advantage per response.
        mask: [batch, len] 1 on response tokens, 0 elsewhere.
        clip_eps: ε.
        ref_logp: [batch, len] the same under the reference model; needed when `beta` > 0.
        beta: β, weight of the KL penalty.
    """
    ratio = torch.exp(logp - old_logp)
    adv = advantages[:, None]
    per_token = -torch.minimum(ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv)
    if beta:
        log_ref_ratio = ref_logp - logp
        per_token = per_token + beta * (torch.exp(log_ref_ratio) - log_ref_ratio - 1)
    per_response = (per_token * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
    return per_response.mean()


def pack(
    prompts: list[list[int]], responses: list[list[int]], pad_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded `prompt + response` ids and the mask of response tokens as targets.

    Returns:
        `ids` [batch, len] and `mask` [batch, len - 1]: `mask[i, j]` is 1 iff `ids[i, j + 1]`
        is a response token (the target predicted from position j).
    """
    width = max(len(p) + len(r) for p, r in zip(prompts, responses, strict=True))
    ids = torch.full((len(prompts), width), pad_id)
    mask = torch.zeros((len(prompts), width - 1))
    for i, (p, r) in enumerate(zip(prompts, responses, strict=True)):
        ids[i, : len(p) + len(r)] = torch.tensor(p + r)
        mask[i, len(p) - 1 : len(p) + len(r) - 1] = 1
    return ids, mask


def token_logprobs(model: PreTrainedModel, ids: torch.Tensor) -> torch.Tensor:
    """[batch, len - 1] log-probability of each next token `ids[:, 1:]`."""
    logits = model(input_ids=ids).logits[:, :-1].float()  # [batch, len - 1, vocab]
    return torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)


def train_grpo(
    model: PreTrainedModel,
    reference: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    prompts: list[str],
    answers: list[str],
    config: GRPOConfig,
    *,
    seed: int,
    log: Callable[[str], None],
    on_checkpoint: Callable[[int], None],
) -> None:
    """Train `model` in place with GRPO on the training prompts.

    Args:
        model: the policy (a copy of `base`).
        reference: the frozen model of the KL penalty (`base`).
        prompts: training prompts (cycled in a seeded shuffled order).
        answers: gold answers, aligned with `prompts`.
        on_checkpoint: called with the round number every `checkpoint_every` rounds (not after
            the last round).
    """
    order_rng = random.Random(seed)
    generator = torch.Generator().manual_seed(seed)
    prompt_ids = [tokenizer(p, add_special_tokens=False).input_ids for p in prompts]
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, betas=(0.9, 0.99))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min(1.0, (s + 1) / (config.warmup * config.minibatches))
    )
    order: list[int] = []
    for step in range(1, config.steps + 1):
        if len(order) < config.prompts_per_step:
            fresh = list(range(len(prompts)))
            order_rng.shuffle(fresh)
            order += fresh
        chosen, order = order[: config.prompts_per_step], order[config.prompts_per_step :]
        group_prompts = [prompt_ids[i] for i in chosen for _ in range(config.group_size)]
        responses = generate(
            model,
            group_prompts,
            eos_id=tokenizer.eos_token_id,
            max_new_tokens=config.max_new_tokens,
            temperature=config.temperature,
            generator=generator,
        )
        texts = tokenizer.batch_decode(responses, skip_special_tokens=True)
        rewards = torch.tensor(
            [float(verify(t, answers[chosen[i // config.group_size]])) for i, t in enumerate(texts)]
        )
        advantages = group_advantages(rewards.view(-1, config.group_size)).flatten()
        ids, mask = pack(group_prompts, responses, tokenizer.pad_token_id)
        with torch.no_grad():
            old_logp = token_logprobs(model, ids)
            ref_logp = token_logprobs(reference, ids) if config.beta else None
        model.train()
        shuffled = torch.randperm(len(ids), generator=generator)
        for part in shuffled.chunk(config.minibatches):
            loss = grpo_loss(
                token_logprobs(model, ids[part]),
                old_logp[part],
                advantages[part],
                mask[part],
                config.clip_eps,
                ref_logp[part] if config.beta else None,
                config.beta,
            )
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad(set_to_none=True)
        model.eval()
        log(f"grpo step {step}/{config.steps} reward {rewards.mean():.3f}")
        if step % config.checkpoint_every == 0 and step < config.steps:
            on_checkpoint(step)
