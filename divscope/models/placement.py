"""Where a run's models go and in which dtype: devices (`--device`, `--base-device`), device
maps, and the one dtype every model of a run is loaded in."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import combinations
from typing import Any

from divscope.errors import DivscopeError
from divscope.models.names import ModelName

DTYPES: tuple[str, ...] = ("auto", "float32", "bfloat16", "float16")


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


def run_dtype(dtype: str, device: str, device_map, first: str | ModelName):
    """The one dtype every model of a run is loaded in: `dtype`, or for `auto` the first
    model's checkpoint dtype on a GPU (see `resolve_dtype`) and float32 on the CPU.

    Args:
        dtype: `auto`, `float32`, `bfloat16` or `float16`.
        device: `auto`, `cpu`, `cuda` or `cuda:N`.
        device_map: a `from_pretrained` device map (`auto`, or module -> device).
        first: the first model (`divscope.models.names`); only its config is read.

    Raises:
        DivscopeError: see `resolve_dtype`; a config that cannot be loaded.
    """
    placement = weights_device(device, device_map)
    checkpoint = config_dtype(load_config(first)) if dtype == "auto" else None
    return resolve_dtype(dtype, placement, checkpoint)


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


def weights_device(device: str, device_map: Any) -> str:
    """Where the weights compute: the device, or for a device map `cuda` when it names a GPU
    (a string map such as `auto` does where CUDA is available)."""
    if device_map is None:
        return resolve_device(device)
    if isinstance(device_map, dict):
        on_cpu = all(str(where) in ("cpu", "disk") for where in device_map.values())
        return "cpu" if on_cpu else "cuda"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_config(name: str | ModelName):
    from transformers import AutoConfig

    name = ModelName.of(name)
    try:
        return AutoConfig.from_pretrained(name.id, **name.options())
    except (OSError, ValueError) as error:
        raise DivscopeError(
            f"model {str(name)!r}: could not load its config ({error}). Give a local directory "
            "holding config.json or a hub id, ID[/SUBFOLDER][@REVISION] (hub ids need network "
            "access or a local HF cache)."
        ) from error


def config_dtype(config) -> Any:
    return getattr(config, "dtype", None) or getattr(config, "torch_dtype", None)


def on_separate_gpus(first, second) -> bool:
    """Whether two loaded models sit on GPUs only, and on none of the same (`--base-device
    cuda:0 --rl-device cuda:1`): their forwards can then run at once
    (`divscope.models.threads.concurrently`)."""
    devices = [{p.device for p in model.parameters()} for model in (first, second)]
    gpus = all(device.type == "cuda" for placed in devices for device in placed)
    return gpus and not devices[0] & devices[1]


def on_own_gpus(models: Mapping[str, Any]) -> bool:
    """Whether there are several `models`, each on GPUs that no other uses (`on_separate_gpus`
    pairwise): their forwards of a step then run at once."""
    return len(models) > 1 and all(
        on_separate_gpus(a, b) for a, b in combinations(models.values(), 2)
    )
