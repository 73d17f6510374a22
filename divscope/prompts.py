"""Prompts: the prompt file read and validated, and its token ids as the model will see them
(given ids, text, or chat-templated questions)."""

from __future__ import annotations

import os
from typing import Any

import polars as pl

from divscope.errors import DivscopeError
from divscope.io import cast_columns, read_table
from divscope.schema import PROMPT_IDS, PROMPT_KEY, PROMPT_OPTIONAL, PROMPT_TEXT, require_columns


def read_prompts(
    path: str | os.PathLike | pl.DataFrame, *, source: str | None = None
) -> pl.DataFrame:
    """Read and validate a prompt file: `prompt_id` (unique) and `prompt` (text) or
    `prompt_ids` (token ids), optional `answer`; other columns are carried through.

    `path` may also be a frame already in memory, validated the same way; `source` names it
    in the messages (default: the path).

    Returns the frame with `prompt_id` and `answer` as strings, `prompt_ids` as list[int64].

    Raises:
        DivscopeError: a missing column, a null or duplicate prompt id, or a null prompt.

    >>> prompts = read_prompts("fixtures/lab/prompts/eval.jsonl")  # the lab's
    >>> prompts.height, prompts["answer"].dtype
    (256, String)
    """
    frame = path if isinstance(path, pl.DataFrame) else read_table(path)
    source = source or ("prompts" if isinstance(path, pl.DataFrame) else str(path))
    require_columns(frame.columns, [PROMPT_KEY], source=source, what="prompts")
    column = PROMPT_IDS if PROMPT_IDS in frame.columns else PROMPT_TEXT
    if column not in frame.columns:
        raise DivscopeError(
            f"{source}: prompts need 'prompt' (templated text) or 'prompt_ids' (token ids); "
            f"present: {', '.join(frame.columns)}."
        )
    casts: dict[str, pl.DataType] = {PROMPT_KEY: pl.String()}
    casts[column] = pl.List(pl.Int64()) if column == PROMPT_IDS else pl.String()
    casts |= {c: t for c, t in PROMPT_OPTIONAL.items() if c in frame.columns}
    frame = cast_columns(frame, casts, source=source)
    for name in (PROMPT_KEY, column):
        nulls = frame.with_row_index().filter(pl.col(name).is_null())
        if nulls.height:
            raise DivscopeError(f"{source}: {name!r} is null in row {nulls['index'][0]}.")
    duplicated = frame.filter(pl.col(PROMPT_KEY).is_duplicated())
    if duplicated.height:
        raise DivscopeError(
            f"{source}: duplicate prompt_id {duplicated[PROMPT_KEY][0]!r}; prompt ids must be "
            "unique."
        )
    return frame


def prompt_token_ids(frame: pl.DataFrame, tokenizer: Any, *, source: str) -> list[list[int]]:
    """The token ids of each prompt of `read_prompts`' frame: `prompt_ids` as given, or the text
    tokenized as the model sees it (special tokens added, e.g. BOS).

    Raises:
        DivscopeError: an empty prompt or an id outside the tokenizer's vocabulary.

    >>> from divscope.models.tokenizers import load_tokenizer
    >>> prompts = read_prompts("fixtures/lab/prompts/eval.jsonl").head(2)
    >>> ids = prompt_token_ids(prompts, load_tokenizer("fixtures/lab/base"), source="eval.jsonl")
    >>> [len(prompt) for prompt in ids]
    [48, 55]
    """
    if PROMPT_IDS in frame.columns:
        prompts = frame[PROMPT_IDS].to_list()
    else:
        prompts = [tokenizer(text)["input_ids"] for text in frame[PROMPT_TEXT].to_list()]
    vocab = len(tokenizer)
    for prompt_id, ids in zip(frame[PROMPT_KEY].to_list(), prompts, strict=True):
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


def chat_prompts(
    frame: pl.DataFrame, tokenizer: Any, *, source: str
) -> tuple[list[str], list[list[int]]]:
    """Each raw question in `prompt` wrapped in the tokenizer's chat template: texts and ids.

    The question becomes one user turn followed by the assistant's generation prompt. The
    templated text carries its own special tokens (BOS), so it is tokenized without adding more.

    Raises:
        DivscopeError: the prompts are token ids, or the tokenizer has no chat template.
    """
    if PROMPT_IDS in frame.columns:
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
        for question in frame[PROMPT_TEXT].to_list()
    ]
    return texts, [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]


def prompt_texts(frame: pl.DataFrame, prompt_ids: list[list[int]], tokenizer: Any) -> list[str]:
    """The prompts as text: `prompt` when given, else the ids decoded (special tokens kept)."""
    if PROMPT_TEXT in frame.columns:
        return frame[PROMPT_TEXT].to_list()
    return tokenizer.batch_decode(prompt_ids, skip_special_tokens=False)
