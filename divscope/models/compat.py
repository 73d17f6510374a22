"""What differs between the transformers releases divscope supports (4.56.2 to 5.x): found once,
here, by looking at what the installed release has, never by comparing version numbers.

- The KV cache is a decoder's `cache=` argument and its output's `cache` field from
  transformers 5.24; before, both are `past_key_values` (`CACHE`, `cached`).
- A cache layer's `lazy_initialization` takes the keys and the values from transformers 5,
  the keys only in 4.x, and 4.x layers have no `is_initialized` flag: `divscope.decoding.cache`
  writes its layer so that either calls it.

Everything else divscope uses is the same in every supported release: `Cache(layers=...)`,
`DynamicCache(config=...)`, `DynamicLayer`, `config.get_text_config(decoder=True)`,
`from_pretrained(dtype=...)` and `PreTrainedTokenizerFast` (on transformers 5 the name of
`TokenizersBackend`; tokenizers are saved under the older name, which every release loads:
`divscope.lab.tokenizer.save_tokenizer`).
"""

from __future__ import annotations

from typing import Any

from transformers.modeling_outputs import BaseModelOutputWithPast

CACHE = "cache" if "cache" in BaseModelOutputWithPast.__dataclass_fields__ else "past_key_values"
"""The name of a decoder's KV-cache argument, and of the field of its output that holds the
updated cache: `cache` (transformers ≥ 5.24) or `past_key_values` (earlier).

>>> CACHE in ("cache", "past_key_values")
True
"""


def cached(output: Any) -> Any:
    """The KV cache a decoder's forward pass returned (`use_cache=True`).

    Args:
        output: the output of a transformers decoder or causal LM.

    Returns:
        Its `cache` (transformers ≥ 5.24) or `past_key_values` field.

    >>> cached(BaseModelOutputWithPast(**{CACHE: "the cache"}))
    'the cache'
    """
    return getattr(output, CACHE)
