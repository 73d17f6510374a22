"""Column contracts shared by every part of divscope (docs/contracts.md).

Every column that divscope reads or writes is named here, and nowhere else defined: each table
is an ordered mapping column -> Arrow type (`*_ARROW`, or a tuple of names), the types every
output table is written with (text as `large_string`, lists as `large_list`);
`require_columns` gives the one error message used everywhere for a missing column.

The same contracts as polars dtypes (`TOKEN_TABLE` for `TOKEN_TABLE_ARROW`, and so on) are
made from these on first use (`polars_types`): the scoring, generation and decoding path reads
and writes with pyarrow alone and never imports polars.

>>> from divscope.schema import TOKEN_TABLE  # polars, on first use
>>> TOKEN_TABLE_ARROW["token"], str(TOKEN_TABLE["token"])
(DataType(large_string), 'String')
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from divscope.errors import DivscopeError

_TEXT = pa.large_string()
_INT = pa.int32()
_FLOAT = pa.float32()

# k values of the overlap_k columns of the token table.
OVERLAP_KS: tuple[int, ...] = (1, 2, 3, 4, 5, 10, 20, 50)

# One row per scored response token. Its trajectory comes first: prompt_id, sample_id, and
# `source`, the model that generated it (the trajectories' `model`, else `score --source`; null
# when neither says).
TOKEN_TABLE_ARROW: dict[str, pa.DataType] = {
    "prompt_id": _TEXT,
    "sample_id": _INT,
    "source": _TEXT,
    "position": _INT,
    "n_tokens": _INT,
    "rel_position": _FLOAT,
    "token_id": _INT,
    "token": _TEXT,
    "logp_base": _FLOAT,
    "logp_rl": _FLOAT,
    "entropy_base": _FLOAT,
    "entropy_rl": _FLOAT,
    "js": _FLOAT,
    "js_full": _FLOAT,
    "kl_base_rl": _FLOAT,
    "kl_rl_base": _FLOAT,
    "ce_base_rl": _FLOAT,
    "top1_base": _INT,
    "top1_rl": _INT,
    "rl_top1_rank_in_base": _INT,
    "rl_top2_rank_in_base": _INT,
    "rl_top3_rank_in_base": _INT,
    "p_base_of_rl_top1": _FLOAT,
    "p_top1_base": _FLOAT,
    "p_top1_rl": _FLOAT,
    **{f"overlap_{k}": _FLOAT for k in OVERLAP_KS},
    "nucleus_base": _INT,
    "nucleus_rl": _INT,
    "correct": pa.bool_(),
}

# Trajectories: the key plus either token ids or text.
TRAJECTORY_KEY: tuple[str, ...] = ("prompt_id", "sample_id")
TRAJECTORY_IDS: tuple[str, ...] = ("prompt_ids", "response_ids")
TRAJECTORY_TEXT: tuple[str, ...] = ("prompt", "response")
TRAJECTORY_OPTIONAL_ARROW: dict[str, pa.DataType] = {
    "correct": pa.bool_(),
    "answer": _TEXT,
    "model": _TEXT,
}

# Prompts: prompt_id plus text, chat messages or ids.
PROMPT_KEY = "prompt_id"
PROMPT_TEXT = "prompt"
PROMPT_IDS = "prompt_ids"
PROMPT_MESSAGES = "messages"
# A chat prompt's turns, in order: each a role and its text; the roles a prompt may hold.
CHAT_ROLES: tuple[str, ...] = ("system", "user", "assistant")
PROMPT_MESSAGES_ARROW = pa.large_list(pa.struct([("role", _TEXT), ("content", _TEXT)]))
PROMPT_OPTIONAL_ARROW: dict[str, pa.DataType] = {"answer": _TEXT, "benchmark": _TEXT}

# One row per response of `divscope generate`: trajectories with both ids and text. The
# prompts' other columns (e.g. `answer`) follow.
GENERATED_ARROW: dict[str, pa.DataType] = {
    "prompt_id": _TEXT,
    "sample_id": _INT,
    "prompt": _TEXT,
    "prompt_ids": pa.large_list(_INT),
    "response": _TEXT,
    "response_ids": pa.large_list(_INT),
    "n_tokens": _INT,
    "finished": pa.bool_(),
    "model": _TEXT,
}

# What grading adds to (or replaces in) a table of responses: the verdict, and why it is not a
# clean one (no \boxed{}, timeout, ...; null for a clean verdict).
GRADED_ARROW: dict[str, pa.DataType] = {
    "correct": pa.bool_(),
    "grade_note": _TEXT,
}

# One row per generated response of `divscope cross-sample`.
CROSS_SAMPLE_ARROW: dict[str, pa.DataType] = {
    "prompt_id": _TEXT,
    "sample_id": _INT,
    "policy": _TEXT,
    "budget": _INT,
    "eps": pa.float64(),
    "seed": pa.int64(),
    "response_ids": pa.large_list(_INT),
    "response": _TEXT,
    "n_tokens": _INT,
    "n_switches": _INT,
    "n_effective": _INT,
    "n_effective_coupled": _INT,
    "switch_positions": pa.large_list(_INT),
    "switch_primary_ids": pa.large_list(_INT),
    "switch_primary_tokens": pa.large_list(_TEXT),
    "switch_tokens": pa.large_list(_TEXT),
    "switch_js": pa.large_list(_FLOAT),
    "delta_cosine": pa.large_list(_FLOAT),
    "benchmark": _TEXT,
    "finished": pa.bool_(),
    "correct": pa.bool_(),
}

# Policy and sampling parameters that `cross-sample` writes after the `CROSS_SAMPLE` columns
# (null where a policy has no such parameter).
CROSS_SAMPLE_PARAMS_ARROW: dict[str, pa.DataType] = {
    "rate": pa.float64(),
    "tau": pa.float64(),
    "lam": pa.float64(),
    "window": _INT,
    "alpha": pa.float64(),
    "share": pa.float64(),
    "temperature": pa.float64(),
    "top_p": pa.float64(),
    "max_new_tokens": _INT,
    "force_prefix": _TEXT,
    "stratum": _TEXT,
    "match_tol": pa.float64(),
    "map": _TEXT,
    "map_table": _TEXT,
}

# The columns that, with `policy` and `budget`, identify one experimental setting: responses
# that differ in any of them (null included) are never pooled.
SETTING_COLUMNS: tuple[str, ...] = ("eps", *CROSS_SAMPLE_PARAMS_ARROW)


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


def arrow_schema(types: Mapping[str, pa.DataType]) -> pa.Schema:
    """The Arrow schema of a contract (`TOKEN_TABLE_ARROW`, ...), its columns in order.

    >>> arrow_schema(GRADED_ARROW).names
    ['correct', 'grade_note']
    """
    return pa.schema(list(types.items()))


_POLARS: dict[str, dict[str, pa.DataType]] = {
    name.removesuffix("_ARROW"): value
    for name, value in dict(globals()).items()
    if name.endswith("_ARROW") and isinstance(value, dict)
}


def polars_types(types: Mapping[str, pa.DataType]) -> dict[str, Any]:
    """A contract's columns as polars dtypes (`large_string` -> `String`, ...); imports polars.

    >>> {name: str(dtype) for name, dtype in polars_types(GRADED_ARROW).items()}
    {'correct': 'Boolean', 'grade_note': 'String'}
    """
    import polars as pl

    return dict(pl.from_arrow(arrow_schema(types).empty_table()).schema)


@functools.cache
def _polars_contract(name: str) -> dict[str, Any]:
    return polars_types(_POLARS[name])


def __getattr__(name: str) -> Any:
    """`TOKEN_TABLE`, `CROSS_SAMPLE`, ...: the `*_ARROW` contract as polars dtypes."""
    if name not in _POLARS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return dict(_polars_contract(name))
