"""Files in each format as the upstream writer makes them, written by our own scripts that
follow the writer's source (volcengine/verl at b178a3c):

- `write_verl_dump`: `RayPPOTrainer._dump_generations` (verl/trainer/ppo/ray_trainer.py), fed
  as `_log_rollout_data` and `_validate` feed it (`verl_rollouts`: the prompt and response ids
  decoded with `skip_special_tokens=True`, the summed reward, the ground truth).
- `balance_batch`: the reorder of `RayPPOTrainer._balance_batch` (rows dealt to data-parallel
  ranks by sequence length, rank after rank), which the rollout dump sees.
- `write_verl_dataset`: verl's dataset parquet (examples/data_preprocess/gsm8k.py's rows).
- `write_verl_generation`: verl/trainer/main_generation.py, the dataset written back with a
  `responses` column of n decoded responses per row.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


def write_verl_dump(dump_path: Path, step: int, inputs, outputs, gts, scores, extras) -> Path:
    """`_dump_generations`: `{step}.jsonl` with input, output, gts, score, step, then each
    reward extra as long as the batch."""
    os.makedirs(dump_path, exist_ok=True)
    filename = os.path.join(dump_path, f"{step}.jsonl")
    n = len(inputs)
    base_data = {
        "input": inputs,
        "output": outputs,
        "gts": gts,
        "score": scores,
        "step": [step] * n,
    }
    for k, v in extras.items():
        if len(v) == n:
            base_data[k] = v
    lines = []
    for i in range(n):
        entry = {k: v[i] for k, v in base_data.items()}
        lines.append(json.dumps(entry, ensure_ascii=False))
    with open(filename, "w") as f:
        f.write("\n".join(lines) + "\n")
    return Path(filename)


def verl_rollouts(rows: list[dict[str, Any]], tokenizer) -> dict[str, list]:
    """What `_log_rollout_data` hands `_dump_generations` for trajectories with ids, `correct`
    and `answer` (the lab's): decoded text without special tokens, the reward (1/0), the ground
    truth, and the reward function's extras `acc` and `pred`."""
    inputs = tokenizer.batch_decode([r["prompt_ids"] for r in rows], skip_special_tokens=True)
    outputs = tokenizer.batch_decode([r["response_ids"] for r in rows], skip_special_tokens=True)
    return {
        "inputs": inputs,
        "outputs": outputs,
        "gts": [r["answer"] for r in rows],
        "scores": [1.0 if r["correct"] else 0.0 for r in rows],
        "extras": {
            "acc": [bool(r["correct"]) for r in rows],
            "pred": [o.rsplit("answer is", 1)[-1].strip(" .") for o in outputs],
        },
    }


def balance_batch(rows: list[dict[str, Any]], world_size: int) -> list[dict[str, Any]]:
    """The rows reordered as `_balance_batch` does: each dealt, longest first, to the rank with
    the fewest tokens so far; then rank 0's rows, rank 1's, ..."""
    lengths = [len(r["prompt_ids"]) + len(r["response_ids"]) for r in rows]
    ranks: list[list[int]] = [[] for _ in range(world_size)]
    loads = [0] * world_size
    for i in sorted(range(len(rows)), key=lambda i: -lengths[i]):
        rank = loads.index(min(loads))
        ranks[rank].append(i)
        loads[rank] += lengths[i]
    return [rows[i] for rank in ranks for i in sorted(rank)]


def write_verl_dataset(path: Path, questions: list[str], answers: list[str]) -> Path:
    """verl's dataset parquet, as its preprocessing scripts write it: `data_source`, chat
    `prompt` (one user turn), `ability`, `reward_model` {style, ground_truth}, `extra_info`."""
    rows = [
        {
            "data_source": "lab",
            "prompt": [{"role": "user", "content": q}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": a},
            "extra_info": {"split": "test", "index": i},
        }
        for i, (q, a) in enumerate(zip(questions, answers, strict=True))
    ]
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def write_verl_generation(dataset: Path, output_path: Path, responses: list[list[str]]) -> Path:
    """main_generation: the dataset read, `responses` (n per row) added, written back."""
    table = pq.read_table(dataset)
    table = table.append_column("responses", pa.array(responses, pa.list_(pa.string())))
    pq.write_table(table, output_path)
    return output_path
