"""Small files in the layouts of TRL's completion logs, lm-eval's sample logs and lighteval's
details, written from the upstream writers' code (cited in each function), for the readers'
tests. `tests/readers/fixtures/` holds files the upstream packages wrote themselves."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

FIXTURES = Path(__file__).parent / "fixtures"
TRL_FIXTURE = FIXTURES / "completions_00001.parquet"
LM_EVAL_FIXTURE = FIXTURES / "samples_lab_arith_2026-12-05T23-01-07.463141.jsonl"
LIGHTEVAL_FIXTURE = FIXTURES / "details_custom_lab_arith_0_2026-12-05T23-12-47.049747.parquet"

PROMPTS = ["Ana has 3 apples. She gets 2. How many?", "Sam has 9 coins. He loses 4. How many?"]
ANSWERS = ["5", "5"]
RESPONSES = [
    [" 3 + 2 = 5. So the answer is \\boxed{5}.", " 3 - 2 = 1. So the answer is \\boxed{1}."],
    [" 9 - 4 = 5. So the answer is \\boxed{5}.", " 9 + 4 = 13. So the answer is \\boxed{13}."],
]


def _boxed(response: str) -> str:
    return response.rsplit("\\boxed{", 1)[1].split("}")[0]


def write_trl(path: Path, step: int = 10) -> Path:
    """`completions_<step>.parquet` as `GRPOTrainer.log` writes it (huggingface/trl,
    `trl/trainer/grpo_trainer.py`): `step`, `prompt`, `completion`, one column per reward
    function, the `log_extra` columns, `advantage`; a prompt's `num_generations` rows in a row."""
    prompts = [p for p in PROMPTS for _ in range(2)]
    completions = [r for rs in RESPONSES for r in rs]
    answers = [a for a in ANSWERS for _ in range(2)]
    accuracy = [1.0 if _boxed(c) == a else 0.0 for c, a in zip(completions, answers, strict=True)]
    table = pa.table(
        {
            "step": [step] * 4,
            "prompt": prompts,
            "completion": completions,
            "accuracy_reward": accuracy,
            "format_reward": [1.0] * 4,
            "extracted": [_boxed(c) for c in completions],
            "advantage": [0.7, -0.7, 0.7, -0.7],
        }
    )
    pq.write_table(table, path)
    return path


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def write_lm_eval(path: Path, repeats: int = 1, loglikelihood: bool = False) -> Path:
    """`samples_<task>_<date>.jsonl` as lm-eval writes it (EleutherAI/lm-evaluation-harness,
    `lm_eval/evaluator.py` `evaluate`'s `example`, sanitized by
    `EvaluationTracker.save_results_samples`): a `generate_until` task with `repeats` responses
    per document and one filter, `take_first` (`loglikelihood`: a multiple-choice task's
    scores instead)."""
    lines = []
    for doc_id, (prompt, answer, responses) in enumerate(
        zip(PROMPTS, ANSWERS, RESPONSES, strict=True)
    ):
        chosen = responses[:repeats]
        if loglikelihood:
            arguments = {"gen_args_0": {"arg_0": prompt, "arg_1": f" {answer}"}}
            # `sanitize_list` makes every leaf a string
            resps, filtered = [[["-1.5", "False"]]], [["-1.5", "False"]]
            metric = {"acc": 0.0}
        else:
            kwargs = {"until": ["\n\n"], "do_sample": True, "temperature": 1.0}
            arguments = {"gen_args_0": {"arg_0": prompt, "arg_1": kwargs}}
            resps, filtered = [chosen], [chosen[0]]
            metric = {"exact_match": float(_boxed(chosen[0]) == answer)}
        line = {
            "doc_id": doc_id,
            "doc": {"question": prompt, "answer": answer},
            "target": answer,
            "arguments": arguments,
            "resps": resps,
            "filtered_resps": filtered,
            "filter": "none",
            "metrics": list(metric),
            "doc_hash": _sha(json.dumps({"question": prompt, "answer": answer}, indent=2)),
            "prompt_hash": _sha(prompt),
            "target_hash": _sha(answer),
            **metric,
        }
        lines.append(json.dumps(line, ensure_ascii=False) + "\n")
    path.write_text("".join(lines))
    return path


def write_lighteval(path: Path, loglikelihood: bool = False) -> Path:
    """`details_<task>_<date>.parquet` as lighteval writes it (huggingface/lighteval,
    `EvaluationTracker.save` and `save_details` in `src/lighteval/logging/evaluation_tracker.py`;
    `Doc` in `src/lighteval/tasks/requests.py`, `ModelResponse` in
    `src/lighteval/models/model_output.py`): columns `doc`, `metric`, `model_response`, sorted;
    one sample per document, token ids made up (`loglikelihood`: no generated text)."""
    rows = []
    for ix, (prompt, answer, responses) in enumerate(zip(PROMPTS, ANSWERS, RESPONSES, strict=True)):
        doc = {
            "query": prompt,
            "choices": [answer],
            "gold_index": 0,
            "id": str(ix),
            "task_name": "custom|toy|0",
            "num_samples": 1,
        }
        response = {
            "input": prompt,
            "input_tokens": [10 + ix, 11, 12],
            "text": [] if loglikelihood else [responses[0]],
            "output_tokens": [[20 + ix, 21, 0]],
            "logprobs": [-1.5] if loglikelihood else [],
        }
        metric = {"em": int(_boxed(responses[0]) == answer), "maj@4": 0.0}
        rows.append({"doc": doc, "metric": metric, "model_response": response})
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def all_layouts(tmp_path: Path) -> dict[str, list[Path]]:
    """Each format's files: the ones written here, and the upstream-written fixtures."""
    return {
        "trl": [write_trl(tmp_path / "completions_00010.parquet"), TRL_FIXTURE],
        "lm-eval": [write_lm_eval(tmp_path / "samples_toy.jsonl"), LM_EVAL_FIXTURE],
        "lighteval": [write_lighteval(tmp_path / "details_toy.parquet"), LIGHTEVAL_FIXTURE],
    }
