"""Prompt token ids as the model will see them: given ids, text, or chat-templated questions."""

from __future__ import annotations

from typing import Any

import polars as pl

from divscope.errors import DivscopeError
from divscope.schema import PROMPT_IDS, PROMPT_TEXT


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
