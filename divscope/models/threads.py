"""Threads: torch's CPU thread count, set for a block and then given back; calls run at once
on their own threads (two models' forwards on two GPUs)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any


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


def concurrently(calls: Sequence[Callable[[], Any]], *, inference: bool = False) -> list[Any]:
    """The results of `calls`, in their order, each run on a thread of its own, all at once.

    For work that releases the GIL on separate devices: torch launches a CUDA kernel without
    holding it, so two models on two GPUs compute at the same time. Not for two calls on one
    device (its kernels queue on one stream) nor on the CPU (both would share its cores).
    Torch's grad mode is per thread: a call that needs `torch.inference_mode` enters it itself.
    Every call runs to its end; then the first of them (in order) that raised raises here.
    `inference=True` runs each call in `torch.inference_mode`.

    >>> concurrently([lambda: 1, lambda: 2])
    [1, 2]
    """
    with ThreadPoolExecutor(max_workers=max(1, len(calls))) as pool:
        futures = [pool.submit(_inferring if inference else _plain, call) for call in calls]
    return [future.result() for future in futures]  # the pool's exit waited for all of them


def _plain(call: Callable[[], Any]) -> Any:
    return call()


def _inferring(call: Callable[[], Any]) -> Any:
    import torch

    with torch.inference_mode():
        return call()
