"""Calibration of the dual gate of the `gated` (and `entropy`) takeover policies.

For a target takeover rate r over calibration scores s (the base model's own responses, scored):
    tau    = the (1 − r) quantile of s (linear interpolation, numpy's default),
    lambda = E[s | s > tau] / E[s].
`gated` reads the CE(p_b, p_r) calibration (`ce_base_rl`), `entropy` the base-entropy one
(`entropy_base`), so the two policies are compared at the same nominal takeover rate. A
calibration holds one gate per policy and rate r: the takeover paper sweeps r to draw its knee.

>>> gate = calibrate_scores(np.array([1.0, 2.0, 3.0, 4.0]), rate=0.25)
>>> round(gate.tau, 6), round(gate.lam, 6)
(3.25, 1.6)
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from divscope.errors import DivscopeError
from divscope.schema import require_columns
from divscope.tables import as_arrow

# Token-table column behind each gated policy.
SCORE_COLUMNS: dict[str, str] = {"gated": "ce_base_rl", "entropy": "entropy_base"}


@dataclass(frozen=True)
class Gate:
    """The two thresholds of one dual gate, calibrated for one takeover rate."""

    rate: float
    """Target takeover rate r the gate was calibrated for."""
    tau: float
    """Absolute threshold: the (1 − r) quantile of the scores."""
    lam: float
    """Relative threshold: E[s | s > tau] / E[s]."""


@dataclass(frozen=True)
class Calibration:
    """What `divscope calibrate` writes and `cross-sample --calibration` reads."""

    rates: tuple[float, ...]
    """Target takeover rates r, in the order given."""
    window: int
    """W, the previous steps of the gate's recent mean."""
    gates: dict[str, tuple[Gate, ...]]
    """Gates per policy (`gated`, `entropy`): one per rate, in the order of `rates`."""
    n_tokens: int
    """Calibration scores used."""
    source: str
    """Where the scores came from (token table path or prompts + models)."""

    def gates_of(self, policy: str) -> tuple[Gate, ...]:
        """The gates of `policy` (`gated` or `entropy`), one per rate."""
        if policy not in self.gates:
            raise DivscopeError(
                f"the calibration has no gate for policy {policy!r}; it has "
                f"{', '.join(self.gates)}."
            )
        return self.gates[policy]

    def to_json(self, path: str | os.PathLike) -> None:
        """Write the calibration as a small JSON file, atomically, replacing `path`."""
        from divscope.output import with_invocation, write_json

        write_json(with_invocation(asdict(self)), path, overwrite=True)

    @staticmethod
    def from_json(path: str | os.PathLike) -> Calibration:
        """Read a calibration written by `to_json`, or by divscope before several rates (one
        `rate`, one gate per policy), read as a calibration of that one rate.

        Raises:
            DivscopeError: the file is missing or is not a divscope calibration.
        """
        try:
            data: dict[str, Any] = json.loads(Path(path).read_text())
            if "rates" in data:
                rates = tuple(float(r) for r in data["rates"])
                gates = {
                    name: tuple(Gate(**gate) for gate in listed)
                    for name, listed in data["gates"].items()
                }
            else:  # one rate: {"rate": r, "gates": {"gated": {"tau": ..., "lam": ...}}}
                rates = (float(data["rate"]),)
                gates = {
                    name: (Gate(rate=rates[0], **gate),) for name, gate in data["gates"].items()
                }
            if any(tuple(g.rate for g in listed) != rates for listed in gates.values()):
                raise ValueError("the gates' rates differ from `rates`")
            return Calibration(
                rates=rates,
                window=int(data["window"]),
                gates=gates,
                n_tokens=int(data["n_tokens"]),
                source=str(data["source"]),
            )
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise DivscopeError(
                f"{path}: not a calibration written by `divscope calibrate` ({error})."
            ) from error


def calibrate_scores(scores: np.ndarray, rate: float, *, source: str = "calibration") -> Gate:
    """tau and lambda of a dual gate for takeover rate `rate` (see the module docstring).

    `source` names the scores in error messages (e.g. a token table and its column).

    Raises:
        DivscopeError: no scores, a rate outside (0, 1), or no score above tau.
    """
    if not 0.0 < rate < 1.0:
        raise DivscopeError(f"--rate must be in (0, 1), got {rate}.")
    scores = np.asarray(scores, dtype=np.float64)
    scores = scores[np.isfinite(scores)]
    if scores.size == 0:
        raise DivscopeError(
            f"{source}: no finite scores to calibrate on; give a non-empty calibration set."
        )
    tau = float(np.quantile(scores, 1.0 - rate))
    above = scores[scores > tau]
    mean = float(scores.mean())
    if above.size == 0 or mean <= 0.0:
        raise DivscopeError(
            f"{source}: no score exceeds tau={tau:.4g} (or the mean score is 0); the "
            f"calibration set is too small or degenerate for rate {rate}."
        )
    return Gate(rate=rate, tau=tau, lam=float(above.mean()) / mean)


def calibrate_table(
    table: Any, rates: float | Sequence[float], window: int, source: str
) -> Calibration:
    """Calibrate both gates on a token table's `ce_base_rl` and `entropy_base` columns, at
    each rate (the scores are read once).

    Args:
        table: token-table rows (the base model's responses, scored against the RL model): a
            pyarrow Table or a polars DataFrame.
        rates: target takeover rates r in (0, 1), one or several (each given once).
        window: W of the gates' recent mean (stored, not used by the calibration).
        source: a description of the table for the JSON.

    Raises:
        DivscopeError: no rate, a rate given twice, or what `calibrate_scores` raises.
    """
    if window < 1:
        raise DivscopeError(f"--window must be >= 1, got {window}.")
    rates = (float(rates),) if isinstance(rates, int | float) else tuple(map(float, rates))
    if not rates or len(set(rates)) != len(rates):
        raise DivscopeError(f"--rate {','.join(map(str, rates))!r}: give each rate once.")
    columns = list(SCORE_COLUMNS.values())
    frame = as_arrow(table)
    require_columns(frame.column_names, columns, source=source, what="calibration")
    gates = {
        policy: tuple(
            calibrate_scores(frame[column].to_numpy(), rate, source=f"{source}, column {column!r}")
            for rate in rates
        )
        for policy, column in SCORE_COLUMNS.items()
    }
    return Calibration(
        rates=rates, window=window, gates=gates, n_tokens=frame.num_rows, source=source
    )
