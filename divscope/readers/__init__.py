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
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Literal

import pyarrow as pa

from divscope.errors import DivscopeError
from divscope.params import Flag

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
    decoded: bool = True
    """Whether its text was decoded from the generated ids (a dump, a log), so that ids rebuilt
    from it are checked for drift; False for text chosen as the input (divscope's own)."""
    applies_correct: bool = False
    """Whether its reader applies `--correct` itself (a metric of a nested log, e.g. lm-eval's
    `exact_match,flexible-extract`); else `read_responses` takes that column of its output or
    of the file."""

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


FromFormat = Literal["auto", "divscope", "verl", "verl-generation", "trl", "lm-eval", "lighteval"]
"""What `--from` takes: `auto` or one of `FORMATS`."""


@dataclass(frozen=True)
class Reading:
    """How a file of responses is read: its format (`--from`), which column says a response is
    correct, and the dataset (and system prompt) the responses were made from.

    >>> Reading().from_, Reading(from_="verl", correct="acc").correct
    ('auto', 'acc')
    """

    from_: Annotated[FromFormat, Flag("--from")] = "auto"
    """The responses' format: auto (detected from the columns, named on stderr), divscope
    (trajectory columns), verl (rollout or validation dumps, {step}.jsonl or a directory of
    them), verl-generation (main_generation parquet), trl, lm-eval, lighteval (docs/inputs.md)."""
    correct: Annotated[str | None, Flag(metavar="COLUMN")] = None
    """The column whose value says a response is correct (booleans; numbers > 0 count as
    correct), instead of the format's own reward or metric."""
    prompts: Annotated[str | None, Flag(metavar="PATH")] = None
    """The dataset the responses were made from (verl's parquet, chat `prompt` messages): the
    prompt ids are rebuilt through the chat template instead of from the file's decoded text."""
    system_prompt: str | None = None
    """The system turn the chat prompts (--prompts' messages, a `messages` column) are
    templated with when they have none, as `--system-prompt` of generate and cross-sample."""


def format_module(name: str):
    """The module of format `name`."""
    return importlib.import_module(format_module_name(name))


def prompt_key(text: str) -> str:
    """The `prompt_id` of a prompt known by its text alone (verl's and TRL's logs): the first 16
    hex digits of its SHA-256, the same whatever the file's order or step.

    >>> prompt_key("user\\nWhat is 2 + 2?\\nassistant\\n")
    '9a4fee75e7924518'
    """
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:16]


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


def format_module_name(name: str) -> str:
    """The import path of format `name`'s module.

    >>> format_module_name("divscope"), format_module_name("verl-generation")
    ('divscope.readers.native', 'divscope.readers.verl_generation')
    """
    module = "native" if name == "divscope" else name.replace("-", "_")
    return f"divscope.readers.{module}"


READING_KEY = b"divscope.reading"
"""The schema metadata key under which `read_responses` records how it read the file."""


def read_responses(
    path: str | os.PathLike | Any,
    reading: Reading = Reading(),  # noqa: B008 (frozen, hashable)
    tokenizer: Callable[[], Any] | None = None,
) -> pa.Table:
    """Read a file of responses in any known format as trajectory columns.

    The file (JSONL, Parquet, a directory of Parquet parts or of verl's `{step}.jsonl` dumps,
    or a table in memory) is read whole; `reading.from_` `auto` detects its format from its
    columns (`FORMATS`, in order) and names it on stderr, unless it is divscope's own. The
    format's reader maps it onto trajectory columns; `reading.correct` then sets `correct`.
    With `tokenizer`, text becomes token ids (`prompt_ids`, `response_ids`): chat `messages`
    through the chat template (`divscope.prompts.template_messages`), prompt text as the model
    sees it, responses without special tokens; for a format that holds decoded text only, how
    many responses re-tokenize to ids that do not decode back to their text is said on stderr
    (such ids cannot be the generated ones).
    `reading_info` gives what was read (format, file, counts).

    Args:
        path: the file, or a table (Arrow or polars) already in memory.
        reading: the format, the `correct` column, the prompts dataset and the system prompt
            (`Reading`).
        tokenizer: a function that returns the tokenizer (called only when ids are rebuilt
            from text); None: text stays text (e.g. `grade`).

    Returns:
        The trajectory columns: `prompt_id`, `sample_id`, text or ids, `correct` where the
        file grades, then the format's own columns (e.g. `step`), in the file's order.

    Raises:
        DivscopeError: a file that matches no format (listing each format's expected columns
            and the file's) or not the one given, a `--correct` column that is absent or no
            grade, or any reader's error.
    """
    from divscope.distributed import reports
    from divscope.progress import note
    from divscope.tables import as_arrow, in_memory, input_name, local_path, read_arrow

    source = "responses" if in_memory(path) else input_name(path)
    raw = as_arrow(path) if in_memory(path) else _read_raw(local_path(path), read_arrow)
    known = formats()
    if reading.from_ == "auto":
        found = next((f for f in known if f.matches(raw.column_names)), None)
        if found is None:
            raise DivscopeError(_unknown_layout(source, raw.column_names, known))
    else:
        found = format_module(reading.from_).FORMAT
        if not found.matches(raw.column_names):
            raise DivscopeError(
                f"{source}: --from {found.name} expects the columns {', '.join(found.expected)}; "
                f"the file has: {', '.join(raw.column_names) or '(none)'}. Give the format it is "
                "in (--from auto detects it)."
            )
    loader = cache(tokenizer) if tokenizer is not None else None
    context = ReadContext(source, reading.correct, reading.prompts, reading.system_prompt, loader)
    table = found.read(raw, context)
    if reading.correct is not None and not found.applies_correct:
        table = _with_correct(table, raw, reading.correct, source)
    drifted = None
    if loader is not None and "response_ids" not in table.column_names:
        table, drifted = _token_ids(table, loader(), reading.system_prompt, source)
        drifted = drifted if found.decoded else None
    info = {"format": found.name, "source": source, "responses": table.num_rows}
    if drifted is not None:
        info["retokenized"] = {"responses": table.num_rows, "drifted": drifted}
    if found.name != "divscope":
        note(f"reading {source} as {found.name} ({table.num_rows:,} responses)", enabled=reports())
    if drifted:
        note(
            f"{source}: {drifted:,} of {table.num_rows:,} responses re-tokenize to ids that do "
            "not decode back to their text: their token ids are not the generated ones (the "
            "file holds decoded text only).",
            enabled=reports(),
        )
    metadata = dict(table.schema.metadata or {})
    metadata[READING_KEY] = json.dumps(info).encode()
    return table.replace_schema_metadata(metadata)


def reading_info(table: pa.Table) -> dict[str, Any] | None:
    """How `read_responses` read `table`: its `format`, `source` file, number of `responses`,
    and (where ids were rebuilt from text) `retokenized`: responses and how many `drifted`;
    None for a table it did not read.

    >>> reading_info(read_responses("fixtures/lab/trajectories.jsonl"))
    {'format': 'divscope', 'source': 'fixtures/lab/trajectories.jsonl', 'responses': 512}
    """
    value = (table.schema.metadata or {}).get(READING_KEY)
    return None if value is None else json.loads(value)


def require_graded(table: pa.Table) -> pa.Table:
    """`table` (of `read_responses`) itself, once it is known to say which responses are
    correct: graded responses are what `analyze --difficulty` and recovery's reference read.

    Raises:
        DivscopeError: no `correct` column; the message says to grade with `divscope grade`
            or to name the grading column with --correct.

    >>> require_graded(read_responses("fixtures/lab/trajectories.jsonl")).num_rows
    512
    """
    if "correct" in table.column_names:
        return table
    info = reading_info(table) or {"source": "responses", "format": "divscope"}
    raise DivscopeError(
        f"{info['source']}: no 'correct' column (read as {info['format']}: the file grades "
        "nothing, or in a column divscope does not know); grade the responses with `divscope "
        "grade` first, or name the column that grades them with --correct."
    )


def _read_raw(path: Path, read_arrow: Callable[[Path], pa.Table]) -> pa.Table:
    """The file as it is: a directory of `{step}.jsonl` dumps (verl's rollout and validation
    directories) concatenated in step order, anything else by `read_arrow`."""
    dumps = sorted(path.glob("*.jsonl"), key=_step_order) if path.is_dir() else []
    if not dumps:
        return read_arrow(path)
    return pa.concat_tables([read_arrow(d) for d in dumps], promote_options="permissive")


def _step_order(path: Path) -> tuple[int, str]:
    return (int(path.stem), "") if path.stem.isdigit() else (-1, path.stem)


def _unknown_layout(source: str, columns: list[str], known: list[Format]) -> str:
    """The message for a file that matches no format."""
    lines = [f"  {f.name}: {', '.join(f.expected)}" for f in known]
    return (
        f"{source}: matches no known format (--from auto); each format expects these columns "
        "at least:\n" + "\n".join(lines) + f"\nthe file has: {', '.join(columns) or '(none)'}."
        " Pass --from FORMAT to read it as one (its reader then names what is missing), or "
        "convert it to divscope's trajectory columns (docs/contracts.md)."
    )


def _with_correct(table: pa.Table, raw: pa.Table, column: str, source: str) -> pa.Table:
    """`table` with `correct` from `column` (--correct): the reader's output column of that
    name, else the file's own where the reader kept one row per file row."""
    if column in table.column_names:
        values = table[column]
    elif column in raw.column_names and raw.num_rows == table.num_rows:
        values = raw[column]
    else:
        raise DivscopeError(
            f"{source}: --correct {column!r} is not a column of the file "
            f"({', '.join(raw.column_names)}) nor of what its reader made of it "
            f"({', '.join(table.column_names)}); name one of them."
        )
    correct = truth(values, column, source)
    if "correct" in table.column_names:
        return table.set_column(table.schema.get_field_index("correct"), "correct", correct)
    return table.append_column("correct", correct)


def _token_ids(table: pa.Table, tokenizer: Any, system_prompt: str | None, source: str):
    """`table` with `prompt_ids` (chat `messages` as `divscope.prompts.tokenized_prompts`
    templates them, else the prompt text as `divscope.tables.attach_ids` tokenizes it) and
    `response_ids`; and how many responses re-tokenize to ids that decode to other text."""
    import pyarrow.compute as pc

    from divscope.params import Chat
    from divscope.prompts import tokenized_prompts
    from divscope.tables import IDS, attach_ids, first_row, key_of

    for column in ("messages", "prompt", "response"):
        if column in table.column_names:
            row = first_row(table, pc.is_null(table[column]))
            if row is not None:
                raise DivscopeError(f"{source}: column {column!r} is null for {key_of(row)}.")

    if "prompt_ids" not in table.column_names and "messages" in table.column_names:
        chat = Chat(system_prompt=system_prompt)
        _, ids = tokenized_prompts(table, tokenizer, source=source, chat=chat)
        table = table.append_column("prompt_ids", pa.array(ids, IDS))
    table = attach_ids(table, tokenizer)
    texts = table["response"].to_pylist()
    decoded = tokenizer.batch_decode(table["response_ids"].to_pylist(), skip_special_tokens=True)
    return table, sum(a != b for a, b in zip(texts, decoded, strict=True))


__all__ = [
    "FORMATS",
    "READING_KEY",
    "Format",
    "FromFormat",
    "ReadContext",
    "Reading",
    "format_module",
    "format_module_name",
    "formats",
    "prompt_key",
    "read_responses",
    "reading_info",
    "require_graded",
    "truth",
]
