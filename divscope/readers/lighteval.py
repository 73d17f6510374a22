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
is a sample's own only when the document has one sample: `correct_scope` says `response` there,
and `document` where the document's value is given to each of its samples. A loglikelihood
task's details hold no generated text and are refused.
"""

from __future__ import annotations

import pyarrow as pa

from . import Format, ReadContext, truth


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


def read(raw: pa.Table, ctx: ReadContext) -> pa.Table:
    """lighteval details -> trajectory columns (see the module's docstring)."""
    import pyarrow.compute as pc

    from ..errors import DivscopeError

    chosen, metric_names = _metric(raw, ctx)
    metric = raw.column("metric").combine_chunks()
    correct = truth(metric.field(chosen), chosen, ctx.source).to_pylist()
    values = {name: metric.field(name).to_pylist() for name in metric_names}
    rows: dict[str, list] = {
        name: []
        for name in (
            "prompt_id",
            "sample_id",
            "prompt_ids",
            "response_ids",
            "prompt",
            "response",
            "correct",
            "correct_scope",
            "answer",
            "task",
        )
    }
    kept = [name for name in metric_names if name not in rows]
    rows.update({name: [] for name in kept})
    docs = raw.column("doc").to_pylist()
    responses = raw.column("model_response").to_pylist()
    for i, (doc, response) in enumerate(zip(docs, responses, strict=True)):
        samples = response.get("output_tokens") or []
        texts = response.get("text") or []
        if not texts or len(texts) != len(samples):
            raise DivscopeError(
                f"{ctx.source}: document {doc.get('id')!r} has {len(texts)} generated texts for "
                f"{len(samples)} token sequences: divscope reads the details of lighteval's "
                "generative tasks (a loglikelihood task's details hold no generated text)."
            )
        gold = doc.get("gold_index")
        gold = gold[0] if isinstance(gold, list) else gold
        choices = doc.get("choices") or []
        prompt = response.get("input")
        for sample_id, (ids, text) in enumerate(zip(samples, texts, strict=True)):
            rows["prompt_id"].append(doc.get("id") or str(i))
            rows["sample_id"].append(sample_id)
            rows["prompt_ids"].append(response.get("input_tokens"))
            rows["response_ids"].append(ids)
            rows["prompt"].append(prompt if isinstance(prompt, str) else None)
            rows["response"].append(text)
            rows["correct"].append(correct[i])
            rows["correct_scope"].append("response" if len(samples) == 1 else "document")
            rows["answer"].append(
                str(choices[gold]) if gold is not None and gold < len(choices) else None
            )
            rows["task"].append(doc.get("task_name"))
            for name in kept:
                rows[name].append(values[name][i])
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
    metric_type = raw.schema.field("metric").type
    table = pa.table(
        {
            name: pa.array(column, types.get(name) or metric_type.field(name).type)
            for name, column in rows.items()
        }
    )
    if pc.all(pc.is_null(table.column("prompt"))).as_py():
        table = table.drop_columns(["prompt"])
    return table


FORMAT = Format(
    name="lighteval",
    expected=("doc", "model_response", "metric"),
    read=read,
)
