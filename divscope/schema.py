"""Column contracts shared by every part of divscope (docs/contracts.md).

Every column that divscope reads or writes is named here, and nowhere else defined: each table
is an ordered mapping column -> polars dtype (or a tuple of names); `require_columns` gives the
one error message used everywhere for a missing column.
"""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from divscope.errors import DivscopeError

# k values of the overlap_k columns of the token table.
OVERLAP_KS: tuple[int, ...] = (1, 2, 3, 4, 5, 10, 20, 50)

# One row per scored response token. Its trajectory comes first: prompt_id, sample_id, and
# `source`, the model that generated it (the trajectories' `model`, else `score --source`; null
# when neither says).
TOKEN_TABLE: dict[str, pl.DataType] = {
    "prompt_id": pl.String(),
    "sample_id": pl.Int32(),
    "source": pl.String(),
    "position": pl.Int32(),
    "n_tokens": pl.Int32(),
    "rel_position": pl.Float32(),
    "token_id": pl.Int32(),
    "token": pl.String(),
    "logp_base": pl.Float32(),
    "logp_rl": pl.Float32(),
    "entropy_base": pl.Float32(),
    "entropy_rl": pl.Float32(),
    "js": pl.Float32(),
    "js_full": pl.Float32(),
    "kl_base_rl": pl.Float32(),
    "kl_rl_base": pl.Float32(),
    "ce_base_rl": pl.Float32(),
    "top1_base": pl.Int32(),
    "top1_rl": pl.Int32(),
    "rl_top1_rank_in_base": pl.Int32(),
    "rl_top2_rank_in_base": pl.Int32(),
    "rl_top3_rank_in_base": pl.Int32(),
    "p_base_of_rl_top1": pl.Float32(),
    "p_top1_base": pl.Float32(),
    "p_top1_rl": pl.Float32(),
    **{f"overlap_{k}": pl.Float32() for k in OVERLAP_KS},
    "nucleus_base": pl.Int32(),
    "nucleus_rl": pl.Int32(),
    "correct": pl.Boolean(),
}

# Trajectories: the key plus either token ids or text.
TRAJECTORY_KEY: tuple[str, ...] = ("prompt_id", "sample_id")
TRAJECTORY_IDS: tuple[str, ...] = ("prompt_ids", "response_ids")
TRAJECTORY_TEXT: tuple[str, ...] = ("prompt", "response")
TRAJECTORY_OPTIONAL: dict[str, pl.DataType] = {
    "correct": pl.Boolean(),
    "answer": pl.String(),
    "model": pl.String(),
}

# Prompts: prompt_id plus either text or ids.
PROMPT_KEY = "prompt_id"
PROMPT_TEXT = "prompt"
PROMPT_IDS = "prompt_ids"
PROMPT_OPTIONAL: dict[str, pl.DataType] = {"answer": pl.String(), "benchmark": pl.String()}

# One row per response of `divscope generate`: trajectories with both ids and text. The
# prompts' other columns (e.g. `answer`) follow.
GENERATED: dict[str, pl.DataType] = {
    "prompt_id": pl.String(),
    "sample_id": pl.Int32(),
    "prompt": pl.String(),
    "prompt_ids": pl.List(pl.Int32()),
    "response": pl.String(),
    "response_ids": pl.List(pl.Int32()),
    "n_tokens": pl.Int32(),
    "finished": pl.Boolean(),
    "model": pl.String(),
}

# What grading adds to (or replaces in) a table of responses: the verdict, and why it is not a
# clean one (no \boxed{}, timeout, ...; null for a clean verdict).
GRADED: dict[str, pl.DataType] = {
    "correct": pl.Boolean(),
    "grade_note": pl.String(),
}

# One row per generated response of `divscope cross-sample`.
CROSS_SAMPLE: dict[str, pl.DataType] = {
    "prompt_id": pl.String(),
    "sample_id": pl.Int32(),
    "policy": pl.String(),
    "budget": pl.Int32(),
    "eps": pl.Float64(),
    "seed": pl.Int64(),
    "response_ids": pl.List(pl.Int32()),
    "response": pl.String(),
    "n_tokens": pl.Int32(),
    "n_switches": pl.Int32(),
    "n_effective": pl.Int32(),
    "n_effective_coupled": pl.Int32(),
    "switch_positions": pl.List(pl.Int32()),
    "switch_primary_ids": pl.List(pl.Int32()),
    "switch_primary_tokens": pl.List(pl.String()),
    "switch_tokens": pl.List(pl.String()),
    "switch_js": pl.List(pl.Float32()),
    "delta_cosine": pl.List(pl.Float32()),
    "benchmark": pl.String(),
    "finished": pl.Boolean(),
    "correct": pl.Boolean(),
}

# Policy and sampling parameters that `cross-sample` writes after the `CROSS_SAMPLE` columns
# (null where a policy has no such parameter).
CROSS_SAMPLE_PARAMS: dict[str, pl.DataType] = {
    "rate": pl.Float64(),
    "tau": pl.Float64(),
    "lam": pl.Float64(),
    "window": pl.Int32(),
    "alpha": pl.Float64(),
    "share": pl.Float64(),
    "temperature": pl.Float64(),
    "top_p": pl.Float64(),
    "max_new_tokens": pl.Int32(),
    "force_prefix": pl.String(),
    "stratum": pl.String(),
    "match_tol": pl.Float64(),
    "map": pl.String(),
    "map_table": pl.String(),
}

# The columns that, with `policy` and `budget`, identify one experimental setting: responses
# that differ in any of them (null included) are never pooled.
SETTING_COLUMNS: tuple[str, ...] = ("eps", *CROSS_SAMPLE_PARAMS)


def require_columns(
    columns: Iterable[str], required: Iterable[str], *, source: str, what: str = "input"
) -> None:
    """Raise a `DivscopeError` naming every required column that `columns` lacks.

    Args:
        columns: the columns present.
        required: the columns needed.
        source: where the columns came from (a file path or a short description).
        what: what the caller needs them for, used in the message.
    """
    present = set(columns)
    missing = [c for c in required if c not in present]
    if missing:
        raise DivscopeError(
            f"{source}: missing column(s) {', '.join(repr(c) for c in missing)} needed for {what}; "
            f"present: {', '.join(sorted(present)) or '(none)'}."
        )
