"""The decoders' shared parts: their settings (`DecodeConfig`), what they return (one `Decoded`
per response, read from either decoder's per-position outputs by `decoded`) and count
(`DecodeStats`), and the per-step record of `--delta-alignment` (`delta_cosine`). The decoders:
`lockstep` (the reference, and `decode`, which runs either) and `speculative`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated

import numpy as np
import torch
from torch import Tensor

from divscope.defaults import SEED
from divscope.errors import DivscopeError
from divscope.memory_plan import parse_memory
from divscope.models.head import check_head_dtype
from divscope.params import LIBRARY_ONLY, Chat, DecoderName, Flag, check_decoder
from divscope.scoring.metrics import StatsConfig


@dataclass(frozen=True)
class DecodeConfig:
    """How the lockstep decoder samples.

    >>> DecodeConfig(StatsConfig(top_p=0.9), max_new_tokens=64).sampling.top_p
    0.9
    """

    sampling: StatsConfig = StatsConfig()
    """Top-p, temperature and window of the sampled distributions, and of the per-step JS
    (--top-p, --temperature): the run's sampling, its one home; a policy that samples at its
    own (`rl-replace:top_p=0.95`) says so in its spec."""
    max_new_tokens: Annotated[int | None, Flag(min=1)] = None
    """Longest response in tokens; longer ones are cut there. Default: 8000, capped prompt by
    prompt by the models' context (the cap is printed)."""
    seed: int = SEED
    """Seed of the sampling (the coupled uniforms); the same seed, the same output."""
    batch_size: Annotated[int | None, Flag(min=1)] = None
    """Sequences decoded together. Default: as many as fit --max-memory (the plan is printed;
    `memory_plan.plan_decoding`); on the CPU without it, 32."""
    max_memory: Annotated[int | None, Flag(parse=parse_memory, metavar="SIZE")] = None
    """Memory the run may use per device, weights included, e.g. 70GiB: the budget of a
    --batch-size left out (the plan is printed). Default: the free memory of each GPU once the
    models are loaded; on the CPU, no plan."""
    head_dtype: str | None = None
    """float32: compute the output head in float32 from a float32 copy of its weights (fewer
    exact ties among bf16 logits; costs 4 bytes x vocabulary x hidden size per model, e.g.
    2.2 GB for a 7B Qwen). Default: the weights' dtype."""
    stop: tuple[str, ...] = ()
    """Another token that ends a response, besides every model's EOS tokens (tokenizer and
    generation config): a token id or a string that is one token, e.g. '<|im_end|>' (repeat
    for several)."""
    chat: Chat = Chat()
    """The chat template and a system prompt, applied with the base tokenizer (a `messages`
    column is always templated)."""
    drop_finished: Annotated[bool, LIBRARY_ONLY] = True
    """The reference decoder: drop finished rows from the batch and the caches; False keeps
    them to the end (same tokens, slower: for tests and benchmarks). The speculative decoder
    always replaces them."""
    decoder: DecoderName = "speculative"
    """speculative: the primary model drafts a few tokens, the other models check them in one
    forward, and rows finished or out of budget make room for waiting ones (the same tokens,
    fewer forwards: docs/contracts.md, "The speculative decoder"); reference: every model
    steps every token of every row, batch by batch (the definition the other is tested
    against)."""
    delta_alignment: bool = False
    """Record per token the cosine between (rast-rl - rast-base) and (rl - base) logits
    (delta_cosine); needs --base, --rl, --rast-base and --rast-rl, and every policy then
    decodes with all four (`DELTA_MODELS`; the tokens do not change)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "stop", tuple(self.stop))
        if self.max_new_tokens is not None and self.max_new_tokens < 1:
            raise DivscopeError(f"--max-new-tokens must be >= 1, got {self.max_new_tokens}.")
        if self.batch_size is not None and self.batch_size < 1:
            raise DivscopeError(f"--batch-size must be >= 1, got {self.batch_size}.")
        check_head_dtype(self.head_dtype)
        check_decoder(self.decoder)
        if self.max_memory is not None and self.max_memory < 1:
            raise DivscopeError(f"--max-memory must be >= 1 byte, got {self.max_memory}.")


@dataclass(frozen=True)
class Decoded:
    """One decoded response and its interventions."""

    response_ids: list[int]
    """Emitted tokens, the stop token included when the response finished."""
    finished: bool
    """Ended with a stop token (not at the length cap)."""
    n_switches: int
    """Steps where the policy switched to the intervener (within the budget)."""
    n_effective: int
    """Switches whose emitted token differs from an independent draw of the primary model
    (same distribution, `Policy.primary_config`; uniform of `Stream.PRIMARY`): the papers'
    count of effective switches, whose separately sampled models make identity swaps at the
    rate of independent draws."""
    n_effective_coupled: int
    """Switches whose emitted token differs from the primary model's coupled draw
    (`switch_primary_ids`)."""
    switch_positions: list[int]
    """The response positions of the switches, ascending."""
    switch_primary_ids: list[int]
    """At each switch position, the token the primary model drew with the step's uniform
    (`Proposal.primary`: what it would have emitted); the emitted token is `response_ids`'."""
    switch_js: list[float] | None = None
    """For policies that record it (`Policy.records_js`: `forward`, `reverse`), the step's
    online `js` (base vs RL on the mixed prefix) at each switch position; else None."""
    delta_cosine: list[float | None] | None = None
    """With `delta_alignment`, per response position t, `delta_cosine` of the logits that
    predicted token t (None where it is NaN: a zero difference); else None."""


@dataclass
class DecodeStats:
    """What a decode did, counted (`decode(stats=...)`; `bench/decode.py` prints it). Both
    decoders count every field but the draft's."""

    steps: int = 0
    """Forward calls of the primary model: decoding steps, every batch."""
    emitted: int = 0
    """Tokens emitted, every response."""
    intervener_forwards: int = 0
    """Forward calls of the other models (the intervener; RAST's small pair)."""
    intervener_tokens: int = 0
    """Row-positions those forwards computed."""
    live: int = 0
    """Row-steps of rows that had not finished, while requests waited for a row."""
    capacity: int = 0
    """Row-steps of the batch's capacity, while requests waited for a row."""
    rounds: int = 0
    """Speculative rounds (the reference: steps)."""
    verified_rounds: int = 0
    """Rounds in which the other models checked a draft."""
    drafted: int = 0
    """Draft lengths k of those rounds, summed."""

    @property
    def occupancy(self) -> float:
        """Mean live rows per step over the batch capacity, while requests waited (1.0 when
        none ever waited)."""
        return self.live / self.capacity if self.capacity else 1.0

    @property
    def draft(self) -> float:
        """Mean draft length k of the verified rounds (0.0 without one)."""
        return self.drafted / self.verified_rounds if self.verified_rounds else 0.0


def delta_cosine(logits: Mapping[str, Tensor]) -> Tensor:
    """`[B]` per row, the cosine over the vocabulary between the small pair's logit difference
    (`rast_rl − rast_base`) and the large pair's (`rl − base`), in float32; ids whose logit is
    −inf in any of the four models are left out, and a row where a difference is zero on every
    id left is NaN.

    Args:
        logits: `[B, V]` next-token logits of the models of `DELTA_MODELS`, on one device.

    >>> rows = {"base": [[0.0, 0.0, -torch.inf]], "rl": [[1.0, 0.0, 0.0]],
    ...         "rast_base": [[0.0, 1.0, 0.0]], "rast_rl": [[2.0, 1.0, 5.0]]}
    >>> delta_cosine({k: torch.tensor(v) for k, v in rows.items()}).tolist()
    [1.0]
    """
    small = (logits["rast_rl"] - logits["rast_base"]).float()  # [B, V]
    large = (logits["rl"] - logits["base"]).float()  # [B, V]
    dropped = ~(small.isfinite() & large.isfinite())  # an id −inf in some model: inf or nan
    small, large = small.masked_fill_(dropped, 0.0), large.masked_fill_(dropped, 0.0)
    dot = (small * large).sum(-1)  # [B]
    return dot / (torch.linalg.vector_norm(small, dim=-1) * torch.linalg.vector_norm(large, dim=-1))


def decoded(
    tokens: Tensor, switched: Tensor, primary: Tensor, effective: Tensor, coupled: Tensor,
    js: Tensor | None, delta: Tensor | None, limits: Sequence[int], eos_ids: Sequence[int],
) -> list[Decoded]:  # fmt: skip
    """One `Decoded` per row of a decoder's outputs (`[N, T]` per position, `[N]` counts): each
    response cut after its first stop token or at its limit.

    Args:
        tokens: the emitted tokens.
        switched: where the policy switched.
        primary: the primary's coupled draw at each position.
        effective: `n_effective` of each response.
        coupled: `n_effective_coupled` of each response.
        js: the online JS at each position, or None.
        delta: `delta_cosine` at each position, or None.
        limits: each response's length cap.
        eos_ids: the stop tokens.
    """
    tokens_, switched_ = tokens.cpu().numpy(), switched.cpu().numpy()  # [N, T]
    primary_ = primary.cpu().numpy()  # [N, T]
    counts = torch.stack([effective, coupled], dim=1).tolist()  # [N, 2]
    delta_ = delta.cpu().numpy() if delta is not None else None  # [N, T]
    js_ = js.cpu().numpy() if js is not None else None  # [N, T]
    eos_ids = list(eos_ids)
    out = []
    for i, (row, switches, (n_effective, n_coupled), limit) in enumerate(
        zip(tokens_, switched_, counts, limits, strict=True)
    ):
        ends = np.flatnonzero(np.isin(row[:limit], eos_ids))
        length = int(ends[0]) + 1 if ends.size else limit
        positions = np.flatnonzero(switches[:length])
        out.append(
            Decoded(
                response_ids=row[:length].tolist(),
                finished=bool(ends.size),
                n_switches=int(positions.size),
                n_effective=int(n_effective),
                n_effective_coupled=int(n_coupled),
                switch_positions=positions.tolist(),
                switch_primary_ids=primary_[i, positions].tolist(),
                switch_js=js_[i, positions].tolist() if js_ is not None else None,
                delta_cosine=_nan_to_none(delta_[i, :length]) if delta_ is not None else None,
            )
        )
    return out


def _nan_to_none(values: np.ndarray) -> list[float | None]:
    """`values` as a list, NaN as None (null in the results)."""
    return [None if math.isnan(value) else value for value in values.tolist()]
