"""The decoder's preallocated KV cache: the same keys and values as transformers' own."""

from __future__ import annotations

import torch
from transformers import MistralConfig
from transformers.cache_utils import DynamicLayer

from divscope.decoding.cache import GrowingLayer, new_cache
from tests.tinymodels import make_model


def test_growing_layer_holds_what_a_dynamic_layer_holds():
    """Through growth past its first buffer and a row selection, keys and values are equal."""
    torch.manual_seed(0)
    growing, dynamic = GrowingLayer(capacity=3, limit=64), DynamicLayer()
    rows = 4
    for step, length in enumerate([5, 1, 1, 1, 4, 1]):
        keys, values = torch.randn(rows, 2, length, 8), torch.randn(rows, 2, length, 8)
        got = growing.update(keys, values)
        want = dynamic.update(keys, values)
        assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True)), step
        assert growing.get_seq_length() == dynamic.get_seq_length()
        if step == 2:
            kept = torch.tensor([0, 3])
            growing.batch_select_indices(kept)
            dynamic.batch_select_indices(kept)
            assert torch.equal(growing.keys, dynamic.keys)
            rows = len(kept)


def test_growth_stops_at_the_limit():
    layer = GrowingLayer(capacity=4, limit=6)
    layer.update(torch.zeros(1, 1, 4, 2), torch.zeros(1, 1, 4, 2))
    layer.update(torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 1, 2))
    assert layer._keys.shape[-2] == 6  # doubling would allocate 8


def test_only_plain_full_attention_models_get_the_preallocated_cache():
    assert new_cache(make_model("llama"), prompt=8, steps=16) is not None
    config = MistralConfig(
        vocab_size=48, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, sliding_window=4,
    )  # fmt: skip
    from transformers import AutoModelForCausalLM

    sliding = AutoModelForCausalLM.from_config(config)
    assert new_cache(sliding, prompt=8, steps=16) is None
