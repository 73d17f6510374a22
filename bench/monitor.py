"""What the divergence monitor adds to the lab's GRPO (issue 31, item 3).

From the committed `fixtures/lab/base`, runs the build's GRPO stage (`divscope.lab.grpo`, the
build's settings and its GRPO random stream for `--seed`) without and with
`divscope lab build --monitor`'s hook (`GRPOMonitor`: every `--every` rounds, the first
`--prompts` eval prompts sampled once each at T=1 with the rollouts' 224-token cap and a fixed
seed, scored against base, `step_statistics`, the step's table written to an evolution
directory), `--rounds` rounds a run (the build runs 150), `--repeats` runs each way in one
process, alternated (off, on, on, off), so that a load that drifts weighs on both alike. It
checks that every run ends with the same weights (and, with 30/60/90/120/150 rounds and seed 0,
that they equal the committed `rl-step-N` / `rl`), then times one measurement of the trained
policy for each probe size of `--sizes`, and prints Markdown tables: the wall and CPU times and
their ratio, the monitor's own time against the GRPO rounds of the same runs, the per-token
costs, and the cost per probe size.

    python bench/monitor.py            # 30 rounds, 2 runs each way, probes 8/32/64 (~5 min)
    python bench/monitor.py --rounds 150 --repeats 1 --evolution runs/lab-monitor

`--evolution DIR` keeps the monitored runs' evolution directory (else a temporary one): the
150-round run is the one `docs/figures/lab-monitor.png` is drawn from (`bench/monitor_figure.py`).
Wall times depend on what else runs on the 2 shared cores: the load average is printed with
them, and the monitor's own time, measured inside the monitored runs, is the steadier number.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root
from divscope.lab.family import _GRPO, _MONITOR  # noqa: E402  (the build's stream offsets)
from divscope.lab.grpo import GRPOConfig, train_grpo  # noqa: E402
from divscope.lab.monitor import GRPOMonitor, MonitorConfig  # noqa: E402
from divscope.models.threads import torch_threads  # noqa: E402
from divscope.monitor import Probe, ProbeConfig, ProbeScorer, step_statistics  # noqa: E402


def read_jsonl(path: Path) -> list[dict]:
    with path.open() as f:
        return [json.loads(line) for line in f]


def train(base, tokenizer, train_rows, rounds, seed, monitor_args=None):
    """One GRPO run from `base`: (policy, wall s, CPU s, monitor or None)."""
    started, cpu_started = time.perf_counter(), time.process_time()
    policy = copy.deepcopy(base)
    monitor = None
    if monitor_args is not None:
        monitor = GRPOMonitor(policy, base, tokenizer, **monitor_args)
    train_grpo(
        policy,
        base,
        tokenizer,
        [r["prompt"] for r in train_rows],
        [r["answer"] for r in train_rows],
        GRPOConfig(steps=rounds),
        seed=seed * 100 + _GRPO,
        log=lambda line: None,
        on_checkpoint=lambda step: None,
        on_round=monitor,
    )
    return policy, time.perf_counter() - started, time.process_time() - cpu_started, monitor


def same_weights(a, b) -> bool:
    a, b = a.state_dict(), b.state_dict()
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lab", type=Path, default=Path("fixtures/lab"))
    parser.add_argument("--rounds", type=int, default=30, help="GRPO rounds per run (build: 150)")
    parser.add_argument("--every", type=int, default=MonitorConfig.every)
    parser.add_argument("--prompts", type=int, default=MonitorConfig.prompts)
    parser.add_argument("--sizes", default="8,32,64", help="probe sizes timed on the policy")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2, help="torch threads (the build's 2)")
    parser.add_argument("--repeats", type=int, default=2, help="runs each way, alternated")
    parser.add_argument("--evolution", type=Path, help="keep the monitored run's directory here")
    args = parser.parse_args()

    tokenizer = AutoTokenizer.from_pretrained(args.lab / "base")
    base = AutoModelForCausalLM.from_pretrained(args.lab / "base").eval()
    train_rows = read_jsonl(args.lab / "prompts" / "train.jsonl")
    eval_rows = read_jsonl(args.lab / "prompts" / "eval.jsonl")
    max_new_tokens = GRPOConfig.max_new_tokens
    evolution = args.evolution or Path(tempfile.mkdtemp(prefix="divscope-monitor-"))
    monitor_args = {
        "probe": eval_rows,
        "out_dir": evolution,
        "config": MonitorConfig(prompts=args.prompts, every=args.every),
        "max_new_tokens": max_new_tokens,
        "seed": args.seed * 100 + _MONITOR,
        "log": print,
    }
    # Off and on alternate (off, on, on, off, ...): a load that drifts during the runs weighs on
    # both alike.
    order = [flag for i in range(args.repeats) for flag in ((False, True), (True, False))[i % 2]]
    runs = {False: [], True: []}
    load_start = os.getloadavg()[0]
    with torch_threads(args.threads):
        for on in order:
            runs[on].append(
                train(
                    base,
                    tokenizer,
                    train_rows,
                    args.rounds,
                    args.seed,
                    monitor_args if on else None,
                )
            )
        load_end = os.getloadavg()[0]
        policy = runs[True][0][0]
        identical = all(same_weights(policy, run[0]) for run in runs[False] + runs[True])
        committed = args.lab / ("rl" if args.rounds == 150 else f"rl-step-{args.rounds}")
        reproduces = None
        if args.seed == 0 and (committed / "model.safetensors").exists():
            reproduces = same_weights(policy, AutoModelForCausalLM.from_pretrained(committed))

        scaling = []
        for size in [int(s) for s in args.sizes.split(",")]:
            scorer = ProbeScorer(
                base,
                Probe.read(
                    [{"prompt_id": r["prompt_id"], "prompt": r["prompt"]} for r in eval_rows[:size]]
                ),
                ProbeConfig(n=1, max_new_tokens=max_new_tokens, seed=args.seed * 100 + _MONITOR),
                tokenizer=tokenizer,
            )
            started = time.perf_counter()
            tokens = scorer.score(policy, args.rounds)
            step_statistics(tokens)
            scaling.append((size, time.perf_counter() - started, tokens.height))

    summary = pl.read_ndjson(evolution / "summary.jsonl")
    probe_tokens = summary["divscope/n_tokens"].mean()
    measure_s = summary["seconds"].mean()
    off_wall, off_cpu = (sum(run[i] for run in runs[False]) / args.repeats for i in (1, 2))
    on_wall, on_cpu = (sum(run[i] for run in runs[True]) / args.repeats for i in (1, 2))
    hooks_wall = sum(run[3].wall_s for run in runs[True]) / args.repeats
    hooks_cpu = sum(run[3].cpu_s for run in runs[True]) / args.repeats
    # The GRPO rounds of the monitored runs themselves: the same load as their measurements.
    round_s = (on_wall - hooks_wall) / args.rounds
    # A rollout is as long as a probe response of the same policy (same task, same length cap).
    rollouts = GRPOConfig.prompts_per_step * GRPOConfig.group_size
    rollout_tokens = rollouts * probe_tokens / args.prompts

    shown = ", ".join("on" if on else "off" for on in order)
    print(
        f"\nlab GRPO from {args.lab}/base, {args.rounds} rounds, seed {args.seed}, {args.threads} "
        f"torch threads, {args.repeats} runs each way ({shown}); "
        f"monitor: {args.prompts} probe prompts every {args.every} rounds ({summary.height} "
        f"measurements a run); load average {load_start:.1f} -> {load_end:.1f}\n"
    )
    print("| run (mean of the runs) | wall | CPU |")
    print("|---|---|---|")
    print(f"| GRPO | {off_wall:.1f} s | {off_cpu:.1f} s |")
    print(f"| GRPO + monitor | {on_wall:.1f} s | {on_cpu:.1f} s |")
    print(f"| ratio | {on_wall / off_wall:.3f} | {on_cpu / off_cpu:.3f} |")
    print(
        f"| the monitor's own time (its hooks) | {hooks_wall:.1f} s = "
        f"{hooks_wall / (on_wall - hooks_wall):.1%} of the run's GRPO | {hooks_cpu:.1f} s = "
        f"{hooks_cpu / (on_cpu - hooks_cpu):.1%} |"
    )
    print(
        "\nper run, wall: off "
        + ", ".join(f"{run[1]:.1f} s" for run in runs[False])
        + "; on "
        + ", ".join(f"{run[1]:.1f} s (hooks {run[3].wall_s:.1f} s)" for run in runs[True])
    )
    print(f"weights identical in every run, with and without the monitor: {identical}")
    if reproduces is not None:
        print(f"weights equal the committed {committed}: {reproduces}")
    print("\n| | time | response tokens | per token |")
    print("|---|---|---|---|")
    print(
        f"| GRPO round ({rollouts} rollouts: sample; policy and base forwards; forward + backward) "
        f"| {round_s:.2f} s | {rollout_tokens:.0f} (est.) "
        f"| {1e3 * round_s / rollout_tokens:.2f} ms |"
    )
    print(
        f"| measurement ({args.prompts} prompts: sample; base and policy forwards; statistics) | "
        f"{measure_s:.2f} s | {probe_tokens:.0f} | {1e3 * measure_s / probe_tokens:.2f} ms |"
    )
    print(
        f"\n| probe prompts | one measurement | response tokens | per token | share of "
        f"{args.every} GRPO rounds |"
    )
    print("|---|---|---|---|---|")
    for size, seconds, n in scaling:
        print(
            f"| {size} | {seconds:.2f} s | {n} | {1e3 * seconds / n:.2f} ms | "
            f"{seconds / (args.every * round_s):.1%} |"
        )


if __name__ == "__main__":
    main()
