"""The memory guard: how many rows, tokens and sequences a run may hold at once on each device.

A run's memory on a device is its weights plus what the work holds at its peak:

- scoring: the forward pass of one batch of `batch_tokens` padded tokens (one decoder layer's
  working set per token, `activation_bytes_per_token`), then the output head's `[rows, V]`
  float32 buffers of one chunk of `chunk_rows` positions (`SCORING_BUFFERS`), with the batch's
  final hidden states kept in between;
- decoding: each sequence's KV cache (`kv_bytes_per_token` x its longest prompt + response),
  the prefill of its prompt, and the step's `[rows, V]` float32 buffers (`DECODING_BUFFERS`).

`plan_scoring` and `plan_decoding` choose the values the user did not give so that this fits
the budget: `--max-memory` minus the weights, or on a GPU without it the free memory after
loading them, less a margin of `1 - SAFETY`. Where the models sit on several devices, each
device is planned and the smallest value taken. On the CPU without `--max-memory` they return
None, and the callers keep the CPU defaults (tuned for speed, not memory). The arithmetic takes
the models' configs and parameters only, so models built on the meta device plan as loaded
ones do (`bench/memory.py`).

>>> parse_memory("1.5GiB")
1610612736
>>> format_bytes(57_344)
'56 KiB'
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from divscope.errors import DivscopeError

SAFETY = 0.9
"""Share of a device's room (the budget minus the weights) that a plan fills; the rest covers
the allocator's fragmentation, kernels' workspaces and the small buffers not counted here."""
SCORING_BUFFERS = 32
"""float32 `[rows, V]` buffers of one scoring chunk at their peak, the chunk's two logits
included: `pair_stats` measured with every row redone by the exact full sort (sorted
probabilities and int64 ids per model, float64 cumulative sums of the nuclei, the truncated
JS's temporaries) at a temperature other than 1 peaks at 31.7 (22 at temperature 1); a chunk
whose rows the sorted windows all settle needs 8 (9 at another temperature)."""
DECODING_BUFFERS = 24
"""float32 `[rows, V]` buffers of one decoding step at their peak, the models' logits included:
measured for every policy, worst with two models whose rows all need the exact full sort
(`forward`, `gated`, `mixture`: 22 besides the two logits); 8 when the windows settle them."""
STEP_BYTES = 41
"""Bytes per sequence and decoding step outside the KV cache: the three float64 uniforms, the
int64 token, the bool switch flag, the int32 primary draw and the float32 delta cosine that
the decoder keeps for every step."""
MAX_CHUNK_ROWS = 1024
"""The most chunk rows a scoring run takes unless --chunk-rows says otherwise, whatever room
the memory plan (or the CPU's rule) leaves. The statistics of a chunk are per row, and 1,024
rows already give each of their kernels 1,024 x V elements (1.6e8 at V = 152,064): a GPU is
saturated, and the launches of a chunk's few hundred kernels are a small share of its time.
More rows only hold more memory, up to 32 float32 [rows, V] buffers at the peak
(`SCORING_BUFFERS`): 19 GiB at 1,024 rows and V = 152,064, where the cap was 8,192 rows and a
141 GB GPU planned 6,144 of them (111 GiB). Chosen, not measured: --chunk-rows overrides it."""
MAX_BATCH_TOKENS = 2**16
"""The most batch tokens planned: a 7B model's matrix products are compute-bound long before
(a cap, not a measured optimum), and a smaller batch reports progress more often."""
MAX_BATCH_SIZE = 256
"""The most sequences planned in one decoding batch (a cap, not a measured optimum)."""

_UNITS = {
    "": 1,
    "b": 1,
    **{f"{p}b": 1000**i for i, p in enumerate("kmgt", 1)},
    **{f"{p}ib": 1024**i for i, p in enumerate("kmgt", 1)},
    **{p: 1024**i for i, p in enumerate("kmgt", 1)},
}
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)\s*")


def parse_memory(text: str) -> int:
    """Bytes of a memory size: `70GiB`, `80GB`, `512MiB`, `1.5TiB`, or plain bytes.

    Binary units (KiB, MiB, GiB, TiB, and K, M, G, T as SLURM writes them) are powers of 1024,
    decimal ones (kB, MB, GB, TB) powers of 1000; case does not matter.

    >>> parse_memory("80GB"), parse_memory("70G"), parse_memory("4096")
    (80000000000, 75161927680, 4096)

    Raises:
        DivscopeError: not a positive size in one of those units (naming --max-memory).
    """
    match = _SIZE.fullmatch(text.lower())
    if match is None or match.group(2) not in _UNITS:
        raise DivscopeError(
            f"--max-memory {text!r}: give a size such as 70GiB, 80GB, 512MiB or a number of "
            "bytes (units: B, kB, MB, GB, TB, KiB, MiB, GiB, TiB)."
        )
    size = int(float(match.group(1)) * _UNITS[match.group(2)])
    if size < 1:
        raise DivscopeError(f"--max-memory {text!r}: give a size of at least one byte.")
    return size


def format_bytes(size: float) -> str:
    """A size in the largest binary unit that keeps it >= 1, with at most one decimal.

    >>> format_bytes(16_357_744_640), format_bytes(512)
    ('15.2 GiB', '512 B')
    """
    for unit, name in ((1024**4, "TiB"), (1024**3, "GiB"), (1024**2, "MiB"), (1024, "KiB")):
        if abs(size) >= unit:
            return f"{size / unit:.1f}".removesuffix(".0") + f" {name}"
    return f"{size:.0f} B"


# ---------------------------------------------------------------- the arithmetic of one model


def weight_bytes(model) -> int:
    """Bytes of a model's parameters (tied ones counted once), wherever they are: a model on
    the meta device counts as loaded."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def _text_config(model_or_config) -> Any:
    """The decoder's config of a model or of a config (multimodal ones hold it inside)."""
    config = getattr(model_or_config, "config", model_or_config)
    return config.get_text_config(decoder=True)


def _head_dim(config) -> int:
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def kv_bytes_per_token(model_or_config, dtype_bytes: int) -> int:
    """KV-cache bytes of one token: 2 (keys, values) x layers x KV heads x head dim x bytes.

    Every layer counts as full attention (a sliding-window layer holds less).

    >>> from transformers import Qwen2Config
    >>> kv_bytes_per_token(Qwen2Config(num_hidden_layers=28, hidden_size=3584,
    ...     num_attention_heads=28, num_key_value_heads=4), 2)  # Qwen2.5-7B in bf16: 56 KiB
    57344
    """
    config = _text_config(model_or_config)
    kv_heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    return 2 * config.num_hidden_layers * kv_heads * _head_dim(config) * dtype_bytes


def activation_bytes_per_token(model_or_config, dtype_bytes: int) -> int:
    """Peak bytes per token of one decoder layer's forward without a cache (layers run one
    after another, so this is the whole forward's working set besides the weights).

    The model, in elements of `dtype_bytes` for hidden size d, intermediate size I, query size
    q = heads x head dim and KV size k = KV heads x head dim: 4d (the residual stream, the
    layer's input, its normed copy and its output) plus the larger of the MLP's 3I (gate, its
    activation and up, then their product) and the attention's 5q + 2k (queries, keys, values,
    their rotated copies, keys and values repeated to every query head where the kernel does
    not group them, the output). Measured on the CPU for Qwen2 layers: the MLP term exactly
    (4d + 3I elements per token), the attention term up to 25% above. Attention scores are not
    counted (SDPA's fused kernels never hold the `[S, S]` matrix; the padding mask, one byte per
    token and position, is added by the planners), nor a mixture of experts' routing.
    """
    config = _text_config(model_or_config)
    hidden, heads = config.hidden_size, config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    query, kv = heads * _head_dim(config), kv_heads * _head_dim(config)
    mlp = 3 * (getattr(config, "intermediate_size", None) or 4 * hidden)
    return (4 * hidden + max(mlp, 5 * query + 2 * kv)) * dtype_bytes


def scoring_bytes_per_row(vocab: int) -> int:
    """Bytes of one scoring chunk's `[rows, V]` buffers per row (`SCORING_BUFFERS`)."""
    return SCORING_BUFFERS * 4 * vocab


def decoding_bytes_per_row(vocab: int) -> int:
    """Bytes of one decoding step's `[rows, V]` buffers per sequence (`DECODING_BUFFERS`)."""
    return DECODING_BUFFERS * 4 * vocab


@dataclass(frozen=True)
class _Model:
    """Where one model's memory goes, per token or row, and on which device."""

    weights: dict[str, int]
    """Parameter bytes by device."""
    layers: dict[str, float]
    """Share of the decoder layers by device (their KV cache and activations are there)."""
    head: str
    """Device of the output head (the final hidden states and the logits are there)."""
    kv: int
    """KV-cache bytes per token, all layers."""
    activation: int
    """Forward bytes per token (`activation_bytes_per_token`)."""
    hidden: int
    """Bytes per token of the final hidden states."""
    head_bytes: int
    """Bytes of the output head's rows (V x d) in the dtype it computes in."""
    head_copied: bool
    """The head computes from a float32 copy of its rows (`--head-dtype float32`)."""


def _describe(model, vocab: int, head_dtype: str | None, device: str | None) -> _Model:
    """The memory facts of `model`; `device` places all of it there (meta-device models)."""
    params = list(model.parameters())
    dtype_bytes = next((p.element_size() for p in params if p.is_floating_point()), 4)
    config = _text_config(model)

    def where(module) -> str:
        return device or str(next(module.parameters()).device)

    weights: dict[str, int] = {}
    for p in params:
        there = device or str(p.device)
        weights[there] = weights.get(there, 0) + p.numel() * p.element_size()
    layers = list(getattr(model.get_decoder(), "layers", ()))
    shares: dict[str, float] = {}
    for layer in layers:
        shares[where(layer)] = shares.get(where(layer), 0.0) + 1 / len(layers)
    head = model.get_output_embeddings()
    copied = head_dtype == "float32"
    return _Model(
        weights=weights,
        layers=shares or {where(model): 1.0},
        head=where(head),
        kv=kv_bytes_per_token(config, dtype_bytes),
        activation=activation_bytes_per_token(config, dtype_bytes),
        hidden=config.hidden_size * dtype_bytes,
        head_bytes=vocab * head.weight.shape[1] * (4 if copied else head.weight.element_size()),
        head_copied=copied,
    )


# ---------------------------------------------------------------- budgets and plans


@dataclass(frozen=True)
class DeviceBudget:
    """What one device offers a run."""

    device: str
    limit: int
    """Bytes the run may use there: --max-memory, or (a GPU without it) the weights plus the
    free memory once they are loaded."""
    weights: int
    """Bytes of the run's weights there."""
    given: bool
    """`limit` is --max-memory (else the free memory)."""

    @property
    def room(self) -> int:
        """Bytes a plan may fill: `SAFETY` x (limit - weights)."""
        return int(SAFETY * (self.limit - self.weights))

    def describe(self) -> str:
        """`cuda:0: 80 GiB limit, 30.5 GiB of weights` (`... free after ...` without a limit)."""
        if self.given:
            return (
                f"{self.device}: {format_bytes(self.limit)} limit, "
                f"{format_bytes(self.weights)} of weights"
            )
        return (
            f"{self.device}: {format_bytes(self.limit - self.weights)} free after "
            f"{format_bytes(self.weights)} of weights"
        )


@dataclass(frozen=True)
class MemoryPlan:
    """The values a run's memory allows, and what they hold; a value the user gave is kept.

    Scoring plans `chunk_rows` and `batch_tokens`, decoding `batch_size`; the others are None.
    """

    budgets: tuple[DeviceBudget, ...]
    """The devices planned."""
    chunk_rows: int | None = None
    batch_tokens: int | None = None
    batch_size: int | None = None
    chunk_bytes: int = 0
    """Bytes of one scoring chunk's `[rows, V]` buffers."""
    batch_bytes: int = 0
    """Bytes of one scoring batch's forward pass (the largest of its devices)."""
    kv_per_token: int = 0
    """KV-cache bytes per token of every model decoded together."""
    tokens: int = 0
    """Longest prompt + response of the decoded sequences."""
    given: frozenset[str] = field(default_factory=frozenset)
    """Names of the values the user gave (`chunk_rows`, ...)."""

    def format(self) -> str:
        """One line: the devices, then each value and the memory it takes.

        >>> print(MemoryPlan((DeviceBudget("cuda:0", 80 * 2**30, 15 * 2**30, True),),
        ...     batch_size=48, kv_per_token=57_344, tokens=8_192).format())
        memory plan (cuda:0: 80 GiB limit, 15 GiB of weights): --batch-size 48
        (KV cache 56 KiB/token x 8,192 tokens x 48 = 21 GiB)
        """
        parts = []
        if self.chunk_rows is not None:
            parts.append(
                f"--chunk-rows {self.chunk_rows:,} ({self._given('chunk_rows')}"
                f"{format_bytes(self.chunk_bytes)} of [rows, V] buffers)"
            )
        if self.batch_tokens is not None:
            parts.append(
                f"--batch-tokens {self.batch_tokens:,} ({self._given('batch_tokens')}"
                f"{format_bytes(self.batch_bytes)} of activations)"
            )
        if self.batch_size is not None:
            kv = self.kv_per_token * self.tokens * self.batch_size
            parts.append(
                f"--batch-size {self.batch_size:,} (KV cache {format_bytes(self.kv_per_token)}"
                f"/token x {self.tokens:,} tokens x {self.batch_size:,} = {format_bytes(kv)})"
            )
        devices = "; ".join(budget.describe() for budget in self.budgets)
        return f"memory plan ({devices}): {', '.join(parts)}"

    def _given(self, name: str) -> str:
        return "given, " if name in self.given else ""


def _described_budgets(
    models, vocab: int, head_dtype, placement, max_memory: int | None
) -> tuple[list[_Model], list[DeviceBudget]]:
    """Every model's arithmetic, in order, and the budgets of the devices holding them."""
    described = {name: _describe(model, vocab, head_dtype, (placement or {}).get(name))
                 for name, model in models.items()}  # fmt: skip
    budgets = _budgets(described, max_memory, placed=placement is not None)
    return list(described.values()), budgets


def _budgets(
    described: Mapping[str, _Model], max_memory: int | None, *, placed: bool
) -> list[DeviceBudget]:
    """The budget of every device that holds a model's weights and has one: `max_memory`, or
    for a GPU the free memory (always its cap there). `placed`: the devices are names given by
    the caller (meta-device models), with no memory of their own to read."""
    import torch

    weights: dict[str, int] = {}
    for model in described.values():
        for device, size in model.weights.items():
            weights[device] = weights.get(device, 0) + size
    budgets = []
    for device, size in weights.items():
        free = None
        if not placed and torch.device(device).type == "cuda":
            free_now, _ = torch.cuda.mem_get_info(device)
            # What torch's allocator holds unused is free to this process (e.g. an earlier
            # batch's cache), so that a second plan of the same run sees the same memory.
            free = (
                free_now + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
            )
        if max_memory is not None:
            limit = max_memory if free is None else min(max_memory, size + free)
            budgets.append(DeviceBudget(device, limit, size, given=limit == max_memory))
        elif free is not None:
            budgets.append(DeviceBudget(device, size + free, size, given=False))
    for budget in budgets:
        if budget.room <= 0:
            raise DivscopeError(
                f"{_limit(budget)} leaves no room on {budget.device}: the weights alone take "
                f"{format_bytes(budget.weights)} there. Raise --max-memory or free memory on "
                "the device, or spread the models over more devices (--device-map)."
            )
    return budgets


def _limit(budget: DeviceBudget) -> str:
    """What bounds a device's budget, for the errors: the option or the free memory."""
    if budget.given:
        return f"--max-memory {format_bytes(budget.limit)}"
    return f"the free memory ({format_bytes(budget.limit - budget.weights)}; no --max-memory)"


def _too_small(budget: DeviceBudget, what: str, need: float, remedy: str) -> DivscopeError:
    """The error of a budget too small for the least a run needs (`what`, `need` bytes)."""
    return DivscopeError(
        f"{_limit(budget)} does not fit {what} on {budget.device}: it needs "
        f"{format_bytes(need)}, and "
        f"{format_bytes(budget.room)} are left after {format_bytes(budget.weights)} of weights "
        f"and a {1 - SAFETY:.0%} margin. Raise --max-memory or free memory on the device, "
        f"{remedy}."
    )


def _round_down(value: int, step: int) -> int:
    """`value` down to a multiple of `step` when it is at least `step`: plans that differ by a
    little free memory then choose the same value."""
    return value - value % step if value >= step else value


def plan_scoring(
    models: Mapping[str, Any],
    vocab: int,
    *,
    max_memory: int | None,
    chunk_rows: int | None,
    batch_tokens: int | None,
    longest: int,
    head_dtype: str | None = None,
    placement: Mapping[str, str] | None = None,
) -> MemoryPlan | None:
    """The scoring engine's `chunk_rows` and `batch_tokens` for the memory of each device.

    Args:
        models: the base and the RL model, base first: the engine computes both models'
            logits, and the statistics, on its output head's device.
        vocab: the ids compared (V of the `[rows, V]` buffers).
        max_memory: bytes the run may use per device (--max-memory); None: a GPU's free
            memory, and no plan on the CPU.
        chunk_rows: the user's --chunk-rows, kept; None: planned.
        batch_tokens: the user's --batch-tokens, kept; None: planned.
        longest: the longest sequence (prompt + response - 1): it runs alone when it does not
            fit a batch, and sets the padding mask's width.
        head_dtype: `float32`: the heads' float32 copies count too (--head-dtype).
        placement: a device name per model holding all of it, for models built on the meta
            device (`bench/memory.py`); None: where their parameters are.

    Returns:
        The plan, or None where nothing is planned: both values given, or no budget (the CPU
        without `max_memory`).

    Raises:
        DivscopeError: the weights, one sequence's forward pass or one chunk row do not fit.
    """
    if chunk_rows is not None and batch_tokens is not None:
        return None
    listed, budgets = _described_budgets(models, vocab, head_dtype, placement, max_memory)
    if not budgets:
        return None
    stats_device = listed[0].head  # the engine computes every chunk on the base head's device
    tokens_chosen, forward_bytes = [], []
    rows = chunk_rows
    for budget in budgets:
        device, room = budget.device, budget.room
        # Per token of a batch: the forward of the largest layer here, a byte per position for
        # an attention mask (SDPA builds none for the engine's right-padded batches, an eager
        # attention does), and the final hidden states the batch keeps until its chunks are done.
        kept = sum(m.hidden for m in listed if m.head == device)
        here = [m.activation for m in listed if device in m.layers]
        forward = max(here, default=0) + longest + kept
        per_row = 0
        if device == stats_device:
            # Each head computes there from its own rows, or from a copy of them (another
            # device's head, or a float32 one).
            room -= sum(m.head_bytes for m in listed if m.head_copied or m.head != device)
            per_row = scoring_bytes_per_row(vocab)
        if longest * forward > room:
            raise _too_small(budget, f"one sequence of {longest:,} tokens", longest * forward,
                             "or score shorter trajectories")  # fmt: skip
        tokens = batch_tokens
        if tokens is None:
            tokens = room // forward
            if chunk_rows is not None and per_row:
                tokens = min(tokens, (room - chunk_rows * per_row) // kept)
            tokens = max(_round_down(min(tokens, MAX_BATCH_TOKENS), 1024), longest)
        tokens_chosen.append(tokens)
        forward_bytes.append(max(tokens, longest) * forward)
        if not per_row:
            continue
        left = room - max(tokens, longest) * kept
        if left < per_row * (chunk_rows or 1):
            raise _too_small(budget, f"{chunk_rows or 1:,} output-head row(s) next to the "
                             f"hidden states of {max(tokens, longest):,} batch tokens",
                             room - left + per_row * (chunk_rows or 1),
                             "or lower --batch-tokens or --chunk-rows")  # fmt: skip
        if rows is None:
            rows = _round_down(min(left // per_row, MAX_CHUNK_ROWS), 64)
    return MemoryPlan(
        tuple(budgets),
        chunk_rows=rows,
        batch_tokens=min(tokens_chosen),
        chunk_bytes=(rows or 0) * scoring_bytes_per_row(vocab),
        batch_bytes=max(forward_bytes),
        given=frozenset(
            name
            for name, value in (("chunk_rows", chunk_rows), ("batch_tokens", batch_tokens))
            if value is not None
        ),
    )


def plan_decoding(
    models: Mapping[str, Any],
    vocab: int,
    *,
    max_memory: int | None,
    longest: int,
    prompt: int,
    batch_size: int | None,
    head_dtype: str | None = None,
    placement: Mapping[str, str] | None = None,
    positions: int = 1,
    slack: float = 0.0,
) -> MemoryPlan | None:
    """The lockstep decoder's `batch_size` for the memory of each device (any size, not a
    multiple of 8: the speculative decoder keeps its rows filled).

    Args:
        models: every model decoded together, the base model first: the decoder computes
            every model's logits, and the step's statistics, on its output head's device.
        vocab: the shared vocabulary (V of the `[rows, V]` buffers).
        max_memory: bytes the run may use per device (--max-memory); None: a GPU's free
            memory, and no plan on the CPU.
        longest: the longest prompt + response (its length cap): the KV cache of a sequence.
        prompt: the longest prompt: the prefill's activations and padding mask.
        batch_size: the user's --batch-size, kept (then nothing is planned); None: planned.
        head_dtype: `float32`: the heads' float32 copies count too (--head-dtype).
        placement: a device name per model holding all of it (meta-device models); None:
            where their parameters are.
        positions: positions per row whose logits and statistics are held at once (the
            speculative decoder's longest draft, plus the step's).
        slack: the share of masked slots a KV cache may hold besides its valid ones (the
            speculative decoder's discarded drafts and refilled rows).

    Returns:
        The plan, or None where nothing is planned (`batch_size` given, or the CPU without
        `max_memory`).

    Raises:
        DivscopeError: the weights, or one sequence, do not fit.
    """
    if batch_size is not None:
        return None
    listed, budgets = _described_budgets(models, vocab, head_dtype, placement, max_memory)
    if not budgets:
        return None
    stats_device = listed[0].head  # the decoder computes every model's logits there
    sizes = []
    for budget in budgets:
        device, room = budget.device, budget.room
        here = [m for m in listed if device in m.layers]
        kv = sum(m.kv * m.layers[device] for m in here)
        # The prefill (its activations and padding mask) comes before the steps' buffers.
        prefill = prompt * (max((m.activation for m in here), default=0) + prompt)
        steps = 0
        if device == stats_device:
            # Each head computes there from its own rows or a copy of them (another device's
            # head, or a float32 one); per step, the logits and the statistics of every row.
            room -= sum(m.head_bytes for m in listed if m.head_copied or m.head != device)
            steps = positions * decoding_bytes_per_row(vocab) + (longest - prompt) * STEP_BYTES
        per_row = math.ceil(longest * (1.0 + slack) * kv + max(prefill, steps))
        if per_row > room:
            raise _too_small(budget, f"one sequence of {longest:,} tokens", per_row,
                             "or lower --max-new-tokens")  # fmt: skip
        sizes.append(min(room // per_row, MAX_BATCH_SIZE))
    return MemoryPlan(
        tuple(budgets),
        batch_size=min(sizes),
        kv_per_token=sum(m.kv for m in listed),
        tokens=longest,
    )


_ANNOUNCED: set[str] = set()


def announce(plan: MemoryPlan | None, *, enabled: bool = True) -> None:
    """Print `plan` as one `note:` line on stderr, once per process: a run that plans again
    (each call of the decoder) and finds the same plan prints nothing more."""
    from divscope.progress import note

    if plan is None or not enabled:
        return
    line = plan.format()
    if line not in _ANNOUNCED:
        _ANNOUNCED.add(line)
        note(line)
