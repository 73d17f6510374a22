"""The batched lockstep decoder: several causal LMs advance over one token stream.

Each batch of requests is left-padded (attention mask, position ids counted from each row's
first real token) and prefilled once per model; then, per step, every model turns its KV cache
and the emitted token into the next-token logits, a policy proposes, the decoder emits, and all
models consume the emitted token, so their caches advance together. The random draw of step t of
(prompt, sample) is `randomness.uniforms(seed, prompt_id, sample, t)`: results do not depend on
the batch size or on which requests share a batch.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from divscope.decoding.policies import Policy, StepView
from divscope.decoding.randomness import Stream, uniforms
from divscope.defaults import BATCH_SIZE, DECODE_MAX_NEW_TOKENS, SEED
from divscope.errors import DivscopeError
from divscope.models import check_context, context_length
from divscope.progress import Progress
from divscope.scoring.stats import StatsConfig


@dataclass(frozen=True)
class DecodeConfig:
    """How the lockstep decoder samples.

    >>> DecodeConfig(StatsConfig(top_p=0.9), max_new_tokens=64).sampling.top_p
    0.9
    """

    sampling: StatsConfig = StatsConfig()
    """Top-p, temperature and window of the sampled distributions, and of the per-step JS
    (--top-p, --temperature)."""
    max_new_tokens: int = DECODE_MAX_NEW_TOKENS
    """Length cap of a response (--max-new-tokens)."""
    seed: int = SEED
    """Seed of the coupled uniforms (--seed)."""
    batch_size: int = BATCH_SIZE
    """Sequences decoded together (--batch-size); results do not depend on it."""

    def __post_init__(self) -> None:
        if self.max_new_tokens < 1:
            raise DivscopeError(f"--max-new-tokens must be >= 1, got {self.max_new_tokens}.")
        if self.batch_size < 1:
            raise DivscopeError(f"--batch-size must be >= 1, got {self.batch_size}.")


@dataclass(frozen=True)
class Request:
    """One response to decode."""

    prompt_id: str
    sample_id: int
    prompt_ids: tuple[int, ...]
    budget: int = -1
    """Most switches allowed; −1 = unlimited."""


@dataclass(frozen=True)
class Decoded:
    """One decoded response and its interventions."""

    response_ids: list[int]
    """Emitted tokens, the EOS token included when the response finished."""
    finished: bool
    """Ended with EOS (not at the length cap)."""
    n_switches: int
    n_effective: int
    switch_positions: list[int]


class Lockstep:
    """Causal LMs that advance together over one left-padded batch, each with its KV cache.

    Example:
        >>> stepper = Lockstep(models, [[5, 6, 7], [8, 9]], vocab=44)  # doctest: +SKIP
        >>> stepper.logits["base"].shape  # doctest: +SKIP
        torch.Size([2, 44])
        >>> stepper.advance(torch.tensor([3, 4]))  # doctest: +SKIP
    """

    def __init__(
        self,
        models: Mapping[str, torch.nn.Module],
        prompts: Sequence[Sequence[int]],
        vocab: int,
        pad_id: int = 0,
    ) -> None:
        """Prefill every model with the prompts.

        Args:
            models: the models by name.
            prompts: token ids of each row's prompt (each non-empty).
            vocab: the tokenizer's size; logits of padded head rows beyond it are dropped.
            pad_id: any valid id; padding is masked out.
        """
        self.models = dict(models)
        self.vocab = vocab
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), pad_id, dtype=torch.int64)  # [B, S]
        mask = torch.zeros(len(prompts), width, dtype=torch.int64)  # [B, S]
        for i, prompt in enumerate(prompts):
            input_ids[i, width - len(prompt) :] = torch.tensor(prompt)
            mask[i, width - len(prompt) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp_min(0)  # [B, S]
        self.device = _input_device(next(iter(self.models.values())))
        self.mask = mask.to(self.device)
        self.next_position = positions[:, -1:].to(self.device) + 1  # [B, 1]
        self.cache_names = {name: _cache_names(model) for name, model in self.models.items()}
        self.caches: dict[str, object] = {}
        self.logits: dict[str, Tensor] = {}
        for name in self.models:
            self._forward(name, input_ids, positions)

    def advance(self, tokens: Tensor) -> None:
        """Feed `tokens` (`[B]`, one per row) to every model."""
        self.mask = torch.cat([self.mask, torch.ones_like(self.mask[:, :1])], dim=1)  # [B, S+1]
        for name in self.models:
            self._forward(name, tokens[:, None], self.next_position)
        self.next_position = self.next_position + 1

    def _forward(self, name: str, input_ids: Tensor, positions: Tensor) -> None:
        model = self.models[name]
        device = _input_device(model)
        cache_kwarg, cache_attr = self.cache_names[name]
        out = model(
            input_ids=input_ids.to(device),
            attention_mask=self.mask.to(device),
            position_ids=positions.to(device),
            use_cache=True,
            logits_to_keep=1,
            **({cache_kwarg: self.caches[name]} if name in self.caches else {}),
        )
        self.caches[name] = getattr(out, cache_attr)
        logits = out.logits[:, -1, : self.vocab]  # [B, V]
        self.logits[name] = (logits if logits.dtype == torch.float64 else logits.float()).to(
            self.device
        )


def _input_device(model) -> torch.device:
    return model.get_input_embeddings().weight.device


def _cache_names(model) -> tuple[str, str]:
    """The KV-cache argument and output names: `cache` from transformers 5.x on, before that
    `past_key_values`."""
    if "cache" in inspect.signature(model.forward).parameters:
        return "cache", "cache"
    return "past_key_values", "past_key_values"


def decode(
    models: Mapping[str, torch.nn.Module],
    requests: Sequence[Request],
    policy: Policy,
    config: DecodeConfig = DecodeConfig(),  # noqa: B008 (frozen, hashable)
    *,
    vocab: int,
    eos_ids: Sequence[int],
    pad_id: int = 0,
    progress: bool = False,
) -> list[Decoded]:
    """Decode every request under `policy`, in batches, with all of its models in lockstep.

    Args:
        models: models by name (`base`, `rl`, `rast_base`, `rast_rl`); those of
            `policy.models` are used.
        requests: what to decode; a request's budget caps its switches.
        policy: the intervention policy.
        config: sampling, length cap, seed and batch size.
        vocab: the shared tokenizer's size.
        eos_ids: tokens that end a response (kept as its last token).
        pad_id: the id used for left padding (masked).
        progress: show a progress bar on stderr.

    Returns:
        One `Decoded` per request, in input order.

    Raises:
        DivscopeError: a model the policy needs is missing, a prompt is empty, or a prompt
            plus `max_new_tokens` exceeds a model's context.
    """
    missing = [name for name in policy.models if name not in models]
    if missing:
        raise DivscopeError(f"policy {policy.name!r} needs the model(s) {', '.join(missing)}.")
    used = {name: models[name] for name in policy.models}
    _check_lengths(used, requests, config.max_new_tokens)
    if not eos_ids:
        raise DivscopeError("no EOS token: the tokenizer defines no eos_token_id.")
    order = sorted(range(len(requests)), key=lambda i: len(requests[i].prompt_ids))
    results: list[Decoded | None] = [None] * len(requests)
    with (
        torch.inference_mode(),
        Progress(len(requests), desc=policy.name, unit="seq", enabled=progress) as bar,
    ):
        for start in range(0, len(order), config.batch_size):
            batch = order[start : start + config.batch_size]
            decoded = _decode_batch(
                used, [requests[i] for i in batch], policy, config, vocab, eos_ids, pad_id
            )
            for i, row in zip(batch, decoded, strict=True):
                results[i] = row
            bar.update(len(batch))
    return results  # type: ignore[return-value]


def _check_lengths(models: Mapping[str, torch.nn.Module], requests, max_new_tokens: int) -> None:
    for request in requests:
        if not request.prompt_ids:
            raise DivscopeError(
                f"prompt_id={request.prompt_id!r}: empty prompt; every prompt needs a token."
            )
    prompts = [(r.prompt_id, r.prompt_ids) for r in requests]
    for name, model in models.items():
        check_context(prompts, max_new_tokens, context_length(model), model=f"the {name} model")


def _decode_batch(
    models: Mapping[str, torch.nn.Module],
    batch: list[Request],
    policy: Policy,
    config: DecodeConfig,
    vocab: int,
    eos_ids: Sequence[int],
    pad_id: int,
) -> list[Decoded]:
    steps = config.max_new_tokens
    prompt_ids = [r.prompt_id for r in batch]
    sample_ids = [r.sample_id for r in batch]
    stepper = Lockstep(models, [r.prompt_ids for r in batch], vocab, pad_id)
    device = stepper.device

    def stream(which: Stream, n: int) -> Tensor:
        values = uniforms(config.seed, prompt_ids, sample_ids, n, which)  # [B, n]
        return torch.from_numpy(values).to(device)

    u, u_switch = stream(Stream.SAMPLE, steps), stream(Stream.SWITCH, steps)  # [B, T]
    state = policy.init_state(stream(Stream.RESPONSE, 1)[:, 0])
    budget = torch.tensor(
        [r.budget if r.budget >= 0 else steps for r in batch], device=device
    )  # [B]
    eos = torch.tensor(list(eos_ids), device=device)
    n_switches = torch.zeros(len(batch), dtype=torch.int64, device=device)  # [B]
    done = torch.zeros(len(batch), dtype=torch.bool, device=device)  # [B]
    no_switch = torch.zeros_like(done)
    tokens, switched, effective = [], [], []
    for t in range(steps):
        view = StepView(stepper.logits, u[:, t], u_switch[:, t], config.sampling)
        proposal = policy.propose(view, state)
        token, switch, differs = proposal.primary, no_switch, no_switch
        if proposal.want is not None:
            switch = proposal.want & (n_switches < budget) & ~done
            token = torch.where(switch, proposal.intervener, token)
            differs = switch & (proposal.intervener != proposal.primary)
            n_switches += switch
        token = torch.where(done, eos[0], token)
        tokens.append(token)
        switched.append(switch)
        effective.append(differs)
        done |= torch.isin(token, eos)
        if bool(done.all()):
            break
        stepper.advance(token)
    token_rows = torch.stack(tokens, dim=1).cpu().numpy()  # [B, steps run]
    switch_rows = torch.stack(switched, dim=1).cpu().numpy()  # [B, steps run]
    effective_counts = torch.stack(effective, dim=1).sum(1).tolist()  # [B]
    eos_set = np.array(list(eos_ids))
    out = []
    for row, switches, n_effective in zip(token_rows, switch_rows, effective_counts, strict=True):
        ends = np.flatnonzero(np.isin(row, eos_set))
        length = int(ends[0]) + 1 if ends.size else len(row)
        positions = np.flatnonzero(switches[:length])
        out.append(
            Decoded(
                response_ids=row[:length].tolist(),
                finished=bool(ends.size),
                n_switches=int(positions.size),
                n_effective=int(n_effective),
                switch_positions=positions.tolist(),
            )
        )
    return out
