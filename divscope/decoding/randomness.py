"""Coupled, reproducible randomness: one uniform per (seed, prompt, sample, step, stream).

A draw never comes from a stateful generator. The uniform that decides step t of sample s of
prompt p is a counter-based hash of (seed, p, s, t, stream), so it does not depend on batch
size, batch composition, the order of the work, or which model emits the token. Sampling is by
inverse CDF over the (prob desc, id asc) order of the truncated distribution, so one uniform
picks "the same" token from whichever distribution the policy samples: a policy that never
switches reproduces base sampling token for token, and one that always switches reproduces RL
sampling. The coupling does not make the primary's and the intervener's draws agree at the
rate of independent draws: two tokens agree under one uniform with the overlap of their
intervals in the two orders, which can be larger than Σ p_b p_r (two alike distributions) or
smaller (base [A .5, B .3, C .2] and RL [B .5, A .3, C .2]: 0.20 coupled, 0.34 independent).
`Stream.PRIMARY` gives the primary an independent draw, which the papers' count of effective
switches is taken against (`n_effective`).

The hash (stable across versions; changing it changes every result):
    key  = mix(mix(mix(mix(seed) ^ blake2b64(prompt_id)) ^ sample) ^ stream)
    u_t  = (mix(key + (t + 1) * 0x9E3779B97F4A7C15) >> 11) * 2**-53
with `mix` the SplitMix64 finalizer and all arithmetic modulo 2**64.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from enum import IntEnum

import numpy as np
import torch
from torch import Tensor

from divscope.scoring.metrics import Truncated

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MASK64 = (1 << 64) - 1


class Stream(IntEnum):
    """Independent random streams of one (prompt, sample)."""

    SAMPLE = 0
    """The inverse-CDF draw of the emitted token at each step."""
    SWITCH = 1
    """The `random` policy's coin at each step."""
    RESPONSE = 2
    """The `mixture` policy's once-per-response choice (step 0 only)."""
    PRIMARY = 3
    """The primary model's independent draw at each step: what it would have sampled had its
    draw not been coupled to the intervener's (`n_effective`); it decides no token, except
    where `random-effective` switches only where the intervener's draw differs from it."""


def _mix(z: np.ndarray) -> np.ndarray:
    """SplitMix64 finalizer on uint64 arrays (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def prompt_key(prompt_id: str) -> int:
    """A stable 64-bit key of a prompt id (Python's `hash` is salted per process)."""
    return int.from_bytes(hashlib.blake2b(prompt_id.encode(), digest_size=8).digest(), "little")


def uniforms(
    seed: int,
    prompt_ids: Sequence[str],
    sample_ids: Sequence[int],
    steps: int,
    stream: Stream = Stream.SAMPLE,
) -> np.ndarray:
    """The uniforms in [0, 1) of steps 0..steps-1 of each (prompt, sample).

    Args:
        seed: the run's seed (any integer; taken modulo 2**64).
        prompt_ids: the prompt id of each row.
        sample_ids: the sample index of each row.
        steps: how many steps.
        stream: which independent stream.

    Returns:
        `[rows, steps]` float64.

    >>> a = uniforms(0, ["p1", "p2"], [0, 3], 4)
    >>> b = uniforms(0, ["p2"], [3], 2)
    >>> bool((a[1, :2] == b[0]).all()), a.shape
    (True, (2, 4))
    """
    with np.errstate(over="ignore"):
        key = _mix(np.full(len(prompt_ids), seed & _MASK64, dtype=np.uint64))
        key = _mix(key ^ np.array([prompt_key(p) for p in prompt_ids], dtype=np.uint64))
        key = _mix(key ^ np.array([s & _MASK64 for s in sample_ids], dtype=np.uint64))
        key = _mix(key ^ np.uint64(int(stream)))
        counters = np.arange(1, steps + 1, dtype=np.uint64) * _GOLDEN  # [steps]
        bits = _mix(key[:, None] + counters[None, :])  # [rows, steps]
    return (bits >> np.uint64(11)).astype(np.float64) * 2.0**-53


def inverse_cdf(truncated: Truncated, u: Tensor) -> Tensor:
    """The token `[n]` that uniform `u` (`[n]`, float64) picks from a truncated distribution:
    the first token, in (prob desc, id asc) order, whose cumulative renormalized mass exceeds u.

    >>> from divscope.scoring.metrics import StatsConfig, truncate
    >>> dist = truncate(torch.log(torch.tensor([[0.2, 0.5, 0.3]])), StatsConfig(top_p=1.0))
    >>> inverse_cdf(dist, torch.tensor([0.1, 0.6, 0.9], dtype=torch.float64)[:1]).tolist()
    [1]
    """
    width = truncated.ids.shape[-1]
    size = truncated.nucleus.size  # [n]
    kept = torch.arange(width, device=size.device)[None, :] < size[:, None]  # [n, K]
    cum = torch.where(kept, truncated.sorted_probs, 0.0).double().cumsum(-1)  # [n, K]
    target = u.to(cum.device) * cum[:, -1]  # [n]
    index = (cum <= target[:, None]).sum(-1).clamp_max(size - 1)  # [n]
    return truncated.ids.gather(-1, index[:, None]).squeeze(-1)
