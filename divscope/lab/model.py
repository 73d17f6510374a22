"""The lab's model architecture: a tiny Llama causal LM, a standard transformers checkpoint.

Llama rather than Qwen2: with transformers 5, `AutoTokenizer` on a `qwen2` model directory
replaces the saved byte-level BPE `tokenizer.json` by a `Qwen2Tokenizer` built from its vocabulary
and merges, whose pre-tokenizer splits the lab's text differently (other ids for the same text).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast


@dataclass(frozen=True)
class ModelConfig:
    """Shape of the lab models (every model of a family shares it)."""

    hidden_size: int = 96
    """Width of the residual stream."""
    intermediate_size: int = 256
    """Width of the SwiGLU MLP."""
    num_hidden_layers: int = 4
    """Transformer blocks."""
    num_attention_heads: int = 4
    """Query heads (head size = hidden_size / num_attention_heads)."""
    num_key_value_heads: int = 2
    """Key/value heads (grouped-query attention)."""
    max_position_embeddings: int = 320
    """Longest prompt + response: prompts are at most about 55 tokens, responses are cut at 256."""


def new_model(
    config: ModelConfig, tokenizer: PreTrainedTokenizerFast, seed: int
) -> LlamaForCausalLM:
    """A freshly initialized model whose vocabulary is exactly the tokenizer's (no padded rows)."""
    torch.manual_seed(seed)
    hf_config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_hidden_layers,
        num_attention_heads=config.num_attention_heads,
        num_key_value_heads=config.num_key_value_heads,
        max_position_embeddings=config.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = LlamaForCausalLM(hf_config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model
