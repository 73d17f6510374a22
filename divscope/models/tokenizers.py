"""Tokenizers: loading a model's, its vocabulary size, and the ids that end a response."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from divscope.errors import DivscopeError
from divscope.models.names import ModelName


def load_tokenizer(name: str | ModelName):
    """Load the tokenizer stored with a model (a local directory or `ID[/SUBFOLDER][@REVISION]`,
    `divscope.models.names`): from the model's subfolder, else the repository's root (where
    a checkpoint folder of a training run keeps none of its own).

    Raises:
        DivscopeError: no tokenizer can be loaded from `name`.
    """
    from transformers import AutoTokenizer

    name = ModelName.of(name)
    try:
        return AutoTokenizer.from_pretrained(name.id, **name.options())
    # ImportError: transformers 4 builds a folder's missing fast tokenizer from a slow one,
    # which may need sentencepiece or protobuf
    except (OSError, ValueError, ImportError) as error:
        if name.subfolder:
            try:
                return AutoTokenizer.from_pretrained(name.id, revision=name.revision)
            except (OSError, ValueError, ImportError):
                pass
        raise DivscopeError(f"tokenizer {str(name)!r}: could not be loaded ({error}).") from error


def vocab_size(tokenizer) -> int:
    """The number of real tokens: logits of padded output-head rows beyond it are dropped."""
    return len(tokenizer)


def stop_ids(
    tokenizers: Mapping[str, Any],
    models: Mapping[str, Any],
    extra: Sequence[str] = (),
    *,
    vocab: int,
) -> list[int]:
    """Every id that ends a response: the union, over the models, of the tokenizer's EOS id and
    the generation config's EOS ids, then `extra`.

    An RL twin often stops at a token its base does not (`<|im_end|>` vs `<|endoftext|>`):
    under the union every policy stops where either model would. When the models' own sets
    differ, one warning says so.

    Args:
        tokenizers: each model's tokenizer by name.
        models: the loaded models by the same names (their `generation_config`).
        extra: `--stop` values: token ids, or strings that are one token of the first
            tokenizer (`<|im_end|>`).
        vocab: the shared vocabulary size; ids at or beyond it are ignored.

    Raises:
        DivscopeError: a `--stop` value that is not one token, or no stop token at all.
    """
    from divscope.errors import warn

    own: dict[str, list[int]] = {}
    for name, model in models.items():
        tokenizer = tokenizers[name]
        ids = [tokenizer.eos_token_id]
        config_ids = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        ids += config_ids if isinstance(config_ids, list) else [config_ids]
        own[name] = list(dict.fromkeys(i for i in ids if i is not None and 0 <= i < vocab))
    union = list(dict.fromkeys(i for ids in own.values() for i in ids))
    first = next(iter(tokenizers.values()))
    if len({tuple(sorted(ids)) for ids in own.values()}) > 1:
        listed = "; ".join(
            f"{name}: {', '.join(_id_text(first, i) for i in ids) or 'none'}"
            for name, ids in own.items()
        )
        warn(
            f"the models stop at different tokens ({listed}); every response stops at any of "
            f"them: {', '.join(_id_text(first, i) for i in union)}."
        )
    union += [i for i in (_stop_id(value, first, vocab) for value in extra) if i not in union]
    if not union:
        raise DivscopeError(
            "no stop token: no tokenizer or generation config defines an EOS id; pass --stop "
            "(e.g. --stop '<|im_end|>')."
        )
    return union


def _stop_id(value: str | int, tokenizer, vocab: int) -> int:
    """The id of one `--stop` value: an id, or a string that is one token."""
    text = str(value)
    if text.isdigit():
        if int(text) >= vocab:
            raise DivscopeError(f"--stop {text}: the vocabulary has ids 0..{vocab - 1}.")
        return int(text)
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(ids) != 1:
        raise DivscopeError(
            f"--stop {text!r} is {len(ids)} tokens ({ids}); give a single token such as "
            "'<|im_end|>', or a token id."
        )
    return ids[0]


def _id_text(tokenizer, token_id: int) -> str:
    return f"{token_id} {tokenizer.convert_ids_to_tokens(token_id)!r}"
