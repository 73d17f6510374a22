"""lighteval's details: `lighteval ... --save-details` writes
`<output_dir>/details/<model>/<date>/details_<task>_<date>.parquet` (upstream:
huggingface/lighteval, `src/lighteval/logging/evaluation_tracker.py`,
`EvaluationTracker.save` and `save_details`; the row is `DetailsLogger.Detail` in
`src/lighteval/logging/info_loggers.py`).

One row per document, three struct columns: `doc` (`lighteval.tasks.requests.Doc`: `query`,
`choices`, `gold_index`, `id`, `task_name`, ...), `model_response`
(`lighteval.models.model_output.ModelResponse`: `input`, `input_tokens`, `text` and
`output_tokens`, one per sample, ...) and `metric` (the document's metric values, e.g. `em`,
`extractive_match`, `maj@4`).

Mapping: the token ids are the model's own, so nothing is re-tokenized: `prompt_ids` is
`input_tokens`, `response_ids` the sample's `output_tokens`; `prompt` (where `input` is text) and
`response` (the sample's `text`, cut at the stop sequences) come along. `prompt_id` is
`doc.id`, `sample_id` the sample, `answer` the gold choice, `task` `doc.task_name`; each metric
is kept as a column. `correct` is the truth (`divscope.readers.truth`) of the document's first
metric (`--correct METRIC` names another). lighteval computes a metric once per document, so it
is a sample's own only when the document has one sample, or when all its samples are the same
text: `correct_scope` says `response` there, and `document` where the document's value is given
to each of its differing samples (`divscope.readers.lm_eval.correct_scope`). A loglikelihood
task's details hold no generated text and are refused. An API backend's details (litellm,
inference endpoints) hold text without token ids: they are read as `prompt` + `response`, which
`score` tokenizes.

lighteval's transformers backend pads a batch before it saves it (`pad_and_gather`, left padding
of the prompts): `input_tokens` can start with pad tokens and `output_tokens` go on with pad
tokens after the end of the response. Given the tokenizer (`score`), the reader removes them:
a prompt's leading pad tokens (unless the pad token is also the BOS token) and whatever follows
a response's first EOS token (kept), or its trailing pad tokens where it has no EOS.
"""

from __future__ import annotations

import pyarrow as pa

from . import Format, ReadContext, truth
from .lm_eval import correct_scope


def _metric(raw: pa.Table, ctx: ReadContext) -> tuple[str, list[str]]:
    """The metric whose value is `correct` (`--correct`, else the first) and all of them."""
    from ..errors import DivscopeError

    names = [field.name for field in raw.schema.field("metric").type]
    chosen = ctx.correct or (names[0] if names else None)
    if chosen not in names:
        raise DivscopeError(
            f"{ctx.source}: lighteval metric {chosen!r} is not in this file's metric column; its "
            f"metrics are {names}: give --correct METRIC with one of them."
        )
    return chosen, names


def _unpadders(ctx: ReadContext):
    """Two functions that strip lighteval's batch padding from a prompt's and a response's ids
    (the identity without a tokenizer).

    >>> from types import SimpleNamespace
    >>> tok = SimpleNamespace(pad_token_id=1, eos_token_id=0, bos_token_id=None)
    >>> prompt, response = _unpadders(ReadContext("d.parquet", tokenizer=lambda: tok))
    >>> prompt([1, 1, 5, 6]), response([7, 8, 0, 1, 1]), response([7, 8, 1, 1])
    ([5, 6], [7, 8, 0], [7, 8])
    """
    tokenizer = ctx.tokenizer() if ctx.tokenizer is not None else None
    pad = getattr(tokenizer, "pad_token_id", None)
    eos = getattr(tokenizer, "eos_token_id", None)
    bos = getattr(tokenizer, "bos_token_id", None)

    def prompt(ids: list[int]) -> list[int]:
        start = 0
        if pad is not None and pad != bos:
            while start < len(ids) and ids[start] == pad:
                start += 1
        return ids[start:]

    def response(ids: list[int]) -> list[int]:
        if eos is not None and eos in ids:
            return ids[: ids.index(eos) + 1]
        end = len(ids)
        if pad is not None:
            while end > 0 and ids[end - 1] == pad:
                end -= 1
        return ids[:end]

    return prompt, response


def read(raw: pa.Table, ctx: ReadContext) -> pa.Table:
    """lighteval details -> trajectory columns (see the module's docstring)."""
    import pyarrow.compute as pc

    from ..errors import DivscopeError

    chosen, metric_names = _metric(raw, ctx)
    unpad_prompt, unpad_response = _unpadders(ctx)
    metric = raw.column("metric").combine_chunks()
    correct = truth(metric.field(chosen), chosen, ctx.source).to_pylist()
    values = {name: metric.field(name).to_pylist() for name in metric_names}
    types = {
        "prompt_id": pa.large_string(),
        "sample_id": pa.int32(),
        "prompt_ids": pa.large_list(pa.int32()),
        "response_ids": pa.large_list(pa.int32()),
        "prompt": pa.large_string(),
        "response": pa.large_string(),
        "correct": pa.bool_(),
        "correct_scope": pa.string(),
        "answer": pa.large_string(),
        "task": pa.string(),
    }
    rows: dict[str, list] = {name: [] for name in types}
    kept = [name for name in metric_names if name not in rows]
    rows.update({name: [] for name in kept})
    docs = raw.column("doc").to_pylist()
    responses = raw.column("model_response").to_pylist()
    for i, (doc, response) in enumerate(zip(docs, responses, strict=True)):
        texts = response.get("text") or []
        if not texts:
            raise DivscopeError(
                f"{ctx.source}: document {doc.get('id')!r} has no generated text: divscope reads "
                "the details of lighteval's generative tasks (a loglikelihood task's details "
                "hold scores, not responses)."
            )
        # an API backend (litellm, endpoints) saves text without token ids
        samples = response.get("output_tokens") or [None] * len(texts)
        if len(samples) != len(texts):
            raise DivscopeError(
                f"{ctx.source}: document {doc.get('id')!r} has {len(texts)} generated texts for "
                f"{len(samples)} token sequences; a lighteval details file has one of each per "
                "sample."
            )
        prompt_ids = unpad_prompt(response.get("input_tokens") or [])
        gold = doc.get("gold_index")
        gold = gold[0] if isinstance(gold, list) else gold
        choices = doc.get("choices") or []
        prompt = response.get("input")
        scope = correct_scope(texts)
        for sample_id, (ids, text) in enumerate(zip(samples, texts, strict=True)):
            rows["prompt_id"].append(doc.get("id") or str(i))
            rows["sample_id"].append(sample_id)
            rows["prompt_ids"].append(prompt_ids if ids is not None else None)
            rows["response_ids"].append(unpad_response(ids) if ids is not None else None)
            rows["prompt"].append(prompt if isinstance(prompt, str) else None)
            rows["response"].append(text)
            rows["correct"].append(correct[i])
            rows["correct_scope"].append(scope)
            rows["answer"].append(
                str(choices[gold]) if gold is not None and gold < len(choices) else None
            )
            rows["task"].append(doc.get("task_name"))
            for name in kept:
                rows[name].append(values[name][i])
    metric_type = raw.schema.field("metric").type
    table = pa.table(
        {
            name: pa.array(column, types.get(name) or metric_type.field(name).type)
            for name, column in rows.items()
        }
    )
    for absent in ("prompt", "prompt_ids", "response_ids"):
        if pc.all(pc.is_null(table.column(absent))).as_py():
            table = table.drop_columns([absent])
    if not {"prompt", "prompt_ids"} & set(table.column_names):
        raise DivscopeError(
            f"{ctx.source}: lighteval's details hold neither the prompts' token ids nor their "
            "text (the model's input was a list of messages): divscope cannot rebuild the prompts."
        )
    return table


FORMAT = Format(
    name="lighteval",
    expected=("doc", "model_response", "metric"),
    read=read,
    applies_correct=True,
)
