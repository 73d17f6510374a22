"""Loading models and tokenizers, and checking that two models can be compared token by token.

A model is a local directory or a hub id, loaded through `AutoModelForCausalLM`; weights are
never downloaded by the tests (they use the committed lab models and tiny models built in the
test), but the hub path is the one users run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from divscope.errors import DivscopeError

if TYPE_CHECKING:
    import torch

DTYPES: tuple[str, ...] = ("auto", "float32", "bfloat16", "float16")


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run the block on `n` torch CPU threads, then give back the count torch had before.

    >>> import torch
    >>> before = torch.get_num_threads()
    >>> with torch_threads(1):
    ...     torch.get_num_threads()
    1
    >>> torch.get_num_threads() == before
    True
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def resolve_device(device: str = "auto", flag: str = "--device") -> str:
    """`auto` → `cuda` when a GPU is visible, else `cpu`; other values are checked and kept.

    Args:
        device: `auto`, `cpu`, `cuda` or `cuda:N`.
        flag: the option that gave it, for error messages (`--base-device`).

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
            raise DivscopeError(f"{flag} {device}: no CUDA device is available; use {flag} cpu.")
        index, count = device.partition(":")[2], torch.cuda.device_count()
        if index and (not index.isdigit() or int(index) >= count):
            listed = ", ".join(f"cuda:{i}" for i in range(count))
            raise DivscopeError(
                f"{flag} {device}: there are {count} CUDA device(s) ({listed}); use one of them."
            )
        return device
    raise DivscopeError(f"{flag} {device!r}: use auto, cpu, cuda or cuda:N.")


def resolve_dtype(dtype: str, device: str, checkpoint_dtype: Any = None):
    """The torch dtype to load weights in.

    `auto` means float32 on the CPU (half precision matmuls are slow there and the statistics
    are computed in float32 anyway) and the checkpoint's own dtype on a GPU (bfloat16 when the
    checkpoint says float32 or nothing, float16 where the GPU has no bfloat16).

    >>> resolve_dtype("auto", "cpu", "bfloat16")
    torch.float32

    Raises:
        DivscopeError: an unknown dtype, or bfloat16 asked of a GPU without it.
    """
    import torch

    if dtype not in DTYPES:
        raise DivscopeError(f"--dtype {dtype!r}: use one of {', '.join(DTYPES)}.")
    on_gpu = device.startswith("cuda")
    # Without CUDA there is no GPU to ask; loading on it fails with its own clear error.
    bf16_ok = not (on_gpu and torch.cuda.is_available()) or torch.cuda.is_bf16_supported()
    if dtype == "bfloat16" and not bf16_ok:
        raise DivscopeError(
            f"--dtype bfloat16: the GPU ({torch.cuda.get_device_name(device)}) does not support "
            "bfloat16; use --dtype float16 or float32."
        )
    if dtype != "auto":
        return getattr(torch, dtype)
    if not on_gpu:
        return torch.float32
    if isinstance(checkpoint_dtype, str):
        checkpoint_dtype = getattr(torch, checkpoint_dtype, None)
    if checkpoint_dtype == torch.float16 or not bf16_ok:
        return torch.float16
    return torch.bfloat16


def run_dtype(dtype: str, device: str, device_map, first: str, revision=None):
    """The one dtype every model of a run is loaded in: `dtype`, or for `auto` the first
    model's checkpoint dtype on a GPU (see `resolve_dtype`) and float32 on the CPU.

    Args:
        dtype: `auto`, `float32`, `bfloat16` or `float16`.
        device: `auto`, `cpu`, `cuda` or `cuda:N`.
        device_map: a `from_pretrained` device map (`auto`, or module -> device).
        first: the first model (local directory or hub id); only its config is read.
        revision: its hub revision.

    Raises:
        DivscopeError: see `resolve_dtype`; a config that cannot be loaded.
    """
    placement = _placement(device, device_map)
    checkpoint = _config_dtype(_load_config(first, revision)) if dtype == "auto" else None
    return resolve_dtype(dtype, placement, checkpoint)


def load_model(
    name_or_path: str,
    *,
    dtype: Any = "auto",
    device: str = "auto",
    device_map: str | dict | None = None,
    revision: str | None = None,
):
    """Load a causal LM in eval mode.

    Args:
        name_or_path: a local directory with `config.json` or a hub id.
        dtype: `auto`, `float32`, `bfloat16` or `float16` (see `resolve_dtype`), or a torch
            dtype (a run's, from `run_dtype`).
        device: `auto`, `cpu`, `cuda` or `cuda:N`; ignored when `device_map` is given.
        device_map: passed to `from_pretrained` (e.g. `auto`) for models larger than one GPU;
            needs accelerate (`pip install 'divscope[big]'`).
        revision: a hub branch, tag or commit.

    Raises:
        DivscopeError: the model cannot be found or loaded, `device_map` without accelerate,
            or a device map that leaves weights offloaded (`check_not_offloaded`).
    """
    from importlib.util import find_spec

    from transformers import AutoModelForCausalLM
    from transformers.utils import logging

    from divscope.progress import is_terminal

    if device_map is not None and find_spec("accelerate") is None:
        raise DivscopeError("--device-map needs accelerate: pip install 'divscope[big]'.")
    if not is_terminal():  # its "Loading weights" bar would redraw line after line into the log
        logging.disable_progress_bar()
    device = resolve_device(device) if device_map is None else device
    config = _load_config(name_or_path, revision)
    placement = _placement(device, device_map)
    torch_dtype = (
        resolve_dtype(dtype, placement, _config_dtype(config)) if isinstance(dtype, str) else dtype
    )
    try:
        model = AutoModelForCausalLM.from_pretrained(
            name_or_path, revision=revision, dtype=torch_dtype, device_map=device_map
        )
    except (OSError, ValueError) as error:
        raise DivscopeError(f"model {name_or_path!r}: could not load weights ({error}).") from error
    if device_map is None:
        model = model.to(device)
    else:
        check_not_offloaded(model, name_or_path)
    return model.eval()


def check_not_offloaded(model, name_or_path: str) -> None:
    """Refuse a model that a device map left partly offloaded: accelerate keeps such weights on
    the `meta` device (in CPU memory or on disk) and copies them in at every forward, which
    the output head divscope computes itself cannot use, and which is slow.

    Raises:
        DivscopeError: naming the model, a few of its offloaded modules and what to do.
    """
    offloaded = [name for name, p in model.named_parameters() if p.device.type == "meta"]
    if not offloaded:
        return
    placed = getattr(model, "hf_device_map", None) or {}

    def module(parameter: str) -> str:
        """The device map's entry holding `parameter`, else the module that owns it."""
        entries = [m for m in placed if m == "" or parameter.startswith(f"{m}.")]
        return max(entries, key=len, default=parameter.rpartition(".")[0]) or "the whole model"

    modules = list(dict.fromkeys(module(name) for name in offloaded))
    shown = ", ".join(modules[:3]) + (f" and {len(modules) - 3} more" if len(modules) > 3 else "")
    raise DivscopeError(
        f"model {name_or_path!r}: the device map offloaded {shown} to the CPU or disk (the "
        "model does not fit on the GPUs); divscope needs every weight on a device. Use more or "
        "larger GPUs, a smaller --dtype, or --base-device/--rl-device on separate GPUs."
    )


def load_models(
    paths: Mapping[str, str],
    *,
    dtype: str,
    device: str,
    device_map: str | None,
    devices: Mapping[str, str | None] | None = None,
) -> dict[str, Any]:
    """Load every model of a run in one dtype (`run_dtype`, read from the first model).

    Args:
        paths: model name -> local directory or hub id, the first one deciding `auto`.
        dtype: `auto`, `float32`, `bfloat16` or `float16`.
        device: `auto`, `cpu`, `cuda` or `cuda:N`.
        device_map: passed to `from_pretrained`.
        devices: model name -> its own device (`cpu`, `cuda`, `cuda:N`; `--base-device`,
            `--rl-device`), overriding `device` for it; None (or a model left out): `device`.

    Raises:
        DivscopeError: a model's own device that is unknown or absent (naming its flag), or
            given together with `device_map`; see `load_model`.
    """
    placed = model_devices(paths, device, device_map, devices)
    first = next(iter(paths))
    torch_dtype = run_dtype(dtype, placed[first], device_map, paths[first])
    return {
        name: load_model(path, dtype=torch_dtype, device=placed[name], device_map=device_map)
        for name, path in paths.items()
    }


def model_devices(
    paths: Mapping[str, str],
    device: str,
    device_map: str | dict | None,
    devices: Mapping[str, str | None] | None,
) -> dict[str, str]:
    """Each model's device: its own (checked, `--base-device`), else `device` (as given).

    >>> model_devices({"base": "b", "rl": "r"}, "auto", None, {"base": "cpu", "rl": None})
    {'base': 'cpu', 'rl': 'auto'}
    >>> model_devices({"base": "b"}, "auto", "auto", {"base": "cpu"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    divscope.errors.DivscopeError: --base-device cpu cannot be combined with --device-map auto...

    Raises:
        DivscopeError: an unknown or absent device, or own devices together with `device_map`.
    """
    own = {n: where for n, where in (devices or {}).items() if where is not None and n in paths}
    if own and device_map is not None:
        given = ", ".join(f"{device_flag(name)} {where}" for name, where in own.items())
        raise DivscopeError(
            f"{given} cannot be combined with --device-map {device_map}: place each model on "
            "its own device, or let the device map spread them, not both."
        )
    return {
        name: resolve_device(own[name], device_flag(name)) if name in own else device
        for name in paths
    }


def device_flag(name: str) -> str:
    """The option that places model `name` on its own device.

    >>> device_flag("rl")
    '--rl-device'
    """
    return f"--{name.replace('_', '-')}-device"


def describe_placement(
    device: str, device_map: str | dict | None, devices: Mapping[str, str | None] | None = None
) -> str:
    """Where a run put its models, for the output's metadata (`device`): `--device`, or the
    device map, then each model's own device.

    >>> describe_placement("auto", None, {"base": "cuda:0", "rl": "cuda:1"})
    'auto, base=cuda:0, rl=cuda:1'
    >>> describe_placement("cuda", "auto")
    'device_map=auto'
    """
    if device_map is not None:
        return f"device_map={device_map}"
    own = [f"{name}={where}" for name, where in (devices or {}).items() if where is not None]
    return ", ".join([device, *own])


def _placement(device: str, device_map: Any) -> str:
    """Where the weights compute: the device, or for a device map `cuda` when it names a GPU
    (a string map such as `auto` does where CUDA is available)."""
    if device_map is None:
        return resolve_device(device)
    if isinstance(device_map, dict):
        on_cpu = all(str(where) in ("cpu", "disk") for where in device_map.values())
        return "cpu" if on_cpu else "cuda"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _load_config(name_or_path: str, revision: str | None = None):
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(name_or_path, revision=revision)
    except (OSError, ValueError) as error:
        raise DivscopeError(
            f"model {name_or_path!r}: could not load its config ({error}). Give a local directory "
            "holding config.json or a hub id (hub ids need network access or a local HF cache)."
        ) from error


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


def context_length(model) -> int | None:
    """The longest sequence the model accepts, when its config says so."""
    return getattr(model.config, "max_position_embeddings", None)


def new_token_limits(
    prompts: Sequence[tuple[str, Sequence[int]]],
    max_new_tokens: int | None,
    contexts: Mapping[str, int | None],
) -> list[int]:
    """The length cap of each prompt's responses.

    Args:
        prompts: `(prompt_id, token ids)` of each prompt.
        max_new_tokens: the cap asked for, or None for `MAX_NEW_TOKENS` (8,000) capped, prompt
            by prompt, by the smallest context.
        contexts: each model's context (None: no limit), by a name used in messages (`base`).

    Raises:
        DivscopeError: a prompt plus an asked-for `max_new_tokens` exceeds a context, or a
            prompt leaves no room for a response.

    >>> new_token_limits([("a", [1, 2, 3]), ("b", [1])], None, {"base": 10, "rl": 12})
    [7, 9]
    >>> new_token_limits([("a", [1, 2, 3])], 8, {"base": 10})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    divscope.errors.DivscopeError: prompt_id='a' has 3 tokens; ... Lower --max-new-tokens to 7...
    """
    from divscope.defaults import MAX_NEW_TOKENS

    smallest = _smallest_context(contexts)
    if smallest is None:
        return [max_new_tokens or MAX_NEW_TOKENS] * len(prompts)
    name, limit = smallest
    longest_id, longest = max(prompts, key=lambda p: len(p[1]), default=("", ()))
    if max_new_tokens is not None and len(longest) + max_new_tokens > limit:
        raise DivscopeError(
            f"prompt_id={longest_id!r} has {len(longest)} tokens; with --max-new-tokens "
            f"{max_new_tokens} it exceeds {_whose(name)} context of {limit}. Lower "
            f"--max-new-tokens to {max(limit - len(longest), 0)}, or leave it out (then "
            "each response is capped by the context)."
        )
    if len(longest) >= limit:
        raise DivscopeError(
            f"prompt_id={longest_id!r} has {len(longest)} tokens: it fills {_whose(name)} "
            f"context of {limit} and leaves no room for a response; shorten it."
        )
    cap = max_new_tokens or MAX_NEW_TOKENS
    return [min(cap, limit - len(ids)) for _, ids in prompts]


def _smallest_context(contexts: Mapping[str, int | None]) -> tuple[str, int] | None:
    """The model with the smallest known context and that context (None: no model has one)."""
    known = [(name, limit) for name, limit in contexts.items() if limit is not None]
    return min(known, key=lambda item: item[1], default=None)


def _whose(name: str) -> str:
    """`the base model's`; `the model's` for the one model of `generate` (named `model`)."""
    return "the model's" if name == "model" else f"the {name} model's"


def length_note(
    prompts: Sequence[tuple[str, Sequence[int]]],
    max_new_tokens: int | None,
    contexts: Mapping[str, int | None],
) -> str | None:
    """The line that says how the default length cap was capped by a context (None: it was
    not): what the commands print once.

    >>> print(length_note([("a", [1, 2, 3])], None, {"base": 320}))
    responses are capped at 317 new tokens (not 8,000): the base model's context is 320 tokens
    and the longest prompt has 3
    """
    from divscope.defaults import MAX_NEW_TOKENS

    if max_new_tokens is not None or not prompts:
        return None
    limits = new_token_limits(prompts, None, contexts)
    if min(limits) >= MAX_NEW_TOKENS:
        return None
    name, limit = _smallest_context(contexts)  # not None: some prompt was capped
    return (
        f"responses are capped at {min(limits):,} new tokens (not {MAX_NEW_TOKENS:,}): "
        f"{_whose(name)} context is {limit:,} tokens and the longest prompt has "
        f"{max(len(ids) for _, ids in prompts):,}"
    )


HEAD_DTYPES: tuple[str | None, ...] = (None, "float32")
"""The output head's dtypes: None (the weights') or float32 (--head-dtype)."""


def check_head_dtype(head_dtype: str | None) -> None:
    """Raise unless `head_dtype` is one of `HEAD_DTYPES`.

    >>> check_head_dtype("bfloat16")
    Traceback (most recent call last):
    ...
    divscope.errors.DivscopeError: --head-dtype 'bfloat16': only float32 is supported.
    """
    if head_dtype not in HEAD_DTYPES:
        raise DivscopeError(f"--head-dtype {head_dtype!r}: only float32 is supported.")


class OutputHead:
    """A causal LM's output head on the tokenizer's rows, with the final logit transform its
    class applies after the head (softcapping, scaling), returning float32 logits (float64
    for a float64 model).

    Args:
        model: the loaded causal LM.
        vocab: the tokenizer's size; padded head rows beyond it are dropped.
        dtype: `float32`: multiply in float32, from a float32 copy of the head (fewer exact
            ties among bf16 logits; costs 4 bytes per vocabulary entry and hidden unit, e.g.
            2.2 GB for a 152k x 3,584 head). None: in the weights' dtype.
        device: where the logits are computed, when not on the head's own device (the
            statistics device of a run whose models sit on several devices): a copy of the
            head's rows (V x d) is kept there and the hidden states `[rows, d]` go to it, so
            no `[rows, V]` logits ever cross devices. None: the head's device.
    """

    def __init__(
        self,
        model,
        vocab: int,
        dtype: str | None = None,
        device: str | torch.device | None = None,
    ) -> None:
        import torch

        head = model.get_output_embeddings()
        weight = head.weight[:vocab]  # [V, d]; a view, padded rows dropped
        bias = getattr(head, "bias", None)
        self.device = weight.device if device is None else _indexed(torch.device(device))
        wide = torch.float32 if dtype == "float32" else weight.dtype
        # At most one copy (to float32, to `device`, or both); none when neither changes.
        self.weight = weight.to(device=self.device, dtype=wide)
        self.bias = None if bias is None else bias[:vocab].to(device=self.device, dtype=wide)
        config = model.config.get_text_config()
        self.softcap = getattr(config, "final_logit_softcapping", None)
        scale = getattr(config, "logit_scale", None)  # Cohere multiplies
        divisor = getattr(config, "logits_scaling", None)  # Granite divides
        self.scale = (scale or 1.0) / (divisor or 1.0)

    def __call__(self, hidden):
        """float32 logits `[..., V]` of final hidden states `[..., d]`."""
        import torch

        hidden = hidden.to(device=self.device, dtype=self.weight.dtype)
        logits = torch.nn.functional.linear(hidden, self.weight, self.bias)  # [..., V]
        if logits.dtype != torch.float64:
            logits = logits.float()
        if self.scale != 1.0:
            logits = logits * self.scale
        if self.softcap is not None:
            logits = torch.tanh(logits / self.softcap) * self.softcap
        return logits


def _indexed(device: torch.device) -> torch.device:
    """`cuda` as the `cuda:N` it stands for (the current GPU), so that it compares equal to the
    device of a tensor there; other devices as they are."""
    import torch

    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def check_output_head(model, name: str, vocab: int) -> None:
    """Refuse a model with no output head, or one with fewer rows than the tokenizer has tokens.

    Raises:
        DivscopeError: naming the model (`name`, e.g. `base`) and what is wrong.
    """
    head = model.get_output_embeddings()
    if head is None or not hasattr(head, "weight"):
        raise DivscopeError(
            f"the {name} model ({type(model).__name__}) has no output head "
            "(get_output_embeddings()); score a causal LM (AutoModelForCausalLM)."
        )
    if head.weight.shape[0] < vocab:
        raise DivscopeError(
            f"the {name} model's output head has {head.weight.shape[0]} rows but the tokenizer "
            f"has {vocab} tokens; the model and tokenizer do not belong together."
        )


def check_head_reproduces_logits(model, name: str, ids: Sequence[int], vocab: int) -> None:
    """Refuse a model whose causal-LM forward transforms its logits in a way `OutputHead` does
    not reproduce (compared on the probe `ids` against the model's own full forward): the
    scorer and the lockstep decoder both compute logits with `OutputHead`.

    Raises:
        DivscopeError: naming the model and the largest difference on the probe.
    """
    import torch

    device = model.get_input_embeddings().weight.device
    with torch.inference_mode():
        input_ids = torch.tensor([list(ids)], device=device)  # [1, s]
        expected = model(input_ids=input_ids, use_cache=False).logits[0, :, :vocab].float()
        hidden = model.get_decoder()(input_ids=input_ids, use_cache=False).last_hidden_state[0]
        got = OutputHead(model, vocab)(hidden).to(expected.device)  # [s, V]
    scale = 1.0 + expected.abs().max().item()
    tolerance = (1e-4 if model.dtype == torch.float32 else 3e-2) * scale
    error = (got - expected).abs().max().item()
    if not error <= tolerance:
        raise DivscopeError(
            f"the {name} model ({type(model).__name__}) transforms its logits after the output "
            f"head in a way divscope does not reproduce (max difference {error:.3g} on a probe). "
            "Its architecture is not supported by divscope's scorer and decoder yet; please file "
            "an issue."
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
