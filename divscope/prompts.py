"""Prompts: the prompt file read and validated, and its token ids as the model will see them
(given ids, text, or chat-templated questions). The prompts are read with pyarrow
(`read_prompts_arrow`: `generate` and `cross-sample` need no polars); `read_prompts` gives them
as a polars DataFrame."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from divscope.errors import DivscopeError
from divscope.schema import (
    PROMPT_IDS,
    PROMPT_KEY,
    PROMPT_OPTIONAL_ARROW,
    PROMPT_TEXT,
    require_columns,
)
from divscope.tables import (
    IDS,
    as_arrow,
    cast_table,
    first_duplicate,
    in_memory,
    input_name,
    read_arrow,
)

if TYPE_CHECKING:
    import polars as pl


def read_prompts_arrow(path: str | os.PathLike | Any, *, source: str | None = None) -> pa.Table:
    """Read and validate a prompt file: `prompt_id` (unique) and `prompt` (text) or
    `prompt_ids` (token ids), optional `answer`; other columns are carried through.

    `path` may also be a table already in memory (Arrow, polars or a list of dicts,
    `tables.in_memory`), validated the same way;
    `source` names it in the messages (default: the path).

    Returns the table with `prompt_id` and `answer` as text, `prompt_ids` as lists of int64.

    Raises:
        DivscopeError: a missing column, a null or duplicate prompt id, or a null prompt.

    >>> prompts = read_prompts_arrow("fixtures/lab/prompts/eval.jsonl")  # the lab's
    >>> prompts.num_rows, prompts.schema.field("answer").type
    (256, DataType(large_string))
    """
    table = as_arrow(path) if in_memory(path) else read_arrow(path)
    source = source or input_name(path, "prompts")
    columns = table.column_names
    require_columns(columns, [PROMPT_KEY], source=source, what="prompts")
    column = PROMPT_IDS if PROMPT_IDS in columns else PROMPT_TEXT
    if column not in columns:
        raise DivscopeError(
            f"{source}: prompts need 'prompt' (templated text) or 'prompt_ids' (token ids); "
            f"present: {', '.join(columns)}."
        )
    casts: dict[str, pa.DataType] = {PROMPT_KEY: pa.large_string()}
    casts[column] = IDS if column == PROMPT_IDS else pa.large_string()
    casts |= {c: t for c, t in PROMPT_OPTIONAL_ARROW.items() if c in columns}
    table = cast_table(table, casts, source=source)
    for name in (PROMPT_KEY, column):
        at = pc.index(pc.is_null(table[name]), True).as_py()
        if at >= 0:
            raise DivscopeError(f"{source}: {name!r} is null in row {at}.")
    duplicated = first_duplicate(table, [PROMPT_KEY])
    if duplicated is not None:
        raise DivscopeError(
            f"{source}: duplicate prompt_id {duplicated[PROMPT_KEY]!r}; prompt ids must be unique."
        )
    return table


def read_prompts(path: str | os.PathLike | Any, *, source: str | None = None) -> pl.DataFrame:
    """`read_prompts_arrow` as a polars DataFrame.

    >>> prompts = read_prompts("fixtures/lab/prompts/eval.jsonl")  # the lab's
    >>> prompts.height, prompts["answer"].dtype
    (256, String)
    """
    import polars as pl

    return pl.from_arrow(read_prompts_arrow(path, source=source))


def _column(frame: Any, name: str) -> list:
    """A column of an Arrow table or a polars DataFrame, as a list."""
    return as_arrow(frame)[name].to_pylist()


def _columns(frame: Any) -> list[str]:
    return as_arrow(frame).column_names


def prompt_token_ids(frame: Any, tokenizer: Any, *, source: str) -> list[list[int]]:
    """The token ids of each prompt of `read_prompts_arrow`' table (or a polars frame):
    `prompt_ids` as given, or the text tokenized as the model sees it (special tokens added,
    e.g. BOS).

    Raises:
        DivscopeError: an empty prompt or an id outside the tokenizer's vocabulary.

    >>> from divscope.models.tokenizers import load_tokenizer
    >>> prompts = read_prompts("fixtures/lab/prompts/eval.jsonl").head(2)
    >>> ids = prompt_token_ids(prompts, load_tokenizer("fixtures/lab/base"), source="eval.jsonl")
    >>> [len(prompt) for prompt in ids]
    [48, 55]
    """
    if PROMPT_IDS in _columns(frame):
        prompts = _column(frame, PROMPT_IDS)
    else:
        prompts = [tokenizer(text)["input_ids"] for text in _column(frame, PROMPT_TEXT)]
    vocab = len(tokenizer)
    for prompt_id, ids in zip(_column(frame, PROMPT_KEY), prompts, strict=True):
        if not ids:
            raise DivscopeError(
                f"{source}: prompt_id={prompt_id!r} has no tokens; every prompt needs at least one."
            )
        bad = [i for i in ids if not 0 <= i < vocab]
        if bad:
            raise DivscopeError(
                f"{source}: prompt_id={prompt_id!r} holds token id {bad[0]}, outside the "
                f"tokenizer's vocabulary [0, {vocab}); were these ids made with another tokenizer?"
            )
    return prompts


def chat_prompts(frame: Any, tokenizer: Any, *, source: str) -> tuple[list[str], list[list[int]]]:
    """Each raw question in `prompt` wrapped in the tokenizer's chat template: texts and ids.

    The question becomes one user turn followed by the assistant's generation prompt. The
    templated text carries its own special tokens (BOS), so it is tokenized without adding more.

    Raises:
        DivscopeError: the prompts are token ids, or the tokenizer has no chat template.
    """
    if PROMPT_IDS in _columns(frame):
        raise DivscopeError(
            f"{source}: --chat-template needs raw questions in 'prompt', not 'prompt_ids'; "
            "template the prompts yourself or drop --chat-template."
        )
    if not getattr(tokenizer, "chat_template", None):
        raise DivscopeError(
            f"the tokenizer of {tokenizer.name_or_path!r} has no chat template; drop "
            "--chat-template and give already templated prompts."
        )
    texts = [
        tokenizer.apply_chat_template(
            [{"role": "user", "content": question}], add_generation_prompt=True, tokenize=False
        )
        for question in _column(frame, PROMPT_TEXT)
    ]
    return texts, [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]


def prompt_texts(frame: Any, prompt_ids: list[list[int]], tokenizer: Any) -> list[str]:
    """The prompts as text: `prompt` when given, else the ids decoded (special tokens kept)."""
    if PROMPT_TEXT in _columns(frame):
        return _column(frame, PROMPT_TEXT)
    return tokenizer.batch_decode(prompt_ids, skip_special_tokens=False)


def template_messages(
    messages: list[dict[str, str]], tokenizer: Any, *, system_prompt: str | None = None
) -> tuple[str, list[int]]:
    """One chat prompt through the tokenizer's chat template, as every command applies it:
    `system_prompt` (when given and the messages have no system turn) first, then the
    messages, then the assistant's generation prompt; the text and its ids (the templated text
    carries its own special tokens, so none are added).

    Raises:
        DivscopeError: the tokenizer has no chat template.
    """
    if not getattr(tokenizer, "chat_template", None):
        raise DivscopeError(
            f"the tokenizer of {tokenizer.name_or_path!r} has no chat template; give already "
            "templated prompts (a 'prompt' column) instead of chat messages."
        )
    turns = list(messages)
    if system_prompt is not None and not any(m.get("role") == "system" for m in turns):
        turns = [{"role": "system", "content": system_prompt}, *turns]
    text = tokenizer.apply_chat_template(turns, add_generation_prompt=True, tokenize=False)
    return text, tokenizer(text, add_special_tokens=False)["input_ids"]
