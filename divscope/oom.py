"""Recovering from running out of GPU memory: the work that failed is run again in halves.

The scoring engine (a model's forward pass over a batch of sequences) and the lockstep decoder
(a batch of requests) hand their batch's rows to `halving`: when an attempt raises
`torch.cuda.OutOfMemoryError`, the memory it held is freed and each half of the rows runs on
its own, recursively, the results merged in row order. The callers pad every half as they
padded the whole batch, so the halves compute what the batch would have. The first split of
the process says so once (a `DivscopeWarning`); a single row that does not fit is a
`DivscopeError` naming what to change.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from functools import partial
from typing import TypeVar

import torch

from divscope.errors import DivscopeError, warn

Row = TypeVar("Row")
Result = TypeVar("Result")

PLACEMENT_ADVICE = (
    "put the models on separate GPUs with --base-device/--rl-device, or spread them over "
    "several with --device-map auto"
)
"""How to get more memory per model, for the errors of a row that does not fit alone."""

_warned: set[str] = set()
"""The advice of every split warning given in this process (each is given once)."""


def halving(
    attempt: Callable[[Sequence[Row]], Result],
    rows: Sequence[Row],
    *,
    merge: Callable[[Result, Result], Result],
    describe: Callable[[Sequence[Row]], str],
    advice: str,
    too_large: Callable[[Row], str],
) -> Result:
    """`attempt(rows)`, or where it runs out of GPU memory, `attempt` on each half of `rows`
    (recursively, the first half first), merged with `merge`.

    Args:
        attempt: the work on some rows (it must not depend on which other rows it gets).
        rows: the batch's rows, in order.
        merge: joins the results of a first and a second half.
        describe: names a batch in the warning, e.g. `a batch of 12 sequences (9,876 padded
            tokens)`.
        advice: what avoids the recomputation, e.g. `lower --batch-tokens`; the warning is
            given once per process and advice.
        too_large: the error message of a single row that does not fit.

    Raises:
        DivscopeError: `too_large(row)` when a single row runs out of memory.
    """
    try:
        return attempt(rows)
    except torch.cuda.OutOfMemoryError:
        pass  # retried below, once the exception (and the failed attempt's frames) are gone
    release_memory()
    if len(rows) == 1:
        raise DivscopeError(too_large(rows[0]))
    if advice not in _warned:
        _warned.add(advice)
        warn(f"out of GPU memory on {describe(rows)}: split it in two and retried; {advice}.")
    again = partial(
        halving, attempt, merge=merge, describe=describe, advice=advice, too_large=too_large
    )
    half = len(rows) // 2
    first = again(rows[:half])
    return merge(first, again(rows[half:]))


def release_memory() -> None:
    """Free the tensors of a failed attempt and hand the GPU allocator's cached blocks back,
    so that the next attempt finds them."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
