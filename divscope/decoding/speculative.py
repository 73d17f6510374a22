"""The speculative lockstep decoder: the reference decoder's tokens, with fewer forwards.

The reference decoder (`lockstep._Batch`) forwards every model at every step for every row,
batch by batch. This one emits the same tokens, switches and records, and saves three costs:

- **Speculative verification.** The primary model drafts k tokens, each with its usual coupled
  draw (the step's uniform from `Policy.primary_config`). The other models (the intervener;
  RAST's small pair; the `delta_alignment` models) then read the k drafted positions in one
  forward, as a prefill, and the policy decides position by position, on the same prefix,
  distributions and uniforms as a step-by-step loop: the row accepts the draft up to the first
  position whose emitted token differs from it (a switch to a different token, a stop token,
  the length cap), where the emitted token ends the round; the rest of the draft is discarded
  (its KV slots masked). A switch to the drafted token itself (an identity swap) keeps the
  draft going. k is chosen per round from the observed rate at which drafts break
  (`draft_length`).
- **Budget-aware stepping.** A row whose switch budget is spent can only emit the primary's
  draw: it leaves the other models' batch and their KV cache, and the primary decodes it
  alone. A budget of 0 (and the `base`/`rl` controls) never prefills the other models.
- **Refilled batches.** Every round, finished rows leave and waiting requests take their
  places: each new row's prompt is prefilled and its KV appended; rows stand at different
  positions (per-row position ids, per-row uniforms; a prebuilt 4-D mask per model marks
  every row's valid KV slots). Occupancy, live rows per step over capacity, is counted
  while requests wait (`DecodeStats.occupancy`). A response is read out in the round it
  finishes and yielded (`lockstep.decode_stream`), its output slot freed for the next row:
  one call can take all of a process's requests, whose outputs hold the batch's memory only.

Every statistic and record comes from the same functions as the reference's; what can differ is
float rounding: the other models read k positions in one forward instead of k one-token steps,
and KV caches are laid out differently (masked slots, other widths), so a logit can move in its
last bits and, where a uniform or a threshold lies within that distance, a decision with it
(docs/contracts.md, "The speculative decoder", has the measured rate; tested equal on the lab
and random pairs).

Policies: every policy runs here, since each decides from the current position's distributions,
its uniforms and per-row state updated position by position (the state of a row is restored
past its accepted run). Those that switch at nearly every step (`rast`, `mixture`'s RL rows,
`early` within its budget) gain nothing from drafts, and k falls to 1 for them; the others
(`forward`, `reverse`, the gates, `rl-replace`, `base-greedy`, `random`, `random-effective`)
switch at a few percent of positions, and most drafts are accepted whole.

Host syncs: one per draft step (the top-p window check of the draw), one per round for the
other models' truncations, one per round to retire and refill rows.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import fields, is_dataclass
from functools import partial
from typing import Any

import numpy as np
import torch
from torch import Tensor

from divscope.decoding.cache import new_cache
from divscope.decoding.decoder import DecodeConfig, Decoded, DecodeStats, decoded, delta_cosine
from divscope.decoding.policies import Policy, StepView, _rows
from divscope.decoding.randomness import Stream, inverse_cdf, uniforms
from divscope.decoding.request import Request
from divscope.errors import DivscopeError, warn
from divscope.models.compat import CACHE, cached
from divscope.models.head import OutputHead
from divscope.models.placement import on_own_gpus
from divscope.models.threads import concurrently
from divscope.oom import release_memory
from divscope.progress import Progress
from divscope.scoring.metrics import Truncated, truncate

DRAFT_LENGTHS: tuple[int, ...] = (1, 2, 4, 8)
"""The draft lengths k a round may take (`draft_length`)."""
ALONE_ROUND = 8
"""Steps per round when no row needs the other models (between two looks for finished rows)."""
PRIOR_BREAKS, PRIOR_POSITIONS = 1, 16
"""The prior of the break rate (`draft_length`): one break in 16 positions."""
COMPACT_AT = 1 / 4
"""A model's cache is compacted once its masked slots exceed this share of the longest row's
valid ones (and 16 slots)."""
MASKED_ATTENTION = ("sdpa", "eager")
"""Attention implementations that take the decoder's prebuilt 4-D masks."""
_OUTPUTS = ("tokens", "switched", "primary", "effective", "coupled", "js", "delta")
"""`_Unit`'s outputs, in `decoder.decoded`'s order."""


def speculative_memory(models: int) -> dict[str, float]:
    """What the memory plan adds for this decoder (`memory_plan.plan_decoding`'s `positions`
    and `slack`) when `models` models decode together: per row, the logits and statistics of a
    draft's positions for the primary and the verifying models (a lone model, as in `generate`,
    verifies nothing and holds one position's at a time), and the masked KV slots a cache may
    hold before it is compacted.

    >>> speculative_memory(2), speculative_memory(1)
    ({'positions': 17, 'slack': 0.25}, {'positions': 1, 'slack': 0.25})
    """
    positions = 2 * max(DRAFT_LENGTHS) + 1 if models > 1 else 1
    return {"positions": positions, "slack": COMPACT_AT}


def _attention(model: torch.nn.Module) -> str:
    """The model's attention implementation (transformers' name; eager where unset)."""
    return getattr(model.config, "_attn_implementation", None) or "eager"


def supports(models: Mapping[str, torch.nn.Module]) -> str | None:
    """None where every model can decode here, else why not (the reference decoder then runs):
    each needs plain full-attention layers (`cache.new_cache`) and an attention that takes a
    4-D mask (`MASKED_ATTENTION`)."""
    for name, model in models.items():
        if new_cache(model, 1, 1) is None:
            return f"{name}: some layers are not plain full attention"
        attention = _attention(model)
        if attention not in MASKED_ATTENTION:
            return f"{name}: attention {attention!r} takes no prebuilt 4-D mask"
    return None


def draft_length(breaks: int, positions: int, verifiers: int) -> int:
    """The k of `DRAFT_LENGTHS` that emits the most tokens per forward: a round costs k primary
    steps and one forward per verifying model (counted as one step each), and emits
    (1 − (1 − q)^k) / q tokens, q the rate at which drafts break (from `breaks` in `positions`
    verified, with the prior `PRIOR_BREAKS` in `PRIOR_POSITIONS`).

    >>> draft_length(0, 1000, 1), draft_length(200, 1000, 1), draft_length(900, 1000, 2)
    (8, 2, 1)
    """
    q = (breaks + PRIOR_BREAKS) / (positions + PRIOR_POSITIONS)

    def rate(k: int) -> float:
        return (1.0 - (1.0 - q) ** k) / q / (k + verifiers)

    return max(DRAFT_LENGTHS, key=rate)


def _column(value: Tensor) -> Tensor:
    """`[r]` as `[r, 1]`: one position's values as `_Unit._record` takes them."""
    return value[:, None]


def _stacked(parts: Sequence[Truncated]) -> Truncated | None:
    """The rows of `parts` one after the other, or None where their windows differ in width."""
    if len({part.ids.shape[1] for part in parts}) != 1:
        return None

    def cat(values: Sequence[Any]) -> Any:
        if is_dataclass(values[0]):
            kinds = fields(values[0])
            return type(values[0])(
                **{f.name: cat([getattr(v, f.name) for v in values]) for f in kinds}
            )
        return torch.cat(list(values))

    return cat(parts)


class _Model:
    """One model of the unit: its KV cache over the model's rows (every row of the primary;
    the rows that still need it of the others), the valid slots of each row, its output head.
    """

    def __init__(self, model, head: OutputHead, suppressed: Tensor, limit: int) -> None:
        self.model, self.head, self.suppressed, self.limit = model, head, suppressed, limit
        self.device = model.get_input_embeddings().weight.device
        self.eager = _attention(model) == "eager"
        self.dtype = model.get_input_embeddings().weight.dtype
        self.cache = new_cache(model, 1, limit)
        self.valid = torch.zeros(0, 0, dtype=torch.bool, device=self.device)  # [b, cursor]

    @property
    def rows(self) -> int:
        return self.valid.shape[0]

    def forward(self, ids: Tensor, positions: Tensor) -> Tensor:
        """Feed `ids` (`[b, q]`, at `positions`) to every row; `[b, q, V]` float32 logits on
        the head's device. The new slots count as valid until `reject`."""
        b, q = ids.shape
        cursor = self.valid.shape[1]
        causal = torch.ones(q, q, dtype=torch.bool, device=self.device).tril_()  # [q, q]
        mask = torch.cat(
            [self.valid[:, None, None, :].expand(b, 1, q, cursor), causal.expand(b, 1, q, q)],
            dim=-1,
        )  # [b, 1, q, cursor + q]
        if self.eager:  # eager attention adds its mask
            mask = torch.zeros(mask.shape, dtype=self.dtype, device=self.device).masked_fill_(
                ~mask, torch.finfo(self.dtype).min
            )
        out = self.model.get_decoder()(
            input_ids=ids.to(self.device),
            attention_mask=mask,
            position_ids=positions.to(self.device),
            use_cache=True,
            **{CACHE: self.cache},
        )
        self.cache = cached(out)
        fresh = torch.ones(b, q, dtype=torch.bool, device=self.device)
        self.valid = torch.cat([self.valid, fresh], dim=1)
        logits = self.head(out.last_hidden_state)  # [b, q, V]
        if self.suppressed.numel():
            logits[..., self.suppressed] = -torch.inf
        return logits

    def reject(self, kept: Tensor) -> None:
        """Mark the last `kept.shape[1]` slots of each row valid where `kept` (`[b, q]`)."""
        q = kept.shape[1]
        self.valid[:, -q:] &= kept.to(self.device)

    def select(self, rows: Tensor) -> None:
        """Keep `rows` (`[b']` indices) only."""
        rows = rows.to(self.device)
        self.valid = self.valid[rows]
        for layer in self.cache.layers:
            layer.batch_select_indices(rows)

    def prefill(self, prompts: Sequence[Sequence[int]], pad_id: int) -> None:
        """Append one row per prompt, its tokens but the last in the cache (the first round
        feeds the last: `_Unit.nxt`)."""
        width = max(len(p) - 1 for p in prompts)
        if not self.rows:  # start over: a fresh cache
            self.cache = new_cache(self.model, 1, self.limit)
            self.valid = self.valid.new_zeros(0, 0)
        elif width > self.valid.shape[1]:
            self.compact(width)  # room in front of the cursor for the longest prompt
        cursor = max(self.valid.shape[1], width)
        valid = torch.zeros(len(prompts), cursor, dtype=torch.bool)  # [n, cursor]
        if width == 0:
            for layer in self.cache.layers:
                layer.extend_rows(None, None, len(prompts))
            self._append(valid)
            return
        ids = torch.full((len(prompts), width), pad_id, dtype=torch.int64)  # [n, w]
        mask = torch.zeros(len(prompts), width, dtype=torch.int64)
        for i, prompt in enumerate(prompts):
            n = len(prompt) - 1
            if n:
                ids[i, width - n :] = torch.tensor(prompt[:-1])
                mask[i, width - n :] = 1
        positions = (mask.cumsum(-1) - 1).clamp_min(0)
        cache = new_cache(self.model, width, ALONE_ROUND * max(DRAFT_LENGTHS), self.limit)
        out = self.model.get_decoder()(
            input_ids=ids.to(self.device),
            attention_mask=mask.to(self.device),
            position_ids=positions.to(self.device),
            use_cache=True,
            **{CACHE: cache},
        )
        cache = cached(out)
        valid[:, cursor - width :] = mask.bool()
        if not self.rows:  # the new rows are the whole batch
            self.cache = cache
            self.valid = valid.to(self.device)
            return
        for layer, new in zip(self.cache.layers, cache.layers, strict=True):
            layer.extend_rows(new.keys, new.values, len(prompts))
        self._append(valid)

    def _append(self, valid: Tensor) -> None:
        self.valid = torch.cat([self.valid, valid.to(self.device)])

    def compact(self, size: int) -> None:
        """Move each row's valid slots (at most `size`) to the end of a `size`-slot cache, in
        order (attention does not depend on where a slot lies: positions are in the keys)."""
        counts = self.valid.sum(1)  # [b]
        order = torch.argsort(self.valid.to(torch.int8), dim=1, stable=True)  # invalid first
        index = order[:, -size:]  # [b, <= size]
        if size > index.shape[1]:  # widen: zero slots in front
            index = torch.cat([index.new_zeros(self.rows, size - index.shape[1]), index], dim=1)
        keep = torch.arange(size, device=self.device)[None, :] >= (size - counts)[:, None]
        for layer in self.cache.layers:
            layer.gather_slots(index, keep)
        self.valid = keep


class _Unit:
    """Every request of one `decode` call, decoded in refilled batches of up to `capacity` rows.

    Per-row tensors (`slot`, `t`, `pos`, `nxt`, ...) hold the batch's rows; the outputs
    (`tokens`, `switched`, `primary`, `effective`, `coupled`, `js`, `delta`) have one slot per
    row of the capacity: a request takes a free slot when it joins the batch, and its response
    is read from it (`decoder.decoded`) and the slot freed in the round it finishes (`run`
    yields it then). The outputs' memory is the batch's, whatever the number of requests.
    """

    def __init__(
        self, models: Mapping[str, torch.nn.Module], requests: Sequence[Request],
        limits: Sequence[int], policy: Policy, config: DecodeConfig, vocab: int,
        eos_ids: Sequence[int], pad_id: int, suppressed: Sequence[int], *, device: torch.device,
        capacity: int, stats: DecodeStats, too_large: Callable[[Request], str],
    ) -> None:  # fmt: skip
        self.policy, self.config, self.stats, self.too_large = policy, config, stats, too_large
        self.requests, self.limits, self.pad_id = requests, list(limits), pad_id
        self.vocab, self.suppressed, self.eos_ids = vocab, list(suppressed), list(eos_ids)
        self.source = dict(models)
        self.others = [name for name in models if name != policy.primary]
        self.concurrent = on_own_gpus({name: models[name] for name in self.others})
        self.width = max(self.limits) + max(DRAFT_LENGTHS)  # steps a draft can reach
        self.capacity = capacity
        self.device = device
        self.eos = torch.tensor(self.eos_ids, device=self.device)
        self.pconf = policy.primary_config(StepView({}, None, None, config.sampling))
        n, width, dev = capacity, self.width, self.device  # S slots
        self.tokens = torch.full((n, width), self.eos_ids[0], device=dev)  # [S, W]
        self.switched = torch.zeros(n, width, dtype=torch.bool, device=dev)  # [S, W]
        self.primary = torch.zeros(n, width, dtype=torch.int32, device=dev)  # [S, W]
        self.effective = torch.zeros(n, dtype=torch.int64, device=dev)  # [S]
        self.coupled = torch.zeros(n, dtype=torch.int64, device=dev)  # [S]
        self.js = torch.zeros(n, width, device=dev) if policy.records_js else None  # [S, W]
        self.delta = (
            torch.full((n, width), torch.nan, device=dev) if config.delta_alignment else None
        )  # [S, W]
        self.ready: list[tuple[int, Decoded]] = []  # responses read, not yet yielded
        self.queue = deque(sorted(range(len(requests)), key=lambda i: len(requests[i].prompt_ids)))
        self.breaks = self.positions = 0
        self.bar: Progress | None = None
        self._empty()

    def _empty(self) -> None:
        """No row: fresh caches, empty per-row tensors."""
        heads = {
            name: OutputHead(model, self.vocab, self.config.head_dtype, device=self.device)
            for name, model in self.source.items()
        }
        suppressed = torch.tensor(self.suppressed, dtype=torch.int64, device=self.device)
        longest = max(len(r.prompt_ids) for r in self.requests) + self.width
        self.models = {
            name: _Model(model, heads[name], suppressed, longest)
            for name, model in self.source.items()
        }
        dev, long = self.device, torch.int64
        self.slot = torch.zeros(0, dtype=long, device=dev)  # [b] output slot of each row
        self.t = torch.zeros(0, dtype=long, device=dev)  # [b] tokens emitted
        self.pos = torch.zeros(0, dtype=long, device=dev)  # [b] position of the next input
        self.nxt = torch.zeros(0, dtype=long, device=dev)  # [b] the next input: last emitted
        self.limit = torch.zeros(0, dtype=long, device=dev)  # [b]
        self.budget = torch.zeros(0, dtype=long, device=dev)  # [b]
        self.nsw = torch.zeros(0, dtype=long, device=dev)  # [b] switches so far
        self.u = {s: torch.zeros(0, self.width, dtype=torch.float64, device=dev) for s in Stream}
        self.state: dict[str, Tensor] = {}
        self.joining: list[int] = []  # requests being added to the batch
        self.host_req = np.zeros(0, dtype=np.int64)  # [b] request of each row, on the host
        self.host_slot = np.zeros(0, dtype=np.int64)  # [b] `slot` on the host
        self.free = deque(range(self.capacity))  # output slots of no row
        self.host_t = np.zeros(0, dtype=np.int64)
        self.host_prompt = np.zeros(0, dtype=np.int64)  # [b] prompt lengths
        self.verified = np.zeros(0, dtype=bool)  # [b] whether the row needs the other models

    @property
    def rows(self) -> int:
        return int(self.host_req.size)

    def run(self) -> Iterator[tuple[int, Decoded]]:
        """Decode every request; yield each response, with its request's index, in the round
        it finishes. Between yields, nothing runs in inference mode."""
        while True:
            try:
                while self.queue or self.rows:
                    with torch.inference_mode():
                        self._refill()
                        self._round()
                    yield from self.ready
                    self.ready = []
                return
            except torch.cuda.OutOfMemoryError:
                pass  # handled below, once the failed round's frames are gone
            with torch.inference_mode():
                self._restart()

    def _restart(self) -> None:
        """After running out of GPU memory: the finished responses are kept, the rows in flight
        go back to the front of the queue, and the batch capacity is halved."""
        read = {i for i, _ in self.ready}  # finished in the failed round, before it failed
        flight = [i for i in self.host_req.tolist() + self.joining if i not in read]
        self._empty()  # every slot free (a joining row's slot is cleared when it is taken)
        release_memory()
        if self.capacity == 1 and flight:
            raise DivscopeError(self.too_large(self.requests[flight[0]]))
        self.queue.extendleft(reversed(flight))
        self.capacity = max(self.capacity // 2, 1)
        warn(
            f"out of GPU memory decoding {len(flight):,} sequences: they restart from their "
            f"first token, {self.capacity:,} at a time from now on (the responses already "
            "finished are kept); lower --batch-size to avoid the recomputation."
        )

    def _needs_others(self, request: Request) -> bool:
        return bool(self.others) and (self.config.delta_alignment or request.budget != 0)

    def _refill(self) -> None:
        """Waiting requests take the free rows: their prompts prefilled, their rows appended."""
        free = self.capacity - self.rows
        if free <= 0 or not self.queue:
            return
        new = [self.queue.popleft() for _ in range(min(free, len(self.queue)))]
        self.joining = new  # in flight from here on (`_restart`)
        slots = [self.free.popleft() for _ in new]
        self._clear(slots)
        requests = [self.requests[i] for i in new]
        prompts = [r.prompt_ids for r in requests]
        self.models[self.policy.primary].prefill(prompts, self.pad_id)
        needs = np.array([self._needs_others(r) for r in requests], dtype=bool)
        if needs.any():
            verified = [p for p, need in zip(prompts, needs, strict=True) if need]
            for name in self.others:
                self.models[name].prefill(verified, self.pad_id)
        dev = self.device

        def add(old: Tensor, values) -> Tensor:
            return torch.cat([old, torch.as_tensor(values, dtype=old.dtype).to(dev)])

        self.slot = add(self.slot, slots)
        self.t = add(self.t, [0] * len(new))
        self.pos = add(self.pos, [len(p) - 1 for p in prompts])
        self.nxt = add(self.nxt, [p[-1] for p in prompts])
        self.limit = add(self.limit, [self.limits[i] for i in new])
        budgets = [r.budget if r.budget >= 0 else self.width for r in requests]
        self.budget = add(self.budget, budgets)
        self.nsw = add(self.nsw, [0] * len(new))
        ids = ([r.prompt_id for r in requests], [r.sample_id for r in requests])
        for stream in Stream:
            fresh = torch.from_numpy(uniforms(self.config.seed, *ids, self.width, stream))
            self.u[stream] = torch.cat([self.u[stream], fresh.to(dev)])
        u_response = torch.from_numpy(uniforms(self.config.seed, *ids, 1, Stream.RESPONSE))[:, 0]
        state = self.policy.init_state(u_response.to(dev), requests, self.width)
        self.state = {
            key: torch.cat([self.state[key], value.to(dev)]) if self.state else value.to(dev)
            for key, value in state.items()
        }
        self.host_req = np.concatenate([self.host_req, np.asarray(new, dtype=np.int64)])
        self.host_slot = np.concatenate([self.host_slot, np.asarray(slots, dtype=np.int64)])
        self.host_t = np.concatenate([self.host_t, np.zeros(len(new), dtype=np.int64)])
        lengths = np.asarray([len(p) for p in prompts], dtype=np.int64)
        self.host_prompt = np.concatenate([self.host_prompt, lengths])
        self.verified = np.concatenate([self.verified, needs])
        self.joining = []

    def _round(self) -> None:
        """k draft steps of the primary, one verifying forward of the others, the rows' tokens
        written, finished rows retired."""
        waiting = bool(self.queue)
        verified = np.flatnonzero(self.verified)
        k = (
            draft_length(self.breaks, self.positions, len(self.others))
            if verified.size
            else ALONE_ROUND
        )
        dev, b = self.device, self.rows
        primary = self.models[self.policy.primary]
        rows = torch.from_numpy(verified).to(dev)  # [r] the verified rows
        drafts = torch.empty(b, k, dtype=torch.int64, device=dev)  # [b, k]
        logits_r: list[Tensor] = []
        truncated_r = []
        ahead = torch.arange(k, device=dev)
        inputs = self.nxt
        for j in range(k):
            logits = primary.forward(inputs[:, None], (self.pos + j)[:, None])[:, 0]  # [b, V]
            truncated = truncate(logits, self.pconf)
            u = self.u[Stream.SAMPLE].gather(1, (self.t + j)[:, None])[:, 0]
            drafts[:, j] = inputs = inverse_cdf(truncated, u)
            if verified.size:
                logits_r.append(logits[rows])
                truncated_r.append(_rows(truncated, rows))
        self.stats.steps += k
        steps = self.t[:, None] + ahead  # [b, k]
        ends = torch.isin(drafts, self.eos) | (steps + 1 >= self.limit[:, None])  # [b, k]
        accepted = torch.where(ends.any(1), ends.to(torch.int8).argmax(1) + 1, k)  # [b]
        emitted = drafts
        if verified.size:
            got, emitted_r = self._verify(rows, verified, k, drafts[rows], logits_r, truncated_r)
            accepted = accepted.index_put((rows,), got)
            emitted = drafts.index_put((rows,), emitted_r)
        taken = ahead[None, :] < accepted[:, None]  # [b, k]
        index = (self.slot[:, None], steps)
        self.tokens[index] = torch.where(taken, emitted, self.tokens[index])
        primary.reject(taken)
        if verified.size:
            for name in self.others:
                self.models[name].reject(taken[rows])
        finished = (torch.isin(emitted, self.eos) & taken).any(1) | (
            self.t + accepted >= self.limit
        )
        self.nxt = emitted.gather(1, (accepted - 1)[:, None])[:, 0]
        self.t, self.pos = self.t + accepted, self.pos + accepted
        spent = (self.nsw >= self.budget) & (not self.config.delta_alignment)  # [b]
        host = torch.stack([finished.long(), accepted, spent.long()]).cpu().numpy()  # one sync
        self._retire(host[0].astype(bool), host[1], host[2].astype(bool), k, waiting, verified)

    def _retire(self, finished, accepted, spent, k: int, waiting: bool, verified) -> None:
        stats = self.stats
        stats.rounds += 1
        if self.bar is not None and finished.any():
            self.bar.update(int(finished.sum()))
        stats.emitted += int(accepted.sum())
        if waiting:
            stats.live += int(np.where(finished, accepted, k).sum())
            stats.capacity += self.capacity * k
        if verified.size:
            stats.verified_rounds += 1
            stats.drafted += k
            ran = accepted[verified]
            self.breaks += int(((ran < k) & ~finished[verified]).sum())
            self.positions += int(ran.sum())
        self.host_t = self.host_t + accepted
        leave = self.verified & (spent | finished)
        if finished.any():
            self._read(self.host_req[finished], self.host_slot[finished])
            keep = np.flatnonzero(~finished)
            keep_t = torch.from_numpy(keep).to(self.device)
            self.models[self.policy.primary].select(keep_t)
            for name in ("slot", "t", "pos", "nxt", "limit", "budget", "nsw"):
                setattr(self, name, getattr(self, name)[keep_t])
            self.u = {s: u[keep_t] for s, u in self.u.items()}
            self.state = self.policy.select_state(self.state, keep_t)
            self.host_req, self.host_t = self.host_req[keep], self.host_t[keep]
            self.host_prompt, self.host_slot = self.host_prompt[keep], self.host_slot[keep]
        if leave.any():
            stay = torch.from_numpy(np.flatnonzero(~leave[verified])).to(self.device)
            for name in self.others:
                self.models[name].select(stay)
        self.verified = (self.verified & ~leave)[~finished]
        self._compact()

    def _clear(self, slots: list[int]) -> None:
        """Empty output `slots` for the rows that take them."""
        index = torch.tensor(slots, dtype=torch.int64, device=self.device)
        self.tokens[index], self.switched[index], self.primary[index] = self.eos_ids[0], False, 0
        self.effective[index] = self.coupled[index] = 0
        if self.js is not None:
            self.js[index] = 0.0
        if self.delta is not None:
            self.delta[index] = torch.nan

    def _read(self, requests: np.ndarray, slots: np.ndarray) -> None:
        """The finished `requests`' responses, read from their output `slots` (then free)."""
        index = torch.from_numpy(slots).to(self.device)

        def take(values: Tensor | None) -> Tensor | None:
            return None if values is None else values[index]

        outputs = [take(getattr(self, name)) for name in _OUTPUTS]
        limits = [self.limits[i] for i in requests.tolist()]
        responses = decoded(*outputs, limits, self.eos_ids)  # type: ignore[arg-type]
        self.ready += zip(requests.tolist(), responses, strict=True)
        self.free.extend(slots.tolist())

    def _compact(self) -> None:
        """Move each model's rows' valid KV slots together where masked ones make up most of
        the cache (their attention costs what the valid ones do)."""
        if not self.rows:
            self._empty()
            return
        held = self.host_prompt - 1 + self.host_t  # [b] valid slots of each row
        for name, model in self.models.items():
            rows = held if name == self.policy.primary else held[self.verified]
            if not rows.size:
                continue
            most = int(rows.max())
            if model.valid.shape[1] - most > max(COMPACT_AT * most, 16):
                model.compact(most)

    def _verify_at_once(
        self, rows, verified, k, drafts, logits, truncated_r
    ) -> tuple[Tensor, Tensor]:
        """`_verify` for a `Policy.positionwise` policy: one proposal over the `k r` positions
        (rows j-major), then each row's budget and first break, as the position-by-position
        loop finds them."""
        policy, sampling, dev = self.policy, self.config.sampling, self.device
        r = rows.shape[0]
        flat = {m: value.transpose(0, 1).reshape(k * r, -1) for m, value in logits.items()}
        t = self.t[rows]
        steps = t[:, None] + torch.arange(k, device=dev)  # [r, k]
        host = torch.from_numpy(self.host_t[verified])
        host_steps = (host[None, :] + torch.arange(k)[:, None]).reshape(-1)

        def gather(stream: Stream) -> Tensor:
            return self.u[stream][rows].gather(1, steps).transpose(0, 1).reshape(-1)  # [k r]

        view = StepView(
            flat, gather(Stream.SAMPLE), gather(Stream.SWITCH), sampling, host_steps,
            gather(Stream.PRIMARY),
        )  # fmt: skip
        drafted = _stacked(truncated_r)  # the primary's, as the drafts drew from it
        if drafted is not None:
            view._truncated[(policy.primary, self.pconf)] = drafted
        view.truncate_together([m for m in policy.drawn if (m, sampling) not in view._truncated])
        state = {
            key: value[rows.to(value.device)].repeat(k, *([1] * (value.dim() - 1)))
            for key, value in self.state.items()
        }
        proposal = policy.propose(view, state)

        def grid(value: Tensor) -> Tensor:
            return value.reshape(k, r).transpose(0, 1)  # [r, k]

        token = grid(proposal.primary)
        switch = torch.zeros(r, k, dtype=torch.bool, device=dev)
        if proposal.want is not None:
            want = grid(proposal.want)
            left = self.budget[rows] - self.nsw[rows]  # [r]
            switch = want & (want.long().cumsum(1) <= left[:, None])
            token = torch.where(switch, grid(proposal.intervener), token)
        ahead = torch.arange(k, device=dev)
        stop = (
            (token != drafts) | torch.isin(token, self.eos) | (steps + 1 >= self.limit[rows, None])
        )  # [r, k]
        accepted = torch.where(stop.any(1), stop.to(torch.int8).argmax(1) + 1, k)  # [r]
        active = ahead[None, :] < accepted[:, None]  # [r, k]
        switched = self._record(view, proposal, rows, steps, active, switch & active, grid)
        self.nsw = self.nsw.index_put((rows,), self.nsw[rows] + switched)
        return accepted, token

    def _record(self, view, proposal, rows, steps, active, switch, shaped) -> Tensor:
        """Write the records of verified positions: `steps` (`[r, m]`) of the verified `rows`
        (`[r]`), those where `active` (`[r, m]`), `switch` (`[r, m]`) where the policy switched
        within the budget; `shaped` lays `view`'s `[r m]` values out as `[r, m]`. Returns the
        switches of each row (`[r]`)."""
        slot = self.slot[rows]
        where = (slot[:, None].expand_as(steps), steps)
        if proposal.want is not None:
            policy = self.policy
            independent = shaped(view.independent(policy.primary, policy.primary_config(view)))
            intervener, primary = shaped(proposal.intervener), shaped(proposal.primary)
            self.effective.index_add_(0, slot, (switch & (intervener != independent)).sum(1))
            self.coupled.index_add_(0, slot, (switch & (intervener != primary)).sum(1))
            self.switched[where] = torch.where(active, switch, self.switched[where])
            primary = primary.to(torch.int32)
            self.primary[where] = torch.where(active, primary, self.primary[where])
        if self.js is not None:
            self.js[where] = torch.where(active, shaped(view.js.float()), self.js[where])
        if self.delta is not None:
            cosine = shaped(delta_cosine(view.logits))
            self.delta[where] = torch.where(active, cosine, self.delta[where])
        return switch.sum(1)

    def _verify(self, rows, verified, k, drafts, logits_r, truncated_r) -> tuple[Tensor, Tensor]:
        """The policy's decisions at the k drafted positions of the verified `rows` (`[r]`):
        `[r]` tokens accepted, `[r, k]` tokens emitted (the drafts but at the last accepted)."""
        policy, sampling, dev = self.policy, self.config.sampling, self.device
        r = rows.shape[0]
        inputs = torch.cat([self.nxt[rows, None], drafts[:, : k - 1]], dim=1)  # [r, k]
        positions = self.pos[rows, None] + torch.arange(k, device=dev)  # [r, k]
        logits = {policy.primary: torch.stack(logits_r, dim=1)}  # [r, k, V]
        calls = [partial(self.models[name].forward, inputs, positions) for name in self.others]
        if self.concurrent:  # each on GPUs of its own
            logits.update(zip(self.others, concurrently(calls, inference=True), strict=True))
        else:
            logits.update((name, call()) for name, call in zip(self.others, calls, strict=True))
        self.stats.intervener_forwards += len(self.others)
        self.stats.intervener_tokens += len(self.others) * r * k
        if policy.positionwise():
            return self._verify_at_once(rows, verified, k, drafts, logits, truncated_r)
        # The sampled distributions of every position at once (one host sync), j-major rows.
        preset = self.pconf == sampling
        drawn = [m for m in policy.drawn if not (m == policy.primary and preset)]
        flat = [logits[m].transpose(0, 1).reshape(k * r, -1) for m in drawn]  # [k r, V]
        together = truncate(torch.cat(flat), sampling) if drawn else None
        t = self.t[rows]
        host_t = torch.from_numpy(self.host_t[verified])
        limit, budget, nsw = self.limit[rows], self.budget[rows], self.nsw[rows]
        u = {s: self.u[s][rows] for s in (Stream.SAMPLE, Stream.SWITCH, Stream.PRIMARY)}
        state = policy.select_state(self.state, rows)
        active = torch.ones(r, dtype=torch.bool, device=dev)
        accepted = torch.zeros(r, dtype=torch.int64, device=dev)
        emitted = drafts.clone()
        for j in range(k):
            step = (t + j)[:, None]  # [r, 1]
            view = StepView(
                {m: value[:, j] for m, value in logits.items()},
                u[Stream.SAMPLE].gather(1, step)[:, 0], u[Stream.SWITCH].gather(1, step)[:, 0],
                sampling, host_t + j, u[Stream.PRIMARY].gather(1, step)[:, 0],
            )  # fmt: skip
            view._truncated[(policy.primary, self.pconf)] = truncated_r[j]
            for i, m in enumerate(drawn):
                at = slice((i * k + j) * r, (i * k + j + 1) * r)
                view._truncated[(m, sampling)] = _rows(together, at)
            before = {key: value.clone() for key, value in state.items()}
            proposal = policy.propose(view, state)
            token = proposal.primary
            switch = torch.zeros_like(active)
            if proposal.want is not None:
                switch = proposal.want & (nsw < budget) & active
                token = torch.where(switch, proposal.intervener, token)
            nsw = nsw + self._record(
                view, proposal, rows, step, active[:, None], switch[:, None], _column
            )
            emitted[:, j] = token
            accepted += active
            for key, value in state.items():
                held = active.view(-1, *([1] * (value.dim() - 1)))
                state[key] = torch.where(held.to(value.device), value, before[key])
            active &= ~(
                (token != drafts[:, j]) | torch.isin(token, self.eos) | (step[:, 0] + 1 >= limit)
            )
        self.nsw = self.nsw.index_put((rows,), nsw)
        for key, value in state.items():
            self.state[key] = self.state[key].index_put((rows.to(value.device),), value)
        return accepted, emitted


def decode_unit(
    models: Mapping[str, torch.nn.Module], requests: Sequence[Request], limits: Sequence[int],
    policy: Policy, config: DecodeConfig, vocab: int, eos_ids: Sequence[int], pad_id: int,
    suppressed: Sequence[int], *, device: torch.device, stats: DecodeStats,
    too_large: Callable[[Request], str], progress: bool,
) -> Iterator[tuple[int, Decoded]]:  # fmt: skip
    """`lockstep.decode_stream` with the speculative decoder: every request in refilled
    batches of `config.batch_size` rows; each response with its request's index, in the round
    it finishes."""
    with torch.inference_mode():
        unit = _Unit(
            models, requests, limits, policy, config, vocab, eos_ids, pad_id, suppressed,
            device=device, capacity=config.batch_size, stats=stats, too_large=too_large,
        )  # fmt: skip
    with Progress(len(requests), desc=policy.name, unit="seq", enabled=progress) as bar:
        unit.bar = bar
        yield from unit.run()
