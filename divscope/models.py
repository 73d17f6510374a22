"""Loading models and tokenizers, and checking that two models can be compared token by token.

A model is a local directory or a hub id, loaded through `AutoModelForCausalLM`; weights are
never downloaded by the tests (they use the committed lab models and tiny models built in the
test), but the hub path is the one users run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from divscope.errors import DivscopeError

DTYPES: tuple[str, ...] = ("auto", "float32", "bfloat16", "float16")


def resolve_device(device: str = "auto") -> str:
    """`auto` → `cuda` when a GPU is visible, else `cpu`; other values are checked and kept.

    Raises:
        DivscopeError: an unknown device string or a CUDA device that is not available.
    """
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        return device
    if device == "cuda" or device.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise DivscopeError(
                f"--device {device}: no CUDA device is available; use --device cpu."
            )
        index = device.partition(":")[2]
        if index and (not index.isdigit() or int(index) >= torch.cuda.device_count()):
            raise DivscopeError(
                f"--device {device}: there are {torch.cuda.device_count()} CUDA device(s)."
            )
        return device
    raise DivscopeError(f"--device {device!r}: use auto, cpu, cuda or cuda:N.")


def resolve_dtype(dtype: str, device: str, checkpoint_dtype: Any = None):
    """The torch dtype to load weights in.

    `auto` means float32 on the CPU (half precision matmuls are slow there and the statistics
    are computed in float32 anyway) and the checkpoint's own dtype on a GPU (bfloat16 when the
    checkpoint says float32 or nothing).
    """
    import torch

    if dtype not in DTYPES:
        raise DivscopeError(f"--dtype {dtype!r}: use one of {', '.join(DTYPES)}.")
    if dtype != "auto":
        return getattr(torch, dtype)
    if not device.startswith("cuda"):
        return torch.float32
    if isinstance(checkpoint_dtype, str):
        checkpoint_dtype = getattr(torch, checkpoint_dtype, None)
    if checkpoint_dtype in (torch.bfloat16, torch.float16):
        return checkpoint_dtype
    return torch.bfloat16


def load_model(
    name_or_path: str,
    *,
    dtype: str = "auto",
    device: str = "auto",
    device_map: str | None = None,
    revision: str | None = None,
):
    """Load a causal LM in eval mode.

    Args:
        name_or_path: a local directory with `config.json` or a hub id.
        dtype: `auto`, `float32`, `bfloat16` or `float16` (see `resolve_dtype`).
        device: `auto`, `cpu`, `cuda` or `cuda:N`; ignored when `device_map` is given.
        device_map: passed to `from_pretrained` (e.g. `auto`) for models larger than one GPU.
        revision: a hub branch, tag or commit.

    Raises:
        DivscopeError: the model cannot be found or loaded.
    """
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.utils import logging

    from divscope.progress import is_terminal

    if not is_terminal():  # its "Loading weights" bar would redraw line after line into the log
        logging.disable_progress_bar()
    device = resolve_device(device) if device_map is None else device
    try:
        config = AutoConfig.from_pretrained(name_or_path, revision=revision)
    except (OSError, ValueError) as error:
        raise DivscopeError(
            f"model {name_or_path!r}: could not load its config ({error}). Give a local directory "
            "holding config.json or a hub id (hub ids need network access or a local HF cache)."
        ) from error
    placement = device if device_map is None else "cuda"
    torch_dtype = resolve_dtype(dtype, placement, _config_dtype(config))
    try:
        model = AutoModelForCausalLM.from_pretrained(
            name_or_path, revision=revision, dtype=torch_dtype, device_map=device_map
        )
    except (OSError, ValueError) as error:
        raise DivscopeError(f"model {name_or_path!r}: could not load weights ({error}).") from error
    if device_map is None:
        model = model.to(device)
    return model.eval()


def _config_dtype(config) -> Any:
    return getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)


def load_tokenizer(name_or_path: str, revision: str | None = None):
    """Load the tokenizer stored with a model (local directory or hub id).

    Raises:
        DivscopeError: no tokenizer can be loaded from `name_or_path`.
    """
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(name_or_path, revision=revision)
    except (OSError, ValueError) as error:
        raise DivscopeError(
            f"tokenizer {name_or_path!r}: could not be loaded ({error})."
        ) from error


def vocab_size(tokenizer) -> int:
    """The number of real tokens: logits of padded output-head rows beyond it are dropped."""
    return len(tokenizer)


def check_same_tokenizer(tokenizer_a, tokenizer_b, names: tuple[str, str] = ("base", "rl")) -> None:
    """Raise unless both tokenizers map the same tokens to the same ids.

    Raises:
        DivscopeError: naming the first id whose token differs (or the differing sizes).
    """
    tokens_a = _tokens_by_id(tokenizer_a)
    tokens_b = _tokens_by_id(tokenizer_b)
    for token_id in range(min(len(tokens_a), len(tokens_b))):
        if tokens_a[token_id] != tokens_b[token_id]:
            raise DivscopeError(
                f"the {names[0]} and {names[1]} tokenizers differ: token id {token_id} is "
                f"{tokens_a[token_id]!r} for {names[0]} but {tokens_b[token_id]!r} for {names[1]}. "
                "divscope compares distributions over one shared vocabulary; score models that "
                "share a tokenizer."
            )
    if len(tokens_a) != len(tokens_b):
        raise DivscopeError(
            f"the {names[0]} and {names[1]} tokenizers differ in size: {len(tokens_a)} vs "
            f"{len(tokens_b)} tokens (the first {min(len(tokens_a), len(tokens_b))} agree)."
        )


def _tokens_by_id(tokenizer) -> list[str | None]:
    tokens: list[str | None] = [None] * len(tokenizer)
    for token, token_id in tokenizer.get_vocab().items():
        if 0 <= token_id < len(tokens):
            tokens[token_id] = token
    return tokens


def eos_ids(tokenizer, model) -> list[int]:
    """The tokenizer's EOS id first, then any other EOS ids of the model's generation config."""
    ids = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
    config = getattr(model, "generation_config", None)
    extra = getattr(config, "eos_token_id", None)
    for token_id in extra if isinstance(extra, list) else [extra]:
        if token_id is not None and token_id not in ids and token_id < len(tokenizer):
            ids.append(token_id)
    return ids


def context_length(model) -> int | None:
    """The longest sequence the model accepts, when its config says so."""
    return getattr(model.config, "max_position_embeddings", None)


def check_context(
    prompts: Sequence[tuple[str, Sequence[int]]],
    max_new_tokens: int,
    limit: int | None,
    *,
    model: str = "the model",
) -> None:
    """Raise unless the longest prompt plus `max_new_tokens` fits a context of `limit` tokens.

    `model` names the model in the message (e.g. `the base model`); `limit` None: no limit.

    >>> check_context([("a", [1, 2, 3])], 8, limit=10)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    divscope.errors.DivscopeError: prompt_id='a' has 3 tokens; ... Lower --max-new-tokens to 7.
    """
    if limit is None or not prompts:
        return
    prompt_id, ids = max(prompts, key=lambda prompt: len(prompt[1]))
    if len(ids) + max_new_tokens > limit:
        raise DivscopeError(
            f"prompt_id={prompt_id!r} has {len(ids)} tokens; with --max-new-tokens "
            f"{max_new_tokens} it exceeds {model}'s context of {limit}. Lower "
            f"--max-new-tokens to {max(limit - len(ids), 0)}."
        )


def describe_model(model, name_or_path: str, revision: str | None = None) -> dict[str, Any]:
    """Provenance for the token table's metadata: path or id, revision, commit, size, dtype."""
    return {
        "name_or_path": name_or_path,
        "revision": revision,
        "commit_hash": getattr(model.config, "_commit_hash", None),
        "architecture": (model.config.architectures or [type(model).__name__])[0],
        "n_parameters": sum(p.numel() for p in model.parameters()),
        "dtype": str(next(model.parameters()).dtype).removeprefix("torch."),
        "device": str(next(model.parameters()).device),
    }
