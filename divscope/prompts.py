"""Prompts: the prompt file read and validated, and its token ids as the model will see them
(given ids, text, or chat prompts through the tokenizer's chat template). The prompts are read
with pyarrow (`read_prompts_arrow`: `generate` and `cross-sample` need no polars);
`read_prompts` gives them as a polars DataFrame. `template_messages` is the one place where the
chat template is applied."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from divscope.errors import DivscopeError
from divscope.params import Chat
from divscope.schema import (
    CHAT_ROLES,
    PROMPT_IDS,
    PROMPT_KEY,
    PROMPT_MESSAGES,
    PROMPT_MESSAGES_ARROW,
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
    """Read and validate a prompt file: `prompt_id` (unique) and the prompts, as token ids
    (`prompt_ids`), chat turns (`messages`: a list of {role, content}, `check_messages`) or
    text (`prompt`), the first of these present; optional `answer`; other columns are carried
    through.

    `path` may also be a table already in memory (Arrow, polars or a list of dicts,
    `tables.in_memory`), validated the same way;
    `source` names it in the messages (default: the path).

    Returns the table with `prompt_id` and `answer` as text, `prompt_ids` as lists of int64,
    `messages` as lists of {role, content} (`schema.PROMPT_MESSAGES_ARROW`; the turns' other
    fields dropped).

    Raises:
        DivscopeError: a missing column, a null or duplicate prompt id, a null prompt, or chat
            turns of another shape or role.

    >>> prompts = read_prompts_arrow("fixtures/lab/prompts/eval.jsonl")  # the lab's
    >>> prompts.num_rows, prompts.schema.field("answer").type
    (256, DataType(large_string))
    """
    table = as_arrow(path) if in_memory(path) else read_arrow(path)
    source = source or input_name(path, "prompts")
    columns = table.column_names
    require_columns(columns, [PROMPT_KEY], source=source, what="prompts")
    column = _prompt_column(columns)
    if column is None:
        raise DivscopeError(
            f"{source}: prompts need 'prompt' (text), 'messages' (chat turns) or 'prompt_ids' "
            f"(token ids); present: {', '.join(columns)}."
        )
    if column == PROMPT_TEXT and _holds_turns(table.schema.field(PROMPT_TEXT).type):
        raise DivscopeError(
            f"{source}: 'prompt' holds chat turns (a list of role, content), as in verl's "
            "datasets; name the column 'messages' (they then go through the chat template)."
        )
    casts: dict[str, pa.DataType] = {PROMPT_KEY: pa.large_string()}
    if column != PROMPT_MESSAGES:  # cast by `_checked_messages`
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
    if column == PROMPT_MESSAGES:
        table = _checked_messages(table, source)
    return table


def read_prompts(path: str | os.PathLike | Any, *, source: str | None = None) -> pl.DataFrame:
    """`read_prompts_arrow` as a polars DataFrame.

    >>> prompts = read_prompts("fixtures/lab/prompts/eval.jsonl")  # the lab's
    >>> prompts.height, prompts["answer"].dtype
    (256, String)
    """
    import polars as pl

    return pl.from_arrow(read_prompts_arrow(path, source=source))


def _prompt_column(columns: list[str]) -> str | None:
    """The column that holds the prompts: the first of ids, chat turns and text present."""
    return next((c for c in (PROMPT_IDS, PROMPT_MESSAGES, PROMPT_TEXT) if c in columns), None)


def _holds_turns(kind: pa.DataType) -> bool:
    """Whether a column of type `kind` holds lists of chat turns: structs with role and
    content (other fields too)."""
    turn = kind.value_type if pa.types.is_list(kind) or pa.types.is_large_list(kind) else None
    struct = turn is not None and pa.types.is_struct(turn)
    fields = [turn.field(i).name for i in range(turn.num_fields)] if struct else []
    return "role" in fields and "content" in fields


def _checked_messages(table: pa.Table, source: str) -> pa.Table:
    """`table` with its `messages` checked (`check_messages`) and cast to their one type."""
    kind = table.schema.field(PROMPT_MESSAGES).type
    if not _holds_turns(kind):
        raise DivscopeError(
            f"{source}: column 'messages' has type {kind}; it must hold each prompt's chat turns "
            'as a list of {role, content}, e.g. [{"role": "user", "content": "What is 2 + 2?"}].'
        )
    keys, conversations = table[PROMPT_KEY].to_pylist(), table[PROMPT_MESSAGES].to_pylist()
    turns = [
        check_messages(messages, where=f"{source}: prompt_id={key!r}")
        for key, messages in zip(keys, conversations, strict=True)
    ]
    at = table.schema.get_field_index(PROMPT_MESSAGES)
    return table.set_column(at, PROMPT_MESSAGES, pa.array(turns, PROMPT_MESSAGES_ARROW))


def check_messages(messages: Any, *, where: str) -> list[dict[str, str]]:
    """One prompt's chat turns, checked: a non-empty list of {role, content}, each role one of
    `schema.CHAT_ROLES`, a system turn only first, every content text, and the last turn the
    user's (the model writes the assistant's answer to it).

    Returns the turns with their role and content only.

    Raises:
        DivscopeError: naming `where` (the file and prompt) and the turn at fault.

    >>> check_messages([{"role": "user", "content": "2 + 2?", "name": None}], where="p")
    [{'role': 'user', 'content': '2 + 2?'}]
    >>> check_messages([{"role": "tool", "content": "4"}], where="q.jsonl: prompt_id='a'")
    Traceback (most recent call last):
    ...
    divscope.errors.DivscopeError: q.jsonl: prompt_id='a': turn 0 has role 'tool'; the roles are system, user, assistant.
    """  # noqa: E501 (a doctest's output is one line)
    if not isinstance(messages, list | tuple) or not messages:
        raise DivscopeError(
            f"{where}: 'messages' holds no turns; give a list of {{role, content}}, the last "
            "one the user's."
        )
    turns = []
    for j, message in enumerate(messages):
        if not isinstance(message, dict):
            raise DivscopeError(f"{where}: turn {j} is {message!r}, not a {{role, content}}.")
        role, content = message.get("role"), message.get("content")
        if role not in CHAT_ROLES:
            raise DivscopeError(
                f"{where}: turn {j} has role {role!r}; the roles are {', '.join(CHAT_ROLES)}."
            )
        if not isinstance(content, str):
            raise DivscopeError(f"{where}: turn {j} ({role}) has content {content!r}, not text.")
        if role == "system" and j > 0:
            raise DivscopeError(
                f"{where}: turn {j} is a system turn; only the first turn may be the system's."
            )
        turns.append({"role": role, "content": content})
    if turns[-1]["role"] != "user":
        raise DivscopeError(
            f"{where}: the last turn is the {turns[-1]['role']}'s; end with a user turn (the "
            "model writes the assistant's answer to it)."
        )
    return turns


def _column(frame: Any, name: str) -> list:
    """A column of an Arrow table or a polars DataFrame, as a list."""
    return as_arrow(frame)[name].to_pylist()


def _columns(frame: Any) -> list[str]:
    return as_arrow(frame).column_names


def uses_chat_template(frame: Any, chat: Chat, *, source: str) -> bool:
    """Whether the prompts of `frame` (`read_prompts_arrow`' table or a polars frame) go
    through the chat template under `chat`: chat turns (`messages`) always do, text (`prompt`)
    with `chat.chat_template`, token ids (`prompt_ids`) never.

    Raises:
        DivscopeError: `chat_template` or `system_prompt` given with token ids, or a
            `system_prompt` for text without `chat_template`.

    >>> import pyarrow as pa
    >>> questions = pa.table({"prompt_id": ["a"], "prompt": ["What is 2 + 2?"]})
    >>> uses_chat_template(questions, Chat(chat_template=True), source="q.jsonl")
    True
    >>> uses_chat_template(questions, Chat(system_prompt="Be brief."), source="q.jsonl")
    Traceback (most recent call last):
    ...
    divscope.errors.DivscopeError: q.jsonl: --system-prompt needs chat prompts: pass --chat-template to wrap each question of 'prompt' as a user turn, or give a 'messages' column.
    """  # noqa: E501 (a doctest's output is one line)
    column = _prompt_column(_columns(frame))
    if column == PROMPT_IDS:
        flags = [("--chat-template", chat.chat_template), ("--system-prompt", chat.system_prompt)]
        given = " and ".join(flag for flag, value in flags if value not in (False, None))
        if given:
            raise DivscopeError(
                f"{source}: {given} need chat turns ('messages') or raw questions ('prompt'), "
                f"not 'prompt_ids'; template the prompts yourself or drop {given}."
            )
        return False
    if column == PROMPT_TEXT and not chat.chat_template:
        if chat.system_prompt is not None:
            raise DivscopeError(
                f"{source}: --system-prompt needs chat prompts: pass --chat-template to wrap "
                "each question of 'prompt' as a user turn, or give a 'messages' column."
            )
        return False
    return True


def chat_settings(frame: Any, chat: Chat, *, source: str) -> dict[str, Any]:
    """The chat settings an output records (and a resumed run must match): whether the
    prompts went through the chat template (`uses_chat_template`) and the system prompt.

    >>> import pyarrow as pa
    >>> questions = pa.table({"prompt_id": ["a"], "prompt": ["What is 2 + 2?"]})
    >>> chat_settings(questions, Chat(True, "Be brief."), source="q.jsonl")
    {'chat_template': True, 'system_prompt': 'Be brief.'}
    """
    templated = uses_chat_template(frame, chat, source=source)
    return {"chat_template": templated, "system_prompt": chat.system_prompt}


def tokenized_prompts(
    frame: Any,
    tokenizer: Any,
    *,
    source: str,
    chat: Chat = Chat(),  # noqa: B008 (frozen)
) -> tuple[list[str], list[list[int]]]:
    """Each prompt of `frame` (`read_prompts_arrow`' table or a polars frame) as the model sees
    it: its text and its token ids.

    Chat prompts (`uses_chat_template`) go through `template_messages`: the `messages`, or the
    question of `prompt` as one user turn, after `chat.system_prompt`. Otherwise `prompt_ids`
    are taken as given (the text: `prompt` when given, else the ids decoded, special tokens
    kept), and `prompt` text is tokenized with the tokenizer's special tokens added (e.g. BOS).

    Raises:
        DivscopeError: chat settings the prompts cannot take (`uses_chat_template`), a
            tokenizer without a chat template for chat prompts, an empty prompt or an id
            outside the tokenizer's vocabulary.

    >>> from divscope.models.tokenizers import load_tokenizer
    >>> prompts = read_prompts("fixtures/lab/prompts/eval.jsonl").head(2)
    >>> texts, ids = tokenized_prompts(prompts, load_tokenizer("fixtures/lab/base"), source="eval")
    >>> texts[0][:20], [len(prompt) for prompt in ids]
    ('Ana has 11 stickers.', [48, 55])
    """
    keys, columns = _column(frame, PROMPT_KEY), _columns(frame)
    if uses_chat_template(frame, chat, source=source):
        conversations = (
            _column(frame, PROMPT_MESSAGES)
            if PROMPT_MESSAGES in columns
            else [[{"role": "user", "content": text}] for text in _column(frame, PROMPT_TEXT)]
        )
        templated = [
            template_messages(
                turns,
                tokenizer,
                system_prompt=chat.system_prompt,
                where=f"{source}: prompt_id={key!r}",
            )  # fmt: skip
            for key, turns in zip(keys, conversations, strict=True)
        ]
        texts, prompts = [text for text, _ in templated], [ids for _, ids in templated]
    elif PROMPT_IDS in columns:
        prompts = _column(frame, PROMPT_IDS)
        texts = (
            _column(frame, PROMPT_TEXT)
            if PROMPT_TEXT in columns
            else tokenizer.batch_decode(prompts, skip_special_tokens=False)
        )
    else:
        texts = _column(frame, PROMPT_TEXT)
        prompts = [tokenizer(text)["input_ids"] for text in texts]
    vocab = len(tokenizer)
    for prompt_id, ids in zip(keys, prompts, strict=True):
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
    return texts, prompts


def prompt_token_ids(
    frame: Any,
    tokenizer: Any,
    *,
    source: str,
    chat: Chat = Chat(),  # noqa: B008 (frozen)
) -> list[list[int]]:
    """The token ids of `tokenized_prompts`: each prompt's ids as the model sees them.

    >>> from divscope.models.tokenizers import load_tokenizer
    >>> prompts = read_prompts("fixtures/lab/prompts/eval.jsonl").head(2)
    >>> ids = prompt_token_ids(prompts, load_tokenizer("fixtures/lab/base"), source="eval.jsonl")
    >>> [len(prompt) for prompt in ids]
    [48, 55]
    """
    return tokenized_prompts(frame, tokenizer, source=source, chat=chat)[1]


def template_messages(
    messages: list[dict[str, str]],
    tokenizer: Any,
    *,
    system_prompt: str | None = None,
    where: str = "a chat prompt",
) -> tuple[str, list[int]]:
    """One chat prompt through the tokenizer's chat template, as every command applies it:
    `system_prompt` (when given and the messages have no system turn) first, then the
    messages, then the assistant's generation prompt; the text and its ids (the templated text
    carries its own special tokens, so none are added).

    Raises:
        DivscopeError: the tokenizer has no chat template, or its template refuses the turns
            (`where` names the prompt, e.g. its file and prompt id).
    """
    if not getattr(tokenizer, "chat_template", None):
        raise DivscopeError(
            f"the tokenizer of {tokenizer.name_or_path!r} has no chat template; give already "
            "templated prompts in a 'prompt' column (without --chat-template), or a model whose "
            "tokenizer has one."
        )
    turns = list(messages)
    if system_prompt is not None and not any(m.get("role") == "system" for m in turns):
        turns = [{"role": "system", "content": system_prompt}, *turns]
    try:
        text = tokenizer.apply_chat_template(turns, add_generation_prompt=True, tokenize=False)
    except Exception as error:  # jinja's TemplateError, or the template's raise_exception()
        roles = ", ".join(str(turn.get("role")) for turn in turns)
        raise DivscopeError(
            f"{where}: the chat template of {tokenizer.name_or_path!r} refuses its turns "
            f"({roles}): {error}"
        ) from error
    return text, tokenizer(text, add_special_tokens=False)["input_ids"]
