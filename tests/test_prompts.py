"""`divscope.prompts`: the prompt file's three kinds of prompt (token ids, chat turns, text), the
checks on chat turns, and the one chat-template application (`template_messages`) on Qwen's real
ChatML tokenizer (tests/qwen.py)."""

from __future__ import annotations

import json

import polars as pl
import pytest

from divscope.errors import DivscopeError
from divscope.params import Chat
from divscope.prompts import (
    read_prompts_arrow,
    template_messages,
    tokenized_prompts,
    uses_chat_template,
)
from divscope.schema import PROMPT_MESSAGES_ARROW
from tests.qwen import IM_END_ID, IM_START_ID

QUESTION = "Combien font 3 + 4 ? Réponds en \\boxed{}. 🤖"
SYSTEM = "Please reason step by step, and put your final answer within \\boxed{}."
DEFAULT_SYSTEM = "You are a helpful assistant."  # what Qwen's template adds without a system turn


@pytest.fixture(scope="module")
def chatml(qwen_tokenizer_dir):
    """Qwen's tokenizer with its ChatML template, as `load_tokenizer` reads a checkpoint's."""
    from divscope.models.tokenizers import load_tokenizer

    return load_tokenizer(str(qwen_tokenizer_dir))


def _user(text=QUESTION):
    return {"role": "user", "content": text}


def _write(path, rows):
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    return path


# ------------------------------------------------------------------------- the prompt file


def test_messages_are_read_checked_and_given_one_type(tmp_path):
    rows = [
        {"prompt_id": "a", "messages": [_user()], "answer": 7},
        {
            "prompt_id": "b",
            "messages": [
                {"role": "system", "content": SYSTEM, "name": "sys"},  # an extra field: dropped
                _user("2 + 2?"),
                {"role": "assistant", "content": "4"},
                _user("And 3 + 3?"),
            ],
        },
    ]
    prompts = read_prompts_arrow(_write(tmp_path / "chats.jsonl", rows))
    assert prompts.schema.field("messages").type == PROMPT_MESSAGES_ARROW
    assert prompts["messages"].to_pylist()[1][0] == {"role": "system", "content": SYSTEM}
    assert prompts["answer"].to_pylist() == ["7", None]
    in_memory = read_prompts_arrow(pl.DataFrame(rows[:1]).drop("answer"))  # a polars frame
    assert in_memory["messages"].to_pylist() == [[_user()]]


@pytest.mark.parametrize(
    "messages, message",
    [
        ([{"role": "tool", "content": "4"}, _user()], "turn 0 has role 'tool'; the roles are"),
        ([{"content": "hi"}], "turn 0 has role None"),
        ([_user(), {"role": "system", "content": SYSTEM}, _user()], "turn 1 is a system turn"),
        ([_user(), {"role": "assistant", "content": "7"}], "the last turn is the assistant's"),
        ([{"role": "system", "content": SYSTEM}], "the last turn is the system's"),
        ([{"role": "user"}], r"turn 0 \(user\) has content None, not text"),
        ([], "'messages' holds no turns"),
    ],
)
def test_bad_turns_are_refused_naming_the_file_and_prompt(tmp_path, messages, message):
    rows = [
        {"prompt_id": "good", "messages": [_user()]},
        {"prompt_id": "bad", "messages": messages},
    ]
    path = _write(tmp_path / "chats.jsonl", rows)
    with pytest.raises(DivscopeError, match=f"^{path}: prompt_id='bad': {message}"):
        read_prompts_arrow(path)


@pytest.mark.parametrize(
    "messages, message",
    [
        (None, "'messages' is null in row 1"),
        ("What is 2 + 2?", "column 'messages' has type large_string; it must hold each prompt's"),
        (["What is 2 + 2?"], "column 'messages' has type large_list<.*>; it must hold"),
        ([{"text": "hi"}], r"column 'messages' has type .*list of \{role, content\}"),
    ],
)
def test_messages_of_another_shape_are_refused_naming_the_file(tmp_path, messages, message):
    rows = [{"prompt_id": "a", "messages": [_user()] if messages is None else messages}]
    path = _write(tmp_path / "chats.jsonl", [*rows, {"prompt_id": "b", "messages": messages}])
    with pytest.raises(DivscopeError, match=f"^{path}: {message}"):
        read_prompts_arrow(path)


@pytest.mark.parametrize(
    "columns, used",
    [
        (("prompt_ids", "messages", "prompt"), "prompt_ids"),
        (("messages", "prompt"), "messages"),
        (("prompt",), "prompt"),
    ],
)
def test_token_ids_then_messages_then_text(chatml, columns, used):
    """The first of prompt_ids, messages and prompt present holds the prompts."""
    values = {"prompt_ids": [[1, 2, 3]], "messages": [[_user()]], "prompt": ["plain text"]}
    frame = pl.DataFrame({"prompt_id": ["a"], **{c: values[c] for c in columns}})
    ids = tokenized_prompts(read_prompts_arrow(frame), chatml, source="p")[1][0]
    if used == "prompt_ids":
        assert ids == [1, 2, 3]
    elif used == "messages":
        assert ids == template_messages([_user()], chatml)[1]
    else:
        assert ids == chatml("plain text")["input_ids"]


def test_chat_turns_under_prompt_are_told_to_be_messages(tmp_path):
    """verl's datasets hold the chat turns in `prompt`."""
    path = _write(tmp_path / "verl.jsonl", [{"prompt_id": "a", "prompt": [_user()]}])
    with pytest.raises(DivscopeError, match="'prompt' holds chat turns .* name the column 'mes"):
        read_prompts_arrow(path)


def test_no_prompt_column_names_all_three(tmp_path):
    path = _write(tmp_path / "p.jsonl", [{"prompt_id": "a", "question": "2 + 2?"}])
    with pytest.raises(DivscopeError, match="'prompt' .*'messages' .*'prompt_ids'"):
        read_prompts_arrow(path)


# ------------------------------------------------------------ when the chat template applies


TEXT = {"prompt_id": ["a"], "prompt": [QUESTION]}
MESSAGES = {"prompt_id": ["a"], "messages": [[_user()]]}
IDS = {"prompt_id": ["a"], "prompt_ids": [[1, 2]]}


@pytest.mark.parametrize(
    "columns, chat, expected",
    [
        (TEXT, Chat(), False),
        (TEXT, Chat(chat_template=True), True),
        (TEXT, Chat(chat_template=True, system_prompt=SYSTEM), True),
        (TEXT, Chat(system_prompt=SYSTEM), "--system-prompt needs chat prompts: pass --chat-tem"),
        (MESSAGES, Chat(), True),  # messages imply the template: no flag needed
        (MESSAGES, Chat(chat_template=True), True),
        (MESSAGES, Chat(system_prompt=SYSTEM), True),
        (IDS, Chat(), False),
        (IDS, Chat(chat_template=True), "p.jsonl: --chat-template need .*not 'prompt_ids'"),
        (IDS, Chat(system_prompt=SYSTEM), "--system-prompt need .*drop --system-prompt"),
    ],
)
def test_when_the_chat_template_applies(columns, chat, expected):
    frame = read_prompts_arrow(pl.DataFrame(columns), source="p.jsonl")
    if isinstance(expected, str):
        with pytest.raises(DivscopeError, match=expected):
            uses_chat_template(frame, chat, source="p.jsonl")
    else:
        assert uses_chat_template(frame, chat, source="p.jsonl") is expected


# ------------------------------------------------- the one chat template, on Qwen's ChatML


CONVERSATIONS = {
    "one user turn": [_user()],
    "own system turn": [{"role": "system", "content": "Answer in French."}, _user()],
    "several turns": [_user("2 + 2?"), {"role": "assistant", "content": "4"}, _user()],
}


@pytest.mark.parametrize("system_prompt", [None, SYSTEM])
@pytest.mark.parametrize("name", CONVERSATIONS)
def test_templated_ids_are_the_tokenizers_own(chatml, name, system_prompt):
    """The ids equal `apply_chat_template(tokenize=True)`'s on the same turns; the system
    prompt comes first exactly once, unless the turns have their own; the answer's tokens
    follow the prompt at the same positions as in the whole conversation's ids."""
    turns = CONVERSATIONS[name]
    text, ids = template_messages(turns, chatml, system_prompt=system_prompt)
    own = turns[0]["role"] == "system"
    expected_turns = turns if own or system_prompt is None else [
        {"role": "system", "content": system_prompt}, *turns
    ]  # fmt: skip
    expected = chatml.apply_chat_template(
        expected_turns, add_generation_prompt=True, tokenize=True, return_dict=False
    )
    assert ids == list(expected)
    assert text.endswith("<|im_start|>assistant\n")
    assert ids.count(IM_START_ID) == len(turns) + 1 + (not own)  # system, turns, assistant
    assert ids.count(IM_END_ID) == len(turns) + (not own)
    system = "Answer in French." if own else system_prompt or DEFAULT_SYSTEM
    assert text.count(system) == 1 and text.startswith(f"<|im_start|>system\n{system}")
    if system_prompt is not None and own:
        assert system_prompt not in text  # a prompt's own system turn wins
    answer = {"role": "assistant", "content": "So 3 + 4 = \\boxed{7}."}
    whole = chatml.apply_chat_template([*expected_turns, answer], tokenize=True, return_dict=False)
    assert list(whole[: len(ids)]) == ids  # the response starts at len(ids), as scored


def test_messages_give_the_ids_of_chat_template_on_the_question(chatml):
    """A `messages` file of one user turn per prompt and a `prompt` file of the same questions
    with --chat-template give the same texts and ids, with or without a system prompt."""
    questions = [QUESTION, "计算 5 × 6", "  spaces\tand\nnewlines  "]
    keys = [f"q{i}" for i in range(len(questions))]
    text = read_prompts_arrow(pl.DataFrame({"prompt_id": keys, "prompt": questions}))
    chats = read_prompts_arrow(
        pl.DataFrame({"prompt_id": keys, "messages": [[_user(q)] for q in questions]})
    )
    for system_prompt in (None, SYSTEM):
        chat = Chat(chat_template=True, system_prompt=system_prompt)
        expected = tokenized_prompts(text, chatml, source="q", chat=chat)
        for flag in (False, True):  # messages are templated with or without the flag
            chat = Chat(chat_template=flag, system_prompt=system_prompt)
            assert tokenized_prompts(chats, chatml, source="q", chat=chat) == expected
    plain = tokenized_prompts(text, chatml, source="q")
    assert plain == (questions, [chatml(q)["input_ids"] for q in questions])


def test_a_template_that_refuses_the_turns_names_the_prompt(tiny_pair):
    from divscope.models.tokenizers import load_tokenizer

    tokenizer = load_tokenizer(str(tiny_pair[0]))
    chats = read_prompts_arrow(
        pl.DataFrame({"prompt_id": ["ok", "two"], "messages": [[_user("w1")], [_user(), _user()]]})
    )
    with pytest.raises(DivscopeError, match="has no chat template"):
        tokenized_prompts(chats, tokenizer, source="chats.jsonl")
    tokenizer.chat_template = (
        "{% for m in messages %}{% if loop.index0 % 2 == 1 and m['role'] == 'user' %}"
        "{{ raise_exception('roles must alternate') }}{% endif %} {{ m['content'] }}{% endfor %}"
    )
    with pytest.raises(DivscopeError, match="chats.jsonl: prompt_id='two': .*refuses its turns "
                       r"\(user, user\): roles must alternate"):  # fmt: skip
        tokenized_prompts(chats, tokenizer, source="chats.jsonl")
