"""GRPO: group-relative policy optimization on the lab's verifiable reward.

Per step: draw `prompts_per_step` training prompts, sample `group_size` responses to each at
T=1, reward 1 for a verified answer and 0 otherwise, normalize rewards within each group, and
take `minibatches` clipped-ratio policy-gradient steps on the batch, with a KL penalty to the
frozen `base` (as in DeepSeekMath's GRPO). The ratio is taken against the policy that sampled the
batch, so it is 1 on the first minibatch and clipping acts on the later ones. No SFT stage: the
reward is the only training signal besides the pull back to `base`.

Optionally the advantage is weighted per token by the divergence at that token, as in the core
paper's §5 (sparse-but-critical, App. A.2.3): `token_weights`, with the divergence of
`GRPOConfig.weighting` and the α schedule of `GRPOConfig.alpha`. The default, `none`, is plain
GRPO, bit for bit.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from divscope.errors import DivscopeError
from divscope.lab.sampling import generate
from divscope.lab.task import verify
from divscope.scoring.metrics import full_js

WEIGHTINGS: tuple[str, ...] = ("none", "base-js", "old-kl")
"""The token weightings of `GRPOConfig.weighting`."""


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
    weighting: str = "none"
    """The divergence D_t behind the advantage's token weights (`token_weights`): `none` (plain
    GRPO, every weight 1), `base-js` (JS of the full T=1 next-token distributions of the frozen
    reference and the current policy) or `old-kl` (the k3 estimate of KL(π_old‖π_θ) on the
    sampled token, π_old the policy that sampled the round, as in the paper)."""
    weight_scale: float = 0.3
    """s of w_t = 1 + s·(sigmoid(α·D_t) − 0.5): weights stay within 1 ± s/2 (paper: 0.3)."""
    alpha_max: float = 50.0
    """α at the last round: > 0 boosts high-divergence tokens (paper's high-KL boost, +50),
    < 0 low-divergence ones (low-KL boost, −50)."""
    alpha_start: int = 100
    """Last round with α = 0; α then ramps linearly to `alpha_max` at round `steps` (paper:
    from step 100 for the high-KL boost, 150 for the low-KL boost)."""

    def __post_init__(self) -> None:
        if self.weighting not in WEIGHTINGS:
            raise DivscopeError(
                f"GRPO weighting {self.weighting!r} is unknown; use one of {', '.join(WEIGHTINGS)}."
            )

    def alpha(self, step: int) -> float:
        """α of round `step` (1-based): 0 up to `alpha_start`, then linear to `alpha_max` at
        round `steps`.

        >>> config = GRPOConfig(steps=60, alpha_start=30, alpha_max=50.0)
        >>> config.alpha(30), config.alpha(45), config.alpha(60)
        (0.0, 25.0, 50.0)
        """
        if step <= self.alpha_start:
            return 0.0
        return self.alpha_max * (step - self.alpha_start) / (self.steps - self.alpha_start)


@dataclass(frozen=True)
class RoundStats:
    """What one GRPO round did; weights and divergences are over the round's response tokens."""

    step: int
    reward: float
    """Mean reward of the round's samples."""
    alpha: float
    """α of the round (0 without weighting)."""
    weight_mean: float
    weight_min: float
    weight_max: float
    divergence_mean: float | None
    """Mean D_t (None without weighting)."""
    divergence_max: float | None


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


def k3(log_ratio: torch.Tensor) -> torch.Tensor:
    """The k3 estimator exp(x) − x − 1 of KL(q‖p) at a token drawn from q, x = log(p/q).

    Unbiased and non-negative (Schulman, 2020).

    >>> [round(v, 6) for v in k3(torch.tensor([0.0, 1.0], dtype=torch.float64)).tolist()]
    [0.0, 0.718282]
    """
    return torch.exp(log_ratio) - log_ratio - 1


def token_weights(divergence: torch.Tensor, alpha: float, scale: float) -> torch.Tensor:
    """The paper's advantage weights w_t = 1 + s·(sigmoid(α·D_t) − 0.5), D_t detached.

    Args:
        divergence: [batch, len] D_t, one divergence per token.
        alpha: α; 0 gives every token the weight 1 exactly.
        scale: s.

    Returns:
        [batch, len] weights, without gradient.

    >>> token_weights(torch.tensor([[0.0, 0.1]]), alpha=50.0, scale=0.3)
    tensor([[1.0000, 1.1480]])
    """
    return 1 + scale * (torch.sigmoid(alpha * divergence.detach()) - 0.5)


def grpo_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_eps: float,
    ref_logp: torch.Tensor | None = None,
    beta: float = 0.0,
    weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """The clipped GRPO surrogate loss (to minimize).

    loss = mean over responses of [ mean over the response's tokens of
           −min(ρ_t A_t, clip(ρ_t, 1 − ε, 1 + ε) A_t) + β k3_t ],
    ρ_t = exp(logp_t − old_logp_t),  A_t = w_t A,  k3_t = exp(ref_t − logp_t) − (ref_t − logp_t) − 1
    (an unbiased, non-negative estimate of KL(π‖π_ref) at token t).

    Args:
        logp: [batch, len] log-probabilities of the sampled tokens under the current policy.
        old_logp: [batch, len] the same under the sampling policy (no gradient).
        advantages: [batch] one advantage per response.
        mask: [batch, len] 1 on response tokens, 0 elsewhere.
        clip_eps: ε.
        ref_logp: [batch, len] the same under the reference model; needed when `beta` > 0.
        beta: β, weight of the KL penalty.
        weights: [batch, len] token weights w_t of the advantage (`token_weights`); None: 1.
    """
    ratio = torch.exp(logp - old_logp)
    adv = advantages[:, None] if weights is None else advantages[:, None] * weights
    per_token = -torch.minimum(ratio * adv, ratio.clamp(1 - clip_eps, 1 + clip_eps) * adv)
    if beta:
        per_token = per_token + beta * k3(ref_logp - logp)
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


def next_token_logprobs(model: PreTrainedModel, ids: torch.Tensor) -> torch.Tensor:
    """[batch, len - 1, vocab] float32 log-probabilities of the token after each position."""
    logits = model(input_ids=ids).logits[:, :-1].float()  # [batch, len - 1, vocab]
    return torch.log_softmax(logits, dim=-1)


def sampled_logprobs(logprobs: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """[batch, len - 1] the entries of `next_token_logprobs` at the next tokens `ids[:, 1:]`."""
    return logprobs.gather(-1, ids[:, 1:, None]).squeeze(-1)


def token_logprobs(model: PreTrainedModel, ids: torch.Tensor) -> torch.Tensor:
    """[batch, len - 1] log-probability of each next token `ids[:, 1:]`."""
    return sampled_logprobs(next_token_logprobs(model, ids), ids)


def token_divergence(
    weighting: str,
    logprobs: torch.Tensor,
    ids: torch.Tensor,
    old_logp: torch.Tensor,
    ref_logprobs: torch.Tensor | None,
) -> torch.Tensor:
    """D_t of a token weighting (`GRPOConfig.weighting`), detached.

    Args:
        weighting: `base-js` or `old-kl`.
        logprobs: [batch, len - 1, vocab] the current policy's `next_token_logprobs`.
        ids: [batch, len] the packed sequences.
        old_logp: [batch, len - 1] the sampled tokens' log-probabilities under π_old.
        ref_logprobs: [batch, len - 1, vocab] the reference's `next_token_logprobs` (`base-js`).

    Returns:
        [batch, len - 1]: `base-js`: JS(π_ref(·|x<t), π_θ(·|x<t)) of the full T=1 distributions
        (`divscope.scoring.metrics.full_js`, the token table's `js_full`); `old-kl`: k3 with
        x = log π_θ(x_t) − log π_old(x_t), estimating KL(π_old‖π_θ) at the token π_old drew.
    """
    logprobs = logprobs.detach()
    if weighting == "old-kl":
        return k3(sampled_logprobs(logprobs, ids) - old_logp)
    return full_js(ref_logprobs.flatten(0, 1), logprobs.flatten(0, 1)).view(logprobs.shape[:2])


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
    on_round: Callable[[RoundStats], None] | None = None,
) -> list[RoundStats]:
    """Train `model` in place with GRPO on the training prompts.

    Args:
        model: the policy (a copy of `base`).
        reference: the frozen model of the KL penalty and of the `base-js` weighting (`base`).
        prompts: training prompts (cycled in a seeded shuffled order).
        answers: gold answers, aligned with `prompts`.
        on_checkpoint: called with the round number every `checkpoint_every` rounds (not after
            the last round).
        on_round: called with each round's `RoundStats` after the round, the policy in eval
            mode (e.g. a `divscope.lab.monitor.GRPOMonitor`). It must leave the policy's weights
            and the training's random streams alone: they are the round's only state.

    Returns:
        One `RoundStats` per round.
    """
    weighted = config.weighting != "none"
    history: list[RoundStats] = []
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
        alpha = config.alpha(step) if weighted else 0.0
        with torch.no_grad():
            old_logp = token_logprobs(model, ids)
            ref_logprobs = None
            if config.beta or config.weighting == "base-js":
                ref_logprobs = next_token_logprobs(reference, ids)
            ref_logp = sampled_logprobs(ref_logprobs, ids) if config.beta else None
        model.train()
        shuffled = torch.randperm(len(ids), generator=generator)
        seen_weights: list[torch.Tensor] = []
        seen_divergences: list[torch.Tensor] = []
        for part in shuffled.chunk(config.minibatches):
            logprobs = next_token_logprobs(model, ids[part])
            weights = None
            if weighted:
                divergence = token_divergence(
                    config.weighting,
                    logprobs,
                    ids[part],
                    old_logp[part],
                    None if ref_logprobs is None else ref_logprobs[part],
                )
                weights = token_weights(divergence, alpha, config.weight_scale)
                on_response = mask[part].bool()
                seen_divergences.append(divergence[on_response])
                seen_weights.append(weights[on_response])
            loss = grpo_loss(
                sampled_logprobs(logprobs, ids[part]),
                old_logp[part],
                advantages[part],
                mask[part],
                config.clip_eps,
                ref_logp[part] if config.beta else None,
                config.beta,
                weights,
            )
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad(set_to_none=True)
        model.eval()
        history.append(_round_stats(step, rewards, alpha, seen_weights, seen_divergences))
        line = f"grpo step {step}/{config.steps} reward {rewards.mean():.3f}"
        if weighted:
            stats = history[-1]
            line += f" alpha {alpha:.1f} weight {stats.weight_min:.3f}-{stats.weight_max:.3f}"
        log(line)
        if on_round is not None:
            on_round(history[-1])
        if step % config.checkpoint_every == 0 and step < config.steps:
            on_checkpoint(step)
    return history


def _round_stats(
    step: int,
    rewards: torch.Tensor,
    alpha: float,
    weights: list[torch.Tensor],
    divergences: list[torch.Tensor],
) -> RoundStats:
    """The `RoundStats` of a round from its response tokens' weights and divergences (empty
    lists without weighting: every weight 1)."""
    w = torch.cat(weights) if weights else torch.ones(1)
    d = torch.cat(divergences) if divergences else None
    return RoundStats(
        step=step,
        reward=rewards.mean().item(),
        alpha=alpha,
        weight_mean=w.mean().item(),
        weight_min=w.min().item(),
        weight_max=w.max().item(),
        divergence_mean=None if d is None else d.mean().item(),
        divergence_max=None if d is None else d.max().item(),
    )
