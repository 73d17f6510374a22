"""Loading causal LMs, and describing a loaded one for the output's metadata.

A model is a local directory or a hub id with its revision and subfolder
(`divscope.models.names`), loaded through `AutoModelForCausalLM`; weights are
never downloaded by the tests (they use the committed lab models and tiny models built in the
test), but the hub path is the one users run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib.util import find_spec
from typing import Any

from divscope.errors import DivscopeError
from divscope.models.names import ModelName, parse
from divscope.models.placement import (
    config_dtype,
    load_config,
    model_devices,
    resolve_device,
    resolve_dtype,
    run_dtype,
    weights_device,
)


def load_model(
    name: str | ModelName,
    *,
    dtype: Any = "auto",
    device: str = "auto",
    device_map: str | dict | None = None,
):
    """Load a causal LM in eval mode.

    Args:
        name: a local directory with `config.json`, or a hub id with its revision and
            subfolder: `ID[/SUBFOLDER][@REVISION]` or a `ModelName` (`divscope.models.names`).
        dtype: `auto`, `float32`, `bfloat16` or `float16` (see `resolve_dtype`), or a torch
            dtype (a run's, from `run_dtype`).
        device: `auto`, `cpu`, `cuda` or `cuda:N`; ignored when `device_map` is given. A GPU's
            weights are read straight onto it where accelerate is installed (`loading_map`).
        device_map: passed to `from_pretrained` (e.g. `auto`) for models larger than one GPU;
            needs accelerate (`pip install 'divscope[big]'`).

    Raises:
        DivscopeError: the model cannot be found or loaded (a verl FSDP checkpoint: with the
            command that merges it), `device_map` without accelerate,
            or a device map that leaves weights offloaded (`check_not_offloaded`).
    """
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging

    from divscope.progress import is_terminal

    if device_map is not None and find_spec("accelerate") is None:
        raise DivscopeError("--device-map needs accelerate: pip install 'divscope[big]'.")
    if not is_terminal():  # its "Loading weights" bar would redraw line after line into the log
        logging.disable_progress_bar()
    name = ModelName.of(name)
    device = resolve_device(device) if device_map is None else device
    config = load_config(name)
    placement = weights_device(device, device_map)
    torch_dtype = (
        resolve_dtype(dtype, placement, config_dtype(config)) if isinstance(dtype, str) else dtype
    )
    try:
        model = AutoModelForCausalLM.from_pretrained(
            name.id, dtype=torch_dtype, device_map=loading_map(device, device_map),
            **name.options(),
        )  # fmt: skip
    except (OSError, ValueError) as error:
        raise DivscopeError(f"model {str(name)!r}: could not load weights ({error}).") from error
    if device_map is None:
        model = model.to(device)  # nothing to move where `loading_map` put it there
    else:
        check_not_offloaded(model, str(name))
    return model.eval()


def loading_map(device: str, device_map: str | dict | None) -> str | dict | None:
    """The device map `from_pretrained` gets: `device_map` where given; else, for a device
    other than the CPU, `{"": device}` where accelerate is installed (transformers needs it
    for any device map), which reads each weight from the checkpoint straight onto the device:
    no full copy of the model in host memory first (65 GB for a 32B model in bf16, in each
    torchrun process of a node); else None, the weights loaded into host memory and then moved
    (the CPU's loading; without accelerate, `pip install 'divscope[big]'`, a GPU's too).

    >>> loading_map("cpu", None) is None
    True
    >>> loading_map("cuda:1", None) == ({"": "cuda:1"} if find_spec("accelerate") else None)
    True
    """
    if device_map is not None:
        return device_map
    if device == "cpu" or find_spec("accelerate") is None:
        return None
    return {"": device}


def given_model(value: Any) -> tuple[Any, Any] | None:
    """`(model, tokenizer)` of a model given already loaded (the Python API, e.g. in a
    notebook), None of a model given by name (a local directory or a hub id).

    A loaded model is a `(model, tokenizer)` pair, or a model alone whose tokenizer loads from
    its `name_or_path`; it runs as it is, on its device and in its dtype.

    Raises:
        DivscopeError: a pair that is not (model, tokenizer), or a model alone without the
            `name_or_path` to load its tokenizer from.

    >>> given_model("fixtures/lab/base") is None
    True
    """
    from divscope.models.tokenizers import load_tokenizer

    if isinstance(value, str | os.PathLike):
        return None
    if isinstance(value, tuple | list):
        if len(value) != 2 or not hasattr(value[0], "config") or not callable(value[1]):
            raise DivscopeError(
                "a model given loaded is a (model, tokenizer) pair, or a model alone whose "
                f"tokenizer loads from its name_or_path; got {type(value).__name__} of "
                f"{len(value)}."
            )
        return value[0], value[1]
    name = getattr(value, "name_or_path", None)
    if not hasattr(value, "config") or not name:
        raise DivscopeError(
            f"model of type {type(value).__name__}: give a local directory or a hub id, a "
            "loaded model whose name_or_path names its tokenizer, or a (model, tokenizer) pair."
        )
    return value, load_tokenizer(name)


def model_name(
    value: Any,
    *,
    revision: str | None = None,
    subfolder: str | None = None,
    flag: str = "--model",
) -> ModelName:
    """How a run names a model: a name read by `divscope.models.names.parse` with its revision
    and subfolder options (`flag` names them in errors), or a loaded model (`given_model`) by
    its `name_or_path` (its class name when it has none).

    >>> str(model_name("org/run", revision="step-4"))
    'org/run@step-4'

    Raises:
        DivscopeError: see `parse`.
    """
    if isinstance(value, str | os.PathLike):
        return parse(value, revision=revision, subfolder=subfolder, flag=flag)
    model = value[0] if isinstance(value, tuple | list) else value
    return ModelName(getattr(model, "name_or_path", None) or type(model).__name__)


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
    paths: Mapping[str, str | ModelName],
    *,
    dtype: str,
    device: str,
    device_map: str | None,
    devices: Mapping[str, str | None] | None = None,
) -> dict[str, Any]:
    """Load every model of a run in one dtype (`run_dtype`, read from the first model).

    Args:
        paths: model name -> local directory or hub id (`divscope.models.names`), the first
            one deciding `auto`.
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


def describe_model(model, name: str | ModelName) -> dict[str, Any]:
    """Provenance for the token table's metadata: path or id, the revision requested, the
    subfolder, the commit hash the Hub cache resolved it to (`ModelName.describe`), size,
    dtype."""
    described = ModelName.of(name).describe()
    return {
        **described,
        "commit_hash": described["commit_hash"] or getattr(model.config, "_commit_hash", None),
        "architecture": (model.config.architectures or [type(model).__name__])[0],
        "n_parameters": sum(p.numel() for p in model.parameters()),
        "dtype": str(next(model.parameters()).dtype).removeprefix("torch."),
        "device": str(next(model.parameters()).device),
    }
