"""lm-evaluation-harness sample logs: `lm_eval ... --log_samples --output_path OUT` writes
`OUT/<model>/samples_<task>_<date>.jsonl` (upstream: EleutherAI/lm-evaluation-harness,
`lm_eval/evaluator.py`, `evaluate`, the `example` dict; `lm_eval/loggers/evaluation_tracker.py`,
`EvaluationTracker.save_results_samples`).

One line per document and filter: `doc_id`, `doc` (the dataset row), `target`, `arguments`
(`{"gen_args_0": {"arg_0": <context>, "arg_1": <generation kwargs>}}`), `resps` (one list per
request; a `generate_until` task has one request, whose list holds one response per repeat),
`filtered_resps` (what the task's filter, e.g. `strict-match`, made of them), `filter`,
`metrics` (the names of the metric columns), one column per metric (e.g. `exact_match`), and
`doc_hash`, `prompt_hash`, `target_hash`. A task with several filters logs each document once
per filter, with the same responses.

Mapping: the lines of one filter are read (`--correct METRIC,FILTER` names it; default: the
file's first filter); `prompt_id` is `doc_id` as a string, `sample_id` the repeat, `prompt` the
context lm-eval sent (`arg_0`, chat-templated when the run used `--apply_chat_template`),
`response` the repeat's raw response, `answer` the `target`; `doc_id`, `filter`,
`filtered_response` (the repeat's filtered answer where the filter kept one per repeat, else the
document's) and every metric column are kept. `correct` is the truth
(`divscope.readers.truth`) of the document's first metric (`--correct METRIC` names another).
lm-eval computes a metric once per document, from the filtered responses (`take_first`: the
first repeat; `majority_vote`: the majority answer), so the metric is a repeat's own only when
the document has one repeat, or when all its repeats are the same text (greedy decoding):
`correct_scope` says `response` there, and `document` where the document's value is given to
each of its differing repeats (`divscope grade` grades each on its own). Only `generate_until`
tasks log responses; a log of loglikelihood scores is refused.
"""

from __future__ import annotations

import pyarrow as pa

from . import Format, ReadContext, truth


def correct_scope(responses: list[str]) -> str:
    """Whether a document's metric is each of its responses' own (`response`: one response, or
    all the same text) or only the document's (`document`).

    >>> correct_scope(["a"]), correct_scope(["a", "a"]), correct_scope(["a", "b"])
    ('response', 'response', 'document')
    """
    return "response" if len(set(responses)) <= 1 else "document"


def _choose(raw: pa.Table, ctx: ReadContext) -> tuple[str, str]:
    """The (metric, filter) whose value is `correct`: `--correct METRIC[,FILTER]`, else the
    first line's first metric and the file's first filter."""
    from ..errors import DivscopeError

    filters = list(dict.fromkeys(raw.column("filter").to_pylist()))
    metrics = raw.column("metrics")[0].as_py() if "metrics" in raw.column_names else []
    metric, _, filter_key = (ctx.correct or "").partition(",")
    metric = metric or (metrics[0] if metrics else "")
    filter_key = filter_key or filters[0]
    if filter_key not in filters:
        raise DivscopeError(
            f"{ctx.source}: lm-eval filter {filter_key!r} (--correct {ctx.correct}) is not in "
            f"this log; its filters are {filters}: give --correct METRIC,FILTER with one of them."
        )
    if metric not in raw.column_names or metric not in (metrics or [metric]):
        raise DivscopeError(
            f"{ctx.source}: lm-eval metric {metric!r} is not a column of this log; its metrics "
            f"are {metrics}: give --correct METRIC (or METRIC,FILTER) with one of them."
        )
    return metric, filter_key


def read(raw: pa.Table, ctx: ReadContext) -> pa.Table:
    """An lm-eval sample log -> trajectory columns (see the module's docstring)."""
    import pyarrow.compute as pc

    from ..errors import DivscopeError

    metric, filter_key = _choose(raw, ctx)
    raw = raw.filter(pc.equal(raw.column("filter"), filter_key))
    metrics = raw.column("metrics")[0].as_py() if "metrics" in raw.column_names else [metric]
    correct = truth(raw.column(metric), metric, ctx.source).to_pylist()
    types = {
        "prompt_id": pa.large_string(),
        "sample_id": pa.int32(),
        "prompt": pa.large_string(),
        "response": pa.large_string(),
        "correct": pa.bool_(),
        "correct_scope": pa.string(),
        "answer": pa.large_string(),
        "doc_id": pa.int64(),
        "filter": pa.string(),
        "filtered_response": pa.large_string(),
    }
    metric_values = {
        m: raw.column(m).to_pylist() for m in metrics if m in raw.column_names and m not in types
    }
    rows: dict[str, list] = {name: [] for name in (*types, *metric_values)}
    for i, (doc_id, arguments, resps, filtered, target) in enumerate(
        zip(
            raw.column("doc_id").to_pylist(),
            raw.column("arguments").to_pylist(),
            raw.column("resps").to_pylist(),
            raw.column("filtered_resps").to_pylist(),
            raw.column("target").to_pylist() if "target" in raw.column_names else [None] * len(raw),
            strict=True,
        )
    ):
        repeats = resps[0] if resps else []
        if not all(isinstance(r, str) for r in repeats):
            raise DivscopeError(
                f"{ctx.source}: document {doc_id}'s resps are {resps[:1]!r}, not generated text: "
                "divscope reads the logs of lm-eval's generate_until tasks (loglikelihood and "
                "multiple-choice tasks log scores, not responses)."
            )
        answers = filtered[0] if filtered else None
        per_repeat = isinstance(answers, list) and len(answers) == len(repeats)
        scope = correct_scope(repeats)
        for sample_id, response in enumerate(repeats):
            rows["prompt_id"].append(str(doc_id))
            rows["sample_id"].append(sample_id)
            rows["prompt"].append(arguments["gen_args_0"]["arg_0"])
            rows["response"].append(response)
            rows["correct"].append(correct[i])
            rows["correct_scope"].append(scope)
            rows["answer"].append(target)
            rows["doc_id"].append(doc_id)
            rows["filter"].append(filter_key)
            answer = answers[sample_id] if per_repeat else answers
            rows["filtered_response"].append(None if answer is None else str(answer))
            for name, values in metric_values.items():
                rows[name].append(values[i])
    return pa.table(
        {
            name: pa.array(values, types.get(name) or raw.schema.field(name).type)
            for name, values in rows.items()
        }
    )


FORMAT = Format(
    name="lm-eval",
    expected=("doc_id", "arguments", "resps", "filtered_resps", "filter"),
    read=read,
    applies_correct=True,
)
