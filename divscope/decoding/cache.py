"""A preallocated KV cache for the lockstep decoder.

transformers' `DynamicCache` grows every layer by concatenation, so a response of T tokens
copies its whole cache T times. `GrowingLayer` writes each step into a buffer that doubles when
full, and hands attention a view of the filled part: the same keys and values, in amortized
constant time per step. Rows are dropped (`batch_select_indices`) by indexing the buffers;
the speculative decoder (`divscope.decoding.speculative`) also appends rows (`extend_rows`)
and moves each row's kept slots together (`gather_slots`).

The layer keeps its own `is_initialized` flag and takes the values optionally in
`lazy_initialization`, so that it is the same layer for transformers 4.56 and 5
(`divscope.models.compat`).
"""

from __future__ import annotations

import torch
from torch import Tensor
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer


class GrowingLayer(DynamicLayer):
    """A full-attention cache layer over a preallocated buffer `[B, H, capacity, D]`.

    Args:
        capacity: tokens to allocate at the first update (the buffer doubles when full).
        limit: the most tokens it will hold (doubling stops there).
    """

    def __init__(self, capacity: int, limit: int) -> None:
        super().__init__()
        self.capacity, self.limit = capacity, limit
        self.length = 0
        self.is_initialized = False

    def lazy_initialization(self, key_states: Tensor, value_states: Tensor | None = None) -> None:
        # transformers 4.x passes the keys only (its `Cache.early_initialization`)
        value_states = key_states if value_states is None else value_states
        self.device = key_states.device
        size = max(self.capacity, key_states.shape[-2])
        self._keys = key_states.new_empty(self._shape(key_states, size))
        self._values = value_states.new_empty(self._shape(value_states, size))
        self.is_initialized = True

    @staticmethod
    def _shape(states: Tensor, length: int) -> tuple[int, ...]:
        batch, heads, _, dim = states.shape
        return (batch, heads, length, dim)

    def update(
        self, key_states: Tensor, value_states: Tensor, *args, **kwargs
    ) -> tuple[Tensor, Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self.length + key_states.shape[-2]
        if end > self._keys.shape[-2]:
            size = max(end, min(2 * self._keys.shape[-2], self.limit))
            self._keys = self._grown(self._keys, size)
            self._values = self._grown(self._values, size)
        self._keys[:, :, self.length : end] = key_states
        self._values[:, :, self.length : end] = value_states
        self.length = end
        self.keys = self._keys[:, :, :end]  # [B, H, end, D] views
        self.values = self._values[:, :, :end]
        return self.keys, self.values

    def _grown(self, buffer: Tensor, size: int) -> Tensor:
        grown = buffer.new_empty(self._shape(buffer, size))
        grown[:, :, : self.length] = buffer[:, :, : self.length]
        return grown

    def batch_select_indices(self, indices: Tensor) -> None:
        if self.is_initialized:
            self._keys = self._selected(self._keys, indices)
            self._values = self._selected(self._values, indices)
            self.keys = self._keys[:, :, : self.length]
            self.values = self._values[:, :, : self.length]

    def _selected(self, buffer: Tensor, indices: Tensor) -> Tensor:
        """`buffer`'s rows `indices`, of which only the filled slots are copied."""
        kept = buffer.new_empty((indices.shape[0], *buffer.shape[1:]))
        kept[:, :, : self.length] = buffer[indices, :, : self.length]
        return kept

    def extend_rows(self, keys: Tensor | None, values: Tensor | None, rows: int) -> None:
        """Append `rows` rows whose keys and values (`[rows, H, w, D]`, w <= the filled length;
        None: none) fill their last w slots; their other slots are zeros (masked by the
        caller). A layer not yet written takes the next update's rows, so nothing is kept."""
        if not self.is_initialized:
            if keys is not None:
                raise ValueError("extend_rows: keys given to a cache layer not yet written")
            return
        width = 0 if keys is None else keys.shape[-2]
        old, end = self._keys.shape[0], self.length
        for name, new in (("_keys", keys), ("_values", values)):
            buffer = getattr(self, name)
            grown = buffer.new_empty((old + rows, *buffer.shape[1:]))  # [b + n, H, capacity, D]
            grown[:old, :, :end] = buffer[:, :, :end]  # the filled slots only
            grown[old:, :, : end - width] = 0.0
            if width:
                grown[old:, :, end - width : end] = new
            setattr(self, name, grown)
        self.keys = self._keys[:, :, :end]
        self.values = self._values[:, :, :end]

    def gather_slots(self, index: Tensor, keep: Tensor) -> None:
        """Rewrite every row's slots as `index` (`[B, W]` slot indices, per row) picks them; the
        slots where `keep` (`[B, W]` bool) is False are zeroed. The filled length becomes W."""
        if not self.is_initialized:
            return
        size = max(self._keys.shape[-2], index.shape[1])
        picked = index[:, None, :, None].to(self._keys.device)  # [B, 1, W, 1]
        zero = ~keep[:, None, :, None].to(self._keys.device)
        for name in ("_keys", "_values"):
            buffer = getattr(self, name)
            taken = buffer.gather(2, picked.expand(-1, buffer.shape[1], -1, buffer.shape[3]))
            grown = buffer.new_zeros(self._shape(buffer, size))
            grown[:, :, : index.shape[1]] = taken.masked_fill_(zero, 0.0)
            setattr(self, name, grown)
        self.length = index.shape[1]
        self.keys = self._keys[:, :, : self.length]
        self.values = self._values[:, :, : self.length]


INITIAL_STEPS = 512
"""Tokens after the prompt that a new cache has room for before it first doubles."""


def new_cache(
    model: torch.nn.Module, prompt: int, steps: int, limit: int | None = None
) -> Cache | None:
    """A cache of `GrowingLayer`s for `model`, for prompts of `prompt` tokens and up to `steps`
    more (room for `INITIAL_STEPS` of them at first; it doubles up to `limit`, default prompt +
    steps), or None where some layer is not plain full attention (sliding windows, linear
    attention): the model then makes its own cache."""
    config = model.config.get_text_config(decoder=True)
    try:
        layers = DynamicCache(config=config).layers
    except (TypeError, ValueError, AttributeError):
        return None
    if not layers or any(type(layer) is not DynamicLayer for layer in layers):
        return None
    capacity = prompt + min(steps, INITIAL_STEPS)
    limit = prompt + steps if limit is None else limit
    return Cache(layers=[GrowingLayer(capacity, limit) for _ in layers])
