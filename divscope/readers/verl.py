"""verl's rollout and validation dumps (`trainer.rollout_data_dir`, `trainer.validation_data_dir`).

The layout, from verl's `RayPPOTrainer._dump_generations` (verl/trainer/ppo/ray_trainer.py,
volcengine/verl): one `{global_step}.jsonl` per step, one line per response, with `input` (the
prompt ids decoded with `skip_special_tokens=True`: left padding and the chat template's special
tokens gone), `output` (the response ids decoded the same way: its EOS gone), `gts` (the
reward model's ground truth), `score` (the summed token-level reward), `step`, then each reward
extra as long as the batch (`acc`, `pred`, ...; the validation dump adds `reward`, the rollout
dump `request_id` with async rollouts). `_log_rollout_data` writes the rollout dump of the
batch after balancing (`trainer.balance_batch` reorders the rows), `_validate` the validation
dump, its prompts repeated `val_kwargs.n` times.

Mapping: `prompt_id` = the first 16 hex digits of the sha256 of `input` (one prompt, one id,
whatever the order); `sample_id` = the response's rank among its prompt's responses in content
order (step, then `output`, then the rest of the row), so a reordered batch reads the same;
`prompt` = `input`, `response` = `output`, `correct` = `score` > 0, `answer` = `gts` (as text);
`step`, `score` and the reward extras are kept. No EOS is added to the response: the text lost
it. With `--prompts` (verl's dataset parquet, chat messages in `prompt`), each `input` is
matched to the dataset row whose templated prompt decodes to it, and its `messages` give the
prompt ids through the chat template (`divscope.prompts.template_messages`), exact where the
decoded text is not.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc

from divscope.errors import DivscopeError
from divscope.readers import Format, ReadContext, prompt_key, truth

RENAMED = {"input": "prompt", "output": "response", "gts": "answer"}
"""verl's columns that become trajectory columns."""


def content_ranks(keys: list[str], order: list[tuple]) -> list[int]:
    """Each row's rank among the rows of its key, the rows ordered by `order`.

    >>> content_ranks(["a", "b", "a"], [(0, "z"), (0, "y"), (0, "x")])
    [1, 0, 0]
    """
    ranks = [0] * len(keys)
    seen: dict[str, int] = {}
    for at in sorted(range(len(keys)), key=lambda i: (keys[i], order[i])):
        ranks[at] = seen.get(keys[at], 0)
        seen[keys[at]] = ranks[at] + 1
    return ranks


def read(table: pa.Table, context: ReadContext) -> pa.Table:
    """A verl dump as trajectory columns (the module's docstring gives the mapping)."""
    rows = table.to_pylist()
    inputs = table["input"].to_pylist()
    ids = [prompt_key(text) for text in inputs]
    order = [
        (row["step"], row["output"], json.dumps(row, sort_keys=True, default=str)) for row in rows
    ]
    kept = [c for c in table.column_names if c not in RENAMED]
    columns: dict[str, pa.Array | pa.ChunkedArray] = {
        "prompt_id": pa.array(ids, pa.large_string()),
        "sample_id": pa.array(content_ranks(ids, order), pa.int32()),
        "prompt": table["input"],
        "response": table["output"],
        "correct": truth(table["score"], "score", context.source),
    }
    if "gts" in table.column_names:
        gts = table["gts"]
        text = pa.types.is_string(gts.type) or pa.types.is_large_string(gts.type)
        if text or pa.types.is_integer(gts.type) or pa.types.is_floating(gts.type):
            columns["answer"] = pc.cast(gts, pa.large_string())
        else:
            kept.insert(0, "gts")
    if context.prompts is not None and context.tokenizer is not None:
        columns["messages"] = _messages(inputs, context)
    columns |= {c: table[c] for c in kept}
    return pa.table(columns)


def _messages(inputs: list[str], context: ReadContext) -> pa.Array:
    """The chat messages of each `input`: the dataset row (`context.prompts`) whose prompt,
    templated and decoded as verl decodes it, is that text."""
    from divscope.prompts import check_messages, template_messages
    from divscope.tables import read_arrow

    dataset = read_arrow(context.prompts)
    column = next((c for c in ("prompt", "messages") if c in dataset.column_names), None)
    if column is None or not pa.types.is_large_list(dataset.schema.field(column).type):
        raise DivscopeError(
            f"{context.prompts}: --prompts needs chat messages (a list of role/content) in "
            f"'prompt' or 'messages', as verl's datasets have; present: "
            f"{', '.join(dataset.column_names)}."
        )
    tokenizer = context.tokenizer()
    by_text: dict[str, list] = {}
    for row, messages in enumerate(dataset[column].to_pylist()):
        turns = check_messages(messages, where=f"{context.prompts}: row {row}")
        _, ids = template_messages(turns, tokenizer, system_prompt=context.system_prompt)
        by_text.setdefault(tokenizer.decode(ids, skip_special_tokens=True), turns)
    unmatched = [text for text in inputs if text not in by_text]
    if unmatched:
        raise DivscopeError(
            f"{context.source}: {len(unmatched):,} of {len(inputs):,} inputs match no prompt of "
            f"{context.prompts} once templated and decoded (e.g. {unmatched[0][:80]!r}); give "
            "the dataset the rollouts were made from and the model whose chat template made "
            "them, or drop --prompts to tokenize the decoded text."
        )
    return pa.array([by_text[text] for text in inputs])


FORMAT = Format("verl", ("input", "output", "score", "step"), read)
"""verl's `{step}.jsonl` rollout and validation dumps."""
