"""Readers of what researchers already have: RL rollout dumps and eval logs, mapped onto
divscope's trajectory columns (docs/contracts.md, "Trajectories"; docs/inputs.md).

Each format is a `Format` in its own module (`divscope/readers/<module>.py`, the upstream
writer's layout in its docstring): how to recognise a file of it from its columns, and how to
read it into a pyarrow table of trajectory columns. `read_responses(path, Reading(...))` is what
`score`, `grade` and `analyze --difficulty` call: `--from auto` (the default) detects the
format and names it on stderr; a file that matches none gets an error listing, for each known
format, the columns it expected.

The readers need pyarrow only (the lean GPU path runs `score --from ...`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

FORMATS: tuple[str, ...] = (
    "divscope",
    "verl",
    "verl-generation",
    "trl",
    "lm-eval",
    "lighteval",
)
"""The formats `--from` accepts (besides `auto`), in detection order. Each is a module of
this package (`-` -> `_`; `divscope` is `native`) with a `FORMAT`."""


@dataclass(frozen=True)
class Format:
    """One input format: its name, how a file of it is recognised, and how it is read."""

    name: str
    """As `--from` takes it: `verl`, `trl`, ..."""
    expected: tuple[str, ...]
    """The columns (keys) a file of this format has at least: detection, and the error
    for a file that matches no format, list them."""
    read: Callable[[pa.Table, ReadContext], pa.Table]
    """The file's raw table -> trajectory columns (`prompt_id`, `sample_id`, `prompt` +
    `response` or `prompt_ids` + `response_ids`, `correct` where the file grades, then the
    format's own columns kept, e.g. `step`)."""
    detect: Callable[[list[str]], bool] | None = None
    """Whether a file with these columns is of this format; default: it has every
    `expected` column."""

    def matches(self, columns: list[str]) -> bool:
        """Whether a file with `columns` is of this format."""
        if self.detect is not None:
            return self.detect(columns)
        return all(c in columns for c in self.expected)


@dataclass(frozen=True)
class ReadContext:
    """What a reader may need besides the file: where it came from, the options, and (lazily)
    the tokenizer that rebuilds token ids from text."""

    source: str
    """The file's path as given, for messages."""
    correct: str | None = None
    """`--correct COLUMN`: the column whose truth is `correct` (overrides the format's own)."""
    prompts: str | None = None
    """`--prompts`: the dataset the rollouts were made from (e.g. verl's parquet with its
    chat `prompt` messages), to rebuild prompt ids exactly; None: from the file's text."""
    system_prompt: str | None = None
    """`--system-prompt`, as the chat template applies it."""
    tokenizer: Callable[[], Any] | None = None
    """The tokenizer, loaded on first call (None: no model at hand, e.g. `grade`)."""


def format_module(name: str):
    """The module of format `name`."""
    module = "native" if name == "divscope" else name.replace("-", "_")
    return importlib.import_module(f"divscope.readers.{module}")


def truth(values: pa.Array | pa.ChunkedArray, column: str, source: str) -> pa.Array:
    """A file's reward or metric column as `correct`: booleans as they are, numbers as
    `value > 0` (verl's and TRL's rewards are 1/0 or 1/-1; lm-eval's and lighteval's metrics 1/0),
    `"true"`/`"false"` strings as booleans; nulls stay null (ungraded).

    >>> truth(pa.array([1.0, 0.0, -1.0, None]), "score", "0.jsonl").to_pylist()
    [True, False, False, None]
    >>> truth(pa.array(["True", "false"]), "acc", "0.jsonl").to_pylist()
    [True, False]

    Raises:
        DivscopeError: the column holds anything else (names the file, column and a value).
    """
    import pyarrow.compute as pc

    from ..errors import DivscopeError

    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    kind = values.type
    if pa.types.is_boolean(kind):
        return values
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_null(kind):
        return pc.greater(values.cast(pa.float64()), 0.0)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        lowered = pc.utf8_lower(values)
        known = pc.is_in(lowered, value_set=pa.array(["true", "false"]))
        if pc.all(pc.or_(known, pc.is_null(lowered))).as_py():
            return pc.equal(lowered, "true")
    bad = next((v for v in values.to_pylist() if v is not None), None)
    raise DivscopeError(
        f"{source}: column {column!r} ({kind}) is not a reward or a grade (e.g. {bad!r}); give "
        "--correct with a boolean or numeric column (numbers > 0 count as correct), or grade "
        "the responses with `divscope grade`."
    )


def formats() -> list[Format]:
    """Every known format, in detection order."""
    return [format_module(name).FORMAT for name in FORMATS]


__all__ = ["FORMATS", "Format", "ReadContext", "format_module", "formats", "truth"]
