"""The batched lockstep decoder: several causal LMs advance over one token stream.

`decode` runs the speculative decoder (`divscope.decoding.speculative`, the default) or this
module's step-by-step one (`--decoder reference`, what the other is tested against); the rest
of this docstring describes the reference.

Each batch of requests is left-padded (attention mask, position ids counted from each row's
first real token) and prefilled once per model; then, per step, every model turns its KV cache
and the emitted token into the next-token logits, a policy proposes, the decoder emits, and all
models consume the emitted token, so their caches advance together. The random draw of step t of
(prompt, sample) is `randomness.uniforms(seed, prompt_id, sample, t)`, whatever the batch.

The loop is lean: the step's tokens and flags stay on the device (one host sync per step, in
the top-p truncation), finished rows are found every `CHECK_EVERY` steps from a copy made the
step before, and then dropped from the batch and from every model's KV cache, which grows in a
preallocated buffer (`cache.GrowingLayer`).

What is recorded besides the tokens: at each switch, the primary model's own coupled draw
(`switch_primary_ids`: `n_effective_coupled` counts the switches whose emitted token differs
from it) and whether the emitted token differs from an independent draw of the primary
(`Stream.PRIMARY`: `n_effective`, the papers' count); for `forward` and `reverse` the step's
online JS at each switch (`switch_js`); with `delta_alignment`, per step the cosine between the
two pairs' logit differences (`delta_cosine`). None of it changes a token.

What is reproducible: the same requests in the same batches give the same tokens, and since
every policy of a run decodes identical batches, the invariants between policies (`forward`
with an infinite eps is `base`, a zero budget is `base`, ...) hold bit for bit. On the CPU the
tokens also do not depend on the batch size (tested); on a GPU, kernels may change with the
batch shape, and so, in bf16, may a near-tied draw.

Memory: the logits of every model are computed on one device, the base model's output-head
device (`OutputHead(device=...)`). A batch that runs out of GPU memory is decoded again from
the start as two halves, each left-padded to the batch's prompt width (`divscope.oom`).
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from functools import partial

import numpy as np
import torch
from torch import Tensor

from divscope.decoding.cache import new_cache
from divscope.decoding.decoder import (
    DecodeConfig,
    Decoded,
    DecodeStats,
    decoded,
    delta_cosine,
)
from divscope.decoding.policies import Policy, StepView
from divscope.decoding.randomness import Stream, uniforms
from divscope.decoding.request import Request
from divscope.decoding.speculative import decode_unit, speculative_memory, supports
from divscope.defaults import BATCH_SIZE
from divscope.errors import DivscopeError
from divscope.memory_plan import announce, plan_decoding
from divscope.models.compat import CACHE, cached
from divscope.models.head import (
    OutputHead,
    check_head_reproduces_logits,
    check_output_head,
)
from divscope.models.lengths import context_length, new_token_limits
from divscope.models.placement import on_own_gpus
from divscope.models.threads import concurrently
from divscope.oom import PLACEMENT_ADVICE, halving
from divscope.progress import Progress, note

CHECK_EVERY = 8
"""Steps between two looks for finished rows (each look reads a copy made the step before)."""


DELTA_MODELS: tuple[str, ...] = ("base", "rl", "rast_base", "rast_rl")
"""The models of `DecodeConfig.delta_alignment`: the large pair, then the small (RAST) pair."""


class Lockstep:
    """Causal LMs that advance together over one left-padded batch, each with its KV cache.

    Example:
        >>> stepper = Lockstep(models, [[5, 6, 7], [8, 9]], vocab=44)  # doctest: +SKIP
        >>> stepper.logits["base"].shape  # doctest: +SKIP
        torch.Size([2, 44])
        >>> stepper.advance(torch.tensor([3, 4]))  # doctest: +SKIP
        >>> stepper.select(torch.tensor([1]))  # doctest: +SKIP
    """

    def __init__(
        self,
        models: Mapping[str, torch.nn.Module],
        prompts: Sequence[Sequence[int]],
        vocab: int,
        pad_id: int = 0,
        *,
        max_new_tokens: int = 0,
        suppressed: Sequence[int] = (),
        head_dtype: str | None = None,
        width: int = 0,
        device: str | torch.device | None = None,
    ) -> None:
        """Prefill every model with the prompts.

        Args:
            models: the models by name.
            prompts: token ids of each row's prompt (each non-empty).
            vocab: the tokenizer's size; logits of padded head rows beyond it are dropped.
            pad_id: any valid id; padding is masked out.
            max_new_tokens: steps expected after the prefill (sizes the KV buffers).
            suppressed: ids no model may emit (their logits are −inf).
            head_dtype: `float32`: the output head in float32 (`OutputHead`).
            width: left-pad the prompts to this many tokens at least (a half of a batch that
                ran out of memory is padded as the batch was).
            device: where the logits and every per-row tensor live, and so the statistics:
                every model's output head is computed there (`OutputHead(device=...)`), so
                no `[B, V]` logits cross devices. None: the first model's output-head device.
        """
        self.models = dict(models)
        self.vocab = vocab
        width = max(width, *(len(p) for p in prompts))
        input_ids = torch.full((len(prompts), width), pad_id, dtype=torch.int64)  # [B, S]
        mask = torch.zeros(len(prompts), width, dtype=torch.int64)  # [B, S]
        for i, prompt in enumerate(prompts):
            input_ids[i, width - len(prompt) :] = torch.tensor(prompt)
            mask[i, width - len(prompt) :] = 1
        positions = (mask.cumsum(-1) - 1).clamp_min(0)  # [B, S]
        first = next(iter(self.models.values()))
        device = _head_device(first) if device is None else device
        self.heads = {
            name: OutputHead(model, vocab, head_dtype, device=device)
            for name, model in self.models.items()
        }
        self.device = next(iter(self.heads.values())).device
        self.mask = mask.to(self.device)
        self.next_position = positions[:, -1:].to(self.device) + 1  # [B, 1]
        self.suppressed = torch.tensor(list(suppressed), dtype=torch.int64, device=self.device)
        self.caches: dict[str, object] = {
            name: new_cache(model, width, max_new_tokens) for name, model in self.models.items()
        }
        self.logits: dict[str, Tensor] = {}
        self.concurrent = on_own_gpus(self.models)
        for name in self.models:
            self._forward(name, input_ids, positions)

    def advance(self, tokens: Tensor) -> None:
        """Feed `tokens` (`[B]`, one per row) to every model (at once where each has GPUs of
        its own: `on_own_gpus`)."""
        self.mask = torch.cat([self.mask, torch.ones_like(self.mask[:, :1])], dim=1)  # [B, S+1]
        calls = [
            partial(self._forward, name, tokens[:, None], self.next_position)
            for name in self.models
        ]
        if self.concurrent:
            concurrently(calls, inference=True)
        else:
            for call in calls:
                call()
        self.next_position = self.next_position + 1

    def select(self, rows: Tensor) -> None:
        """Keep only `rows` (`[b]` indices into the batch) in the batch and every cache."""
        self.mask = self.mask[rows]
        self.next_position = self.next_position[rows]
        for name, cache in self.caches.items():
            cache.batch_select_indices(rows.to(_input_device(self.models[name])))
            self.logits[name] = self.logits[name][rows]

    def _forward(self, name: str, input_ids: Tensor, positions: Tensor) -> None:
        model = self.models[name]
        device = _input_device(model)
        cache = self.caches[name]
        out = model.get_decoder()(
            input_ids=input_ids.to(device),
            attention_mask=self.mask.to(device),
            position_ids=positions.to(device),
            use_cache=True,
            **({CACHE: cache} if cache is not None else {}),
        )
        self.caches[name] = cached(out)
        logits = self.heads[name](out.last_hidden_state[:, -1])  # [B, V] float32, self.device
        if self.suppressed.numel():
            logits[:, self.suppressed] = -torch.inf
        self.logits[name] = logits


def _input_device(model) -> torch.device:
    return model.get_input_embeddings().weight.device


def _head_device(model) -> torch.device:
    return model.get_output_embeddings().weight.device


def decode(
    models: Mapping[str, torch.nn.Module],
    requests: Sequence[Request],
    policy: Policy,
    config: DecodeConfig = DecodeConfig(),  # noqa: B008 (frozen, hashable)
    *,
    vocab: int,
    eos_ids: Sequence[int],
    pad_id: int = 0,
    suppressed: Sequence[int] = (),
    progress: bool = False,
    stats: DecodeStats | None = None,
) -> list[Decoded]:
    """Decode every request under `policy`, with all of its models in lockstep
    (`config.decoder`: speculative rounds over refilled batches, or the reference's steps);
    `decode_stream` yields each response as it finishes.

    Args:
        models: models by name (`base`, `rl`, `rast_base`, `rast_rl`); those of
            `decoding_models(policy, config)` are used.
        requests: what to decode; a request's budget caps its switches.
        policy: the intervention policy.
        config: sampling, length cap, seed, batch size, head dtype; a batch size left None is
            planned for every model of `models` and these requests (`planned`).
        vocab: the shared tokenizer's size.
        eos_ids: tokens that end a response (kept as its last token), e.g. `stop_ids`.
        pad_id: the id used for left padding (masked).
        suppressed: ids never emitted (special tokens the tokenizers do not share).
        progress: show a progress bar (and a memory plan, once) on stderr.
        stats: counters to add this decode's work to (`DecodeStats`).

    Returns:
        One `Decoded` per request, in input order.

    Raises:
        DivscopeError: a model the policy (or `delta_alignment`) needs is missing, a prompt
            is empty, a prompt
            plus an asked-for `max_new_tokens` exceeds a model's context, or a single request
            does not fit in GPU memory.
    """
    results: list[Decoded | None] = [None] * len(requests)
    for i, row in decode_stream(
        models, requests, policy, config, vocab=vocab, eos_ids=eos_ids, pad_id=pad_id,
        suppressed=suppressed, progress=progress, stats=stats,
    ):  # fmt: skip
        results[i] = row
    return results  # type: ignore[return-value]


def decode_stream(
    models: Mapping[str, torch.nn.Module],
    requests: Sequence[Request],
    policy: Policy,
    config: DecodeConfig = DecodeConfig(),  # noqa: B008 (frozen, hashable)
    *,
    vocab: int,
    eos_ids: Sequence[int],
    pad_id: int = 0,
    suppressed: Sequence[int] = (),
    progress: bool = False,
    stats: DecodeStats | None = None,
) -> Iterator[tuple[int, Decoded]]:
    """`decode`, each response yielded with its request's index as soon as it is done: the
    speculative decoder yields a response in the round it finishes, so that one call can take
    a process's whole work and keep its batch full, while the caller writes what is done; the
    reference decoder yields each batch's responses when the batch ends. Nothing runs in
    inference mode between yields. Same arguments and errors as `decode`; the checks and the
    plan come before the first yield.
    """
    names = decoding_models(policy, config)
    missing = [name for name in names if name not in models]
    if missing:
        who = "--delta-alignment" if config.delta_alignment else f"policy {policy.name!r}"
        raise DivscopeError(f"{who} needs the model(s) {', '.join(missing)}.")
    if not eos_ids:
        raise DivscopeError("no stop token: the tokenizer defines no eos_token_id; pass --stop.")
    used = {name: models[name] for name in names}
    limits = _limits(used, requests, config.max_new_tokens, vocab)
    prompts = [(r.prompt_id, r.prompt_ids) for r in requests]
    config = planned(config, models, prompts, vocab=vocab, progress=progress)
    # The statistics on the base model's head device, even for a policy without it: every
    # policy of a run then computes on the same device.
    device = _head_device(models["base"] if "base" in models else next(iter(used.values())))
    order = sorted(range(len(requests)), key=lambda i: len(requests[i].prompt_ids))

    stats = DecodeStats() if stats is None else stats

    def attempt(batch: Sequence[int], width: int) -> list[Decoded]:
        return _Batch(
            used, [requests[i] for i in batch], [limits[i] for i in batch], policy, config,
            vocab, eos_ids, pad_id, suppressed, width=width, device=device, stats=stats,
        ).run()  # fmt: skip

    def describe(batch: Sequence[int]) -> str:
        longest = max(len(requests[i].prompt_ids) for i in batch)
        steps = max(limits[i] for i in batch)
        return (
            f"a batch of {len(batch):,} sequences (prompts of up to {longest:,} tokens, up to "
            f"{steps:,} new tokens)"
        )

    def too_large(request: Request) -> str:
        return (
            f"out of GPU memory decoding prompt_id={request.prompt_id!r}, sample_id="
            f"{request.sample_id} alone ({len(request.prompt_ids):,} prompt tokens, up to "
            f"{limits[requests.index(request)]:,} new ones): lower --max-new-tokens, or "
            f"{PLACEMENT_ADVICE}."
        )

    speculative = config.decoder == "speculative" and requests
    if speculative:
        reason = supports(used)
        if reason is not None:
            speculative = False
            note(f"the reference decoder runs ({reason})", enabled=progress)
    if speculative:
        yield from decode_unit(
            used, requests, limits, policy, config, vocab, eos_ids, pad_id, suppressed,
            device=device, stats=stats, too_large=too_large, progress=progress,
        )  # fmt: skip
        return
    with Progress(len(requests), desc=policy.name, unit="seq", enabled=progress) as bar:
        for start in range(0, len(order), config.batch_size):
            batch = order[start : start + config.batch_size]
            # A half of a batch that runs out of memory is padded as the whole batch was.
            width = max(len(requests[i].prompt_ids) for i in batch)
            with torch.inference_mode():
                decoded = halving(
                    partial(attempt, width=width), batch, merge=operator.add,
                    describe=describe, advice="lower --batch-size to avoid the recomputation",
                    too_large=lambda i: too_large(requests[i]),
                )  # fmt: skip
            bar.update(len(batch))
            yield from zip(batch, decoded, strict=True)


def decoding_models(policy: Policy, config: DecodeConfig) -> tuple[str, ...]:
    """The models that decode `policy` under `config`: the policy's own, then, with
    `delta_alignment`, the others of `DELTA_MODELS`.

    >>> from divscope.decoding.policies import Base
    >>> decoding_models(Base(), DecodeConfig(delta_alignment=True))
    ('base', 'rl', 'rast_base', 'rast_rl')
    """
    if not config.delta_alignment:
        return policy.models
    return (*policy.models, *(name for name in DELTA_MODELS if name not in policy.models))


def _limits(
    models: Mapping[str, torch.nn.Module], requests, max_new_tokens, vocab: int
) -> list[int]:
    """Each request's length cap, after checking the prompts and the models' output heads."""
    for request in requests:
        if not request.prompt_ids:
            raise DivscopeError(
                f"prompt_id={request.prompt_id!r}: empty prompt; every prompt needs a token."
            )
    for name, model in models.items():  # the decoder computes logits with `OutputHead`
        check_output_head(model, name, vocab)
        if requests:
            check_head_reproduces_logits(model, name, requests[0].prompt_ids[:16], vocab)
    prompts = [(r.prompt_id, r.prompt_ids) for r in requests]
    contexts = {name: context_length(model) for name, model in models.items()}
    return new_token_limits(prompts, max_new_tokens, contexts)


def planned(
    config: DecodeConfig,
    models: Mapping[str, torch.nn.Module],
    prompts: Sequence[tuple[str, Sequence[int]]],
    *,
    vocab: int,
    progress: bool,
) -> DecodeConfig:
    """`config` with its batch size decided: as given, else planned for every model of
    `models` (the base model first: the statistics are computed on its head's device) and the
    longest of `prompts` with its length cap (`memory_plan.plan_decoding`; the plan printed once
    when `progress`), else `BATCH_SIZE`. A run plans once, on all of its prompts and models,
    so that every policy and every part decodes the same batches.

    Args:
        config: the run's decoding settings.
        models: every model of the run, by name.
        prompts: `(prompt_id, token ids)` of every prompt of the run.
        vocab: the shared vocabulary.
        progress: print the plan (once per process).

    Raises:
        DivscopeError: a prompt too long for a model's context, or a budget that does not fit
            one sequence.
    """
    if config.batch_size is not None:
        return config
    contexts = {name: context_length(model) for name, model in models.items()}
    limits = new_token_limits(prompts, config.max_new_tokens, contexts)
    lengths = [len(ids) for _, ids in prompts]
    memory = plan_decoding(
        models, vocab, max_memory=config.max_memory, batch_size=None,
        longest=max((n + limit for n, limit in zip(lengths, limits, strict=True)), default=1),
        prompt=max(lengths, default=1), head_dtype=config.head_dtype,
        **(speculative_memory(len(models)) if config.decoder == "speculative" else {}),
    )  # fmt: skip
    announce(memory, enabled=progress)
    return replace(config, batch_size=BATCH_SIZE if memory is None else memory.batch_size)


class _Batch:
    """One batch decoded to its end: per step the policy proposes, the budget applies, every
    model consumes the emitted token; finished rows leave the batch every `CHECK_EVERY` steps.

    Per-row tensors hold the active rows only; `rows` maps them to the batch's rows, and the
    outputs (`tokens`, `switched`, `primary`, `effective`, `coupled`, `js`, `delta`) are
    written per batch row.
    """

    def __init__(
        self, models, batch: list[Request], limits: list[int], policy: Policy,
        config: DecodeConfig, vocab: int, eos_ids: Sequence[int], pad_id: int,
        suppressed: Sequence[int], *, width: int, device: torch.device, stats: DecodeStats,
    ) -> None:  # fmt: skip
        self.policy, self.config, self.eos_ids = policy, config, list(eos_ids)
        self.stats, self.others, self.width = stats, len(models) - 1, config.batch_size
        self.limit_all, self.steps = limits, max(limits)
        self.stepper = Lockstep(
            models, [r.prompt_ids for r in batch], vocab, pad_id, max_new_tokens=self.steps,
            suppressed=suppressed, head_dtype=config.head_dtype, width=width, device=device,
        )  # fmt: skip
        device = self.device = self.stepper.device
        ids = ([r.prompt_id for r in batch], [r.sample_id for r in batch])

        def stream(which: Stream, n: int) -> Tensor:
            return torch.from_numpy(uniforms(config.seed, *ids, n, which)).to(device)  # [B, n]

        self.u, self.u_switch = stream(Stream.SAMPLE, self.steps), stream(Stream.SWITCH, self.steps)
        self.u_primary = stream(Stream.PRIMARY, self.steps)
        n = len(batch)
        self.state = policy.init_state(stream(Stream.RESPONSE, 1)[:, 0], batch, self.steps)
        self.limit = torch.tensor(limits, device=device)  # [b]
        self.budget = torch.tensor(
            [r.budget if r.budget >= 0 else self.steps for r in batch], device=device
        )  # [b]
        self.eos = torch.tensor(self.eos_ids, device=device)
        self.rows = torch.arange(n, device=device)  # [b] active row -> batch row
        self.n_switches = torch.zeros(n, dtype=torch.int64, device=device)  # [b]
        self.done = torch.zeros(n, dtype=torch.bool, device=device)  # [b]
        self.tokens = torch.full((n, self.steps), self.eos_ids[0], device=device)  # [B, T]
        self.switched = torch.zeros(n, self.steps, dtype=torch.bool, device=device)  # [B, T]
        self.primary = torch.zeros(n, self.steps, dtype=torch.int32, device=device)  # [B, T]
        self.effective = torch.zeros(n, dtype=torch.int64, device=device)  # [B] independent
        self.coupled = torch.zeros(n, dtype=torch.int64, device=device)  # [B]
        self.delta = (
            torch.full((n, self.steps), torch.nan, dtype=torch.float32, device=device)  # [B, T]
            if config.delta_alignment
            else None
        )
        self.js = (
            torch.zeros(n, self.steps, dtype=torch.float32, device=device)  # [B, T]
            if policy.records_js
            else None
        )

    def run(self) -> list[Decoded]:
        seen: _HostCopy | None = None
        stats = self.stats
        for t in range(self.steps):
            stats.steps, stats.rounds = stats.steps + 1, stats.rounds + 1
            stats.intervener_forwards += self.others
            stats.intervener_tokens += self.others * len(self.rows)
            stats.live, stats.capacity = stats.live + len(self.rows), stats.capacity + self.width
            self._step(t)
            if seen is not None:  # the copy made at the previous step, complete by now
                if self._drop(seen.value()):
                    break
                seen = None
            if (t + 1) % CHECK_EVERY == 0 or t + 1 == self.steps:
                seen = _HostCopy(self.done)
            if t + 1 < self.steps:
                self.stepper.advance(self.tokens[self.rows, t])
        return self._results()

    def _step(self, t: int) -> None:
        rows, config, policy = self.rows, self.config, self.policy
        u, u_switch = self.u[:, t], self.u_switch[:, t]
        u_primary = self.u_primary[:, t]
        view = StepView(self.stepper.logits, u, u_switch, config.sampling, t, u_primary)
        view.truncate_together(policy.drawn)
        proposal = policy.propose(view, self.state)
        token = proposal.primary
        if proposal.want is not None:
            switch = proposal.want & (self.n_switches < self.budget) & ~self.done
            token = torch.where(switch, proposal.intervener, token)
            independent = view.independent(policy.primary, policy.primary_config(view))
            self.effective[rows] += switch & (proposal.intervener != independent)
            self.coupled[rows] += switch & (proposal.intervener != proposal.primary)
            self.n_switches += switch
            self.switched[rows, t] = switch
            self.primary[rows, t] = proposal.primary.to(torch.int32)
        if self.js is not None:
            self.js[rows, t] = view.js.float()
        if self.delta is not None:
            self.delta[rows, t] = delta_cosine(self.stepper.logits)
        token = torch.where(self.done, self.eos[0], token)
        self.tokens[rows, t] = token
        self.done |= torch.isin(token, self.eos) | (t + 1 >= self.limit)

    def _drop(self, done: np.ndarray) -> bool:
        """Drop the rows of `done` (the copy of the step before); True when no row is left."""
        if done.all():
            return True
        if self.config.drop_finished and done.any():
            keep = torch.from_numpy(np.flatnonzero(~done))  # [b'] the rows left
            if self.device.type == "cuda":  # queued behind the step's work, no sync
                keep = keep.pin_memory().to(self.device, non_blocking=True)
            self.stepper.select(keep)
            self.rows, self.done = self.rows[keep], self.done[keep]
            self.u, self.u_switch = self.u[keep], self.u_switch[keep]
            self.u_primary = self.u_primary[keep]
            self.limit, self.budget = self.limit[keep], self.budget[keep]
            self.n_switches = self.n_switches[keep]
            self.state = self.policy.select_state(self.state, keep)
        return False

    def _results(self) -> list[Decoded]:
        out = decoded(
            self.tokens, self.switched, self.primary, self.effective, self.coupled, self.js,
            self.delta, self.limit_all, self.eos_ids,
        )  # fmt: skip
        self.stats.emitted += sum(len(row.response_ids) for row in out)
        return out


class _HostCopy:
    """A copy of a small device tensor on the host, started now and read later: on a GPU the
    copy is queued behind the step's work and read after the next step's sync, so looking for
    finished rows costs no sync of its own."""

    def __init__(self, tensor: Tensor) -> None:
        if tensor.device.type == "cuda":
            self.host = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=True)
            self.host.copy_(tensor, non_blocking=True)
            self.event = torch.cuda.Event()
            self.event.record()
        else:
            self.host, self.event = tensor.clone(), None

    def value(self) -> np.ndarray:
        if self.event is not None:
            self.event.synchronize()
        return self.host.numpy()
