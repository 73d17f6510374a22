"""One response to decode: what the lockstep decoder takes and policies read."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Request:
    """One response to decode."""

    prompt_id: str
    sample_id: int
    prompt_ids: tuple[int, ...]
    budget: int = -1
    """Most switches allowed; −1 = unlimited."""
    map_steps: tuple[int, ...] | None = None
    """The steps of a retrospective map where the policy's response is divergent (the map's
    positions, less a forced opening's length); None without one."""
    switches: int | None = None
    """`random-effective`: the effective switches to make (forward's `n_effective` for the
    same prompt, sample and budget); None for the other policies."""
