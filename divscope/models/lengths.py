"""Response lengths: each model's context, and the new tokens each prompt leaves room for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from divscope.errors import DivscopeError


def context_length(model) -> int | None:
    """The longest sequence the model accepts, when its config says so."""
    return getattr(model.config, "max_position_embeddings", None)


def new_token_limits(
    prompts: Sequence[tuple[str, Sequence[int]]],
    max_new_tokens: int | None,
    contexts: Mapping[str, int | None],
) -> list[int]:
    """The length cap of each prompt's responses.

    Args:
        prompts: `(prompt_id, token ids)` of each prompt.
        max_new_tokens: the cap asked for, or None for `MAX_NEW_TOKENS` (8,000) capped, prompt
            by prompt, by the smallest context.
        contexts: each model's context (None: no limit), by a name used in messages (`base`).

    Raises:
        DivscopeError: a prompt plus an asked-for `max_new_tokens` exceeds a context, or a
            prompt leaves no room for a response.

    >>> new_token_limits([("a", [1, 2, 3]), ("b", [1])], None, {"base": 10, "rl": 12})
    [7, 9]
    >>> new_token_limits([("a", [1, 2, 3])], 8, {"base": 10})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    divscope.errors.DivscopeError: prompt_id='a' has 3 tokens; ... Lower --max-new-tokens to 7...
    """
    from divscope.defaults import MAX_NEW_TOKENS

    smallest = _smallest_context(contexts)
    if smallest is None:
        return [max_new_tokens or MAX_NEW_TOKENS] * len(prompts)
    name, limit = smallest
    longest_id, longest = max(prompts, key=lambda p: len(p[1]), default=("", ()))
    if max_new_tokens is not None and len(longest) + max_new_tokens > limit:
        raise DivscopeError(
            f"prompt_id={longest_id!r} has {len(longest)} tokens; with --max-new-tokens "
            f"{max_new_tokens} it exceeds {_whose(name)} context of {limit}. Lower "
            f"--max-new-tokens to {max(limit - len(longest), 0)}, or leave it out (then "
            "each response is capped by the context)."
        )
    if len(longest) >= limit:
        raise DivscopeError(
            f"prompt_id={longest_id!r} has {len(longest)} tokens: it fills {_whose(name)} "
            f"context of {limit} and leaves no room for a response; shorten it."
        )
    cap = max_new_tokens or MAX_NEW_TOKENS
    return [min(cap, limit - len(ids)) for _, ids in prompts]


def _smallest_context(contexts: Mapping[str, int | None]) -> tuple[str, int] | None:
    """The model with the smallest known context and that context (None: no model has one)."""
    known = [(name, limit) for name, limit in contexts.items() if limit is not None]
    return min(known, key=lambda item: item[1], default=None)


def _whose(name: str) -> str:
    """`the base model's`; `the model's` for the one model of `generate` (named `model`)."""
    return "the model's" if name == "model" else f"the {name} model's"


def length_note(
    prompts: Sequence[tuple[str, Sequence[int]]],
    max_new_tokens: int | None,
    contexts: Mapping[str, int | None],
) -> str | None:
    """The line that says how the default length cap was capped by a context (None: it was
    not): what the commands print once.

    >>> print(length_note([("a", [1, 2, 3])], None, {"base": 320}))
    responses are capped at 317 new tokens (not 8,000): the base model's context is 320 tokens
    and the longest prompt has 3
    """
    from divscope.defaults import MAX_NEW_TOKENS

    if max_new_tokens is not None or not prompts:
        return None
    limits = new_token_limits(prompts, None, contexts)
    if min(limits) >= MAX_NEW_TOKENS:
        return None
    name, limit = _smallest_context(contexts)  # not None: some prompt was capped
    return (
        f"responses are capped at {min(limits):,} new tokens (not {MAX_NEW_TOKENS:,}): "
        f"{_whose(name)} context is {limit:,} tokens and the longest prompt has "
        f"{max(len(ids) for _, ids in prompts):,}"
    )
