"""Does divergence-weighted advantage help? Plain vs weighted GRPO on the lab (issue 17, item 6).

From `fixtures/lab/base`, trains plain GRPO and two weighted variants of the core paper's §5
(w_t = 1 + s·(sigmoid(α·D_t) − 0.5), s = 0.3, α ramped 0 → +50, the paper's high-KL boost):

- `plain`:   `weighting="none"`, the lab's GRPO as the build runs it;
- `base-js`: D_t = JS of the full T=1 distributions of the frozen `base` and the policy;
- `old-kl`:  D_t = k3 estimate of KL(π_old‖π_θ) on the sampled token (the paper's signal).

Both weighted variants boost high divergence with the same schedule, so the only difference
between them is the divergence signal (cumulative change from base vs. recent change). The
budget is reduced: `--steps` rounds (default 40 of the build's 150) with the build's other
settings. The paper's summary gives the ramp's start (step 100) but not its run's length; taking
the 200 steps of its Qwen2.5-Math-7B DAPO run, the start is scaled to the same fraction of the
budget, `alpha_start = steps // 2`, and the ramp ends at the last round. Each seed s uses the
build's GRPO stream for seed s, so with the build's two threads `plain` with seed 0 and 30, 60,
90 or 120 rounds must reproduce the committed `fixtures/lab/rl-step-N` byte for byte (checked
when that checkpoint exists).

Each trained model is evaluated on the first `--eval-prompts` eval prompts × `--eval-samples` at
T=1 (`divscope.lab.evaluate`, one fixed evaluation seed for every model), and its own eval
samples are scored against `base` with `divscope.scoring.score_table` (top-p 0.7 `js`, the
token table's column) for the sparsity. A last run repeats one (variant, seed) and checks that
its weights and numbers are identical. Results go to OUT/results.json after every run;
`--summary-only` recomputes the summary of an existing results.json and prints the table.

    python bench/weighted_grpo.py runs/weighted-grpo --threads 1   # 25 min on 2 shared cores
    python bench/weighted_grpo.py runs/weighted-grpo --summary-only

With two threads on cores that other jobs share, rounds took about 15 s instead of 3.5 s: one
thread per run is faster there. Results depend on the thread count, so compare runs made with
the same one (results.json records it).
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import polars as pl
import torch
from scipy import stats as scipy_stats
from transformers import AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root
from divscope import analyses  # noqa: E402
from divscope.estimators import bootstrap_ci  # noqa: E402
from divscope.lab.evaluate import evaluate  # noqa: E402
from divscope.lab.family import _GRPO  # noqa: E402  (the build's GRPO stream offset)
from divscope.lab.grpo import GRPOConfig, train_grpo  # noqa: E402
from divscope.lab.task import verify  # noqa: E402
from divscope.prompts import read_prompts  # noqa: E402
from divscope.scoring.engine import score_table  # noqa: E402

LAB = Path(__file__).resolve().parents[1] / "fixtures" / "lab"
EVAL_SEED = 0
HIGH = 0.1  # "high-divergence" tokens: JS > 0.1 nats
VARIANTS = {
    "plain": {"weighting": "none"},
    "base-js": {"weighting": "base-js", "alpha_max": 50.0},
    "old-kl": {"weighting": "old-kl", "alpha_max": 50.0},
}


def _config(variant: str, steps: int) -> GRPOConfig:
    # checkpoint_every = steps: no intermediate checkpoints.
    return GRPOConfig(
        steps=steps, checkpoint_every=steps, alpha_start=steps // 2, **VARIANTS[variant]
    )


def _weights_sha256(model) -> str:
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().contiguous().numpy().tobytes())
    return digest.hexdigest()


def _run(variant: str, seed: int, args: argparse.Namespace, base, tokenizer) -> dict:
    train = read_prompts(LAB / "prompts" / "train.jsonl").to_dicts()
    eval_rows = read_prompts(LAB / "prompts" / "eval.jsonl").to_dicts()[: args.eval_prompts]
    config = _config(variant, args.steps)
    policy = copy.deepcopy(base)
    started, cpu_started = time.perf_counter(), time.process_time()
    history = train_grpo(
        policy,
        base,
        tokenizer,
        [r["prompt"] for r in train],
        [r["answer"] for r in train],
        config,
        seed=seed * 100 + _GRPO,
        log=lambda line: print(f"  {variant} seed {seed}: {line}", flush=True),
        on_checkpoint=lambda step: None,
    )
    train_wall, train_cpu = time.perf_counter() - started, time.process_time() - cpu_started
    policy.eval()
    run = {"variant": variant, "seed": seed, "config": asdict(config)}
    run.update(_measure(policy, base, tokenizer, eval_rows, args))
    run.update(
        weights_sha256=_weights_sha256(policy),
        train_wall_s=train_wall,
        train_cpu_s=train_cpu,
        wall_s=time.perf_counter() - started,
        rounds=[asdict(r) for r in history],
    )
    return run


def _measure(model, base, tokenizer, eval_rows: list[dict], args: argparse.Namespace) -> dict:
    """Eval accuracy of `model` and the sparsity of its own eval samples against `base`."""
    accuracy, responses = evaluate(
        model,
        tokenizer,
        [r["prompt"] for r in eval_rows],
        [r["answer"] for r in eval_rows],
        samples_per_prompt=args.eval_samples,
        temperature=1.0,
        seed=EVAL_SEED,
        max_new_tokens=GRPOConfig().max_new_tokens,
    )
    trajectories = pl.DataFrame(
        [
            {
                "prompt_id": row["prompt_id"],
                "sample_id": s,
                "prompt_ids": tokenizer(row["prompt"], add_special_tokens=False).input_ids,
                "response_ids": ids,
            }
            for row, samples in zip(eval_rows, responses, strict=True)
            for s, ids in enumerate(samples)
        ]
    )
    tokens = score_table(trajectories, base, model, tokenizer, progress=False)
    sparsity = analyses.sparsity(tokens, "js", thresholds=(1e-3,), percentiles=(50, 95, 99))
    correct = [sum(map(bool, c)) for c in _correct_per_prompt(tokenizer, eval_rows, responses)]
    return {
        "accuracy": accuracy.to_dict(),
        "correct_per_prompt": correct,
        "sparsity": {
            "n_tokens": sparsity.n_tokens,
            "share_js_above_0.1": float((tokens["js"] > HIGH).mean()),
            "share_js_below_1e-3": sparsity.share_below[1e-3],
            "js_median": sparsity.percentiles[50.0],
            "js_p95": sparsity.percentiles[95.0],
            "js_p99": sparsity.percentiles[99.0],
            "mean_response_tokens": sparsity.n_tokens / trajectories.height,
        },
    }


def _correct_per_prompt(tokenizer, eval_rows, responses) -> list[list[bool]]:
    texts = [tokenizer.batch_decode(group, skip_special_tokens=True) for group in responses]
    return [
        [verify(t, row["answer"]) for t in group]
        for row, group in zip(eval_rows, texts, strict=True)
    ]


def _t_interval(values: list[float]) -> dict[str, float]:
    """Mean over seeds with a two-sided 95% Student-t interval (n − 1 degrees of freedom)."""
    x = np.asarray(values, dtype=np.float64)
    half = scipy_stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / np.sqrt(x.size)
    return {"mean": x.mean(), "low": x.mean() - half, "high": x.mean() + half, "n": x.size}


def summarize(results: dict) -> dict:
    """Per variant: accuracy and sparsity with t-intervals over seeds, the paired difference to
    `plain` (per seed) with its t-interval, and a problem bootstrap of the seed-averaged
    difference (eval noise only)."""
    runs = [r for r in results["runs"] if not r.get("rerun")]
    by_variant: dict[str, dict[int, dict]] = {}
    for r in runs:
        by_variant.setdefault(r["variant"], {})[r["seed"]] = r
    plain = by_variant.get("plain", {})
    summary = {}
    for variant, seeds in by_variant.items():
        accs = [seeds[s]["accuracy"]["accuracy"] for s in sorted(seeds)]
        row = {
            "seeds": sorted(seeds),
            "accuracy": _t_interval(accs) if len(accs) > 1 else {"mean": accs[0]},
            "accuracy_per_seed": accs,
        }
        for key in ("share_js_above_0.1", "share_js_below_1e-3", "js_median", "js_p95", "js_p99"):
            values = [seeds[s]["sparsity"][key] for s in sorted(seeds)]
            row[key] = _t_interval(values) if len(values) > 1 else {"mean": values[0]}
        paired = sorted(set(seeds) & set(plain))
        if variant != "plain" and len(paired) > 1:
            row["minus_plain"] = _t_interval(
                [
                    seeds[s]["accuracy"]["accuracy"] - plain[s]["accuracy"]["accuracy"]
                    for s in paired
                ]
            )
            per_prompt = (
                np.mean(
                    [
                        np.subtract(seeds[s]["correct_per_prompt"], plain[s]["correct_per_prompt"])
                        for s in paired
                    ],
                    axis=0,
                )
                / results["eval_samples"]
            )
            interval = bootstrap_ci(per_prompt, n_boot=2000, seed=0)
            row["minus_plain_problem_bootstrap"] = {
                "mean": interval.estimate, "low": interval.low, "high": interval.high
            }  # fmt: skip
        summary[variant] = row
    return summary


def _cell(interval: dict, percent: bool = True) -> str:
    """`mean [low, high]` (in percent, or 2 significant digits)."""
    f = (lambda v: f"{100 * v:.1f}") if percent else (lambda v: f"{v:.2g}")
    if "low" not in interval:
        return f(interval["mean"])
    return f"{f(interval['mean'])} [{f(interval['low'])}, {f(interval['high'])}]"


def _print_table(results: dict, summary: dict) -> None:
    base = results["base"]["accuracy"]
    print(
        f"\nGRPO {results['steps']} rounds, seeds {results['seeds']}; eval: first "
        f"{results['eval_prompts']} eval prompts x {results['eval_samples']} samples at T=1; "
        f"base {base['accuracy']:.1%} [{base['ci_low']:.1%}, {base['ci_high']:.1%}]"
    )
    print("mean over seeds [95% t-interval over seeds]")
    header = (
        "variant",
        "accuracy",
        "minus plain",
        "JS > 0.1",
        "JS < 1e-3",
        "median JS",
        "p95 JS",
        "p99 JS",
    )
    print(" | ".join(header))
    for variant, row in summary.items():
        diff = row.get("minus_plain")
        cells = [
            variant,
            _cell(row["accuracy"]) + "%",
            (_cell(diff) + " pts") if diff else "-",
            _cell(row["share_js_above_0.1"]) + "%",
            _cell(row["share_js_below_1e-3"]) + "%",
            *(_cell(row[key], percent=False) for key in ("js_median", "js_p95", "js_p99")),
        ]
        print(" | ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--eval-prompts", type=int, default=128)
    parser.add_argument("--eval-samples", type=int, default=4)
    parser.add_argument("--rerun", default="base-js:0", help="VARIANT:SEED repeated; '' for none")
    parser.add_argument(
        "--threads", type=int, default=2, help="torch threads (the build's 2; results depend on it)"
    )
    parser.add_argument("--summary-only", action="store_true")
    args = parser.parse_args()
    path = args.out / "results.json"
    if args.summary_only:
        results = json.loads(path.read_text())
        results["summary"] = summarize(results)
        path.write_text(json.dumps(results, indent=1) + "\n")
        _print_table(results, results["summary"])
        return

    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(LAB / "base")
    base = AutoModelForCausalLM.from_pretrained(LAB / "base").eval()
    seeds = [int(s) for s in args.seeds.split(",")]
    variants = args.variants.split(",")
    eval_rows = read_prompts(LAB / "prompts" / "eval.jsonl").to_dicts()[: args.eval_prompts]
    results = {
        "command": " ".join(sys.argv),
        "steps": args.steps,
        "seeds": seeds,
        "eval_prompts": args.eval_prompts,
        "eval_samples": args.eval_samples,
        "eval_seed": EVAL_SEED,
        "threads": args.threads,
        "versions": {"torch": torch.__version__},
        "base": _measure(base, base, tokenizer, eval_rows, args),
        "runs": [],
    }
    started = time.perf_counter()
    plan = [(v, s) for s in seeds for v in variants]
    if args.rerun:
        variant, seed = args.rerun.split(":")
        plan.append((variant, int(seed)))
    for i, (variant, seed) in enumerate(plan):
        run = _run(variant, seed, args, base, tokenizer)
        run["rerun"] = i >= len(seeds) * len(variants)
        results["runs"].append(run)
        acc = run["accuracy"]["accuracy"]
        print(
            f"{variant} seed {seed}: accuracy {acc:.3f}, JS>0.1 "
            f"{run['sparsity']['share_js_above_0.1']:.4f}, {run['wall_s']:.0f} s "
            f"({run['train_wall_s']:.0f} s training, {run['train_cpu_s']:.0f} CPU-s)",
            flush=True,
        )
        path.write_text(json.dumps(results, indent=1) + "\n")

    checks = {}
    if args.rerun:
        first = next(r for r in results["runs"] if (r["variant"], r["seed"]) == plan[-1])
        again = results["runs"][-1]
        checks["rerun"] = {
            "run": args.rerun,
            "weights_identical": first["weights_sha256"] == again["weights_sha256"],
            "accuracy_identical": first["accuracy"] == again["accuracy"],
            "sparsity_identical": first["sparsity"] == again["sparsity"],
        }
    reference = LAB / f"rl-step-{args.steps}"
    plain0 = [r for r in results["runs"] if (r["variant"], r["seed"]) == ("plain", 0)]
    if reference.exists() and plain0 and args.threads == 2:  # the build's thread count
        committed = AutoModelForCausalLM.from_pretrained(reference)
        checks["plain_seed0_equals_committed"] = {
            "checkpoint": str(reference.relative_to(LAB.parents[1])),
            "weights_identical": _weights_sha256(committed) == plain0[0]["weights_sha256"],
        }
    results["checks"] = checks
    results["wall_s"] = time.perf_counter() - started
    results["summary"] = summarize(results)
    path.write_text(json.dumps(results, indent=1) + "\n")
    _print_table(results, results["summary"])
    print(f"checks: {json.dumps(checks)}")
    print(f"total: {results['wall_s']:.0f} s wall")


if __name__ == "__main__":
    main()
