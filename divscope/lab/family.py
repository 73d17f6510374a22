"""`build`: train the whole lab family (base, rl, rl-step-N, sft) from scratch and write it out.

Layout of OUT_DIR:

    base/ rl/ rl-step-N/ sft/   HF checkpoints (config, safetensors, generation config) each with
                                 the same tokenizer files
    prompts/train.jsonl          GRPO / SFT prompts: prompt_id, prompt, answer
    prompts/eval.jsonl           held-out prompts (never seen in any training stage)
    trajectories.jsonl           reference trajectories of base and rl on the first eval prompts
    trajectories-sft.jsonl       the same for sft (its own samples, for SFT-vs-base scoring)
    build.json                   seed, configuration, timings, sizes, eval accuracies with 95% CIs
    monitor/                     with `--monitor` only: the evolution directory of GRPO
                                 (`divscope.lab.monitor`): rl-step-N.parquet, summary.jsonl
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import torch
import transformers
from transformers import AutoModelForCausalLM, PreTrainedModel, PreTrainedTokenizerFast

from divscope.defaults import SEED
from divscope.errors import DivscopeError
from divscope.lab.evaluate import evaluate
from divscope.lab.grpo import GRPOConfig, train_grpo
from divscope.lab.model import ModelConfig, new_model
from divscope.lab.monitor import GRPOMonitor, MonitorConfig
from divscope.lab.pretrain import PretrainConfig, pretrain
from divscope.lab.sft import SFTConfig, train_sft
from divscope.lab.task import Problem, TaskConfig, sample_problem, teacher_solution, verify
from divscope.lab.tokenizer import build_tokenizer, save_tokenizer
from divscope.models.threads import torch_threads
from divscope.params import LIBRARY_ONLY

# Offsets that give each random stream of a build its own seed.
_PROMPTS, _INIT, _PRETRAIN, _GRPO, _SFT, _EVAL, _TRAJECTORIES, _TOKENIZER, _MONITOR = range(9)


@dataclass(frozen=True)
class BuildConfig:
    """Everything a lab build depends on besides the seed."""

    task: TaskConfig = field(default_factory=TaskConfig)
    """The task and its pretraining corpus."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """Shape of every model."""
    pretrain: PretrainConfig = field(default_factory=PretrainConfig)
    """Pretraining of base."""
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    """GRPO from base to rl."""
    sft: SFTConfig = field(default_factory=SFTConfig)
    """SFT from base to sft (on the teacher's solutions of the training prompts)."""
    vocab_size: int = 768
    """Size of the byte-level BPE vocabulary (special and byte tokens included)."""
    n_train_prompts: int = 1024
    """Prompts in prompts/train.jsonl (GRPO and SFT draw from these)."""
    n_eval_prompts: int = 256
    """Held-out prompts in prompts/eval.jsonl."""
    eval_samples: int = 4
    """T=1 samples per eval prompt when measuring accuracy."""
    trajectory_prompts: int = 64
    """Eval prompts covered by trajectories.jsonl."""
    trajectory_samples: int = 4
    """T=1 samples per prompt from each of base and rl in trajectories.jsonl (and of sft in
    trajectories-sft.jsonl)."""
    threads: int = 2
    """Torch CPU threads; fixed because results can depend on it (determinism)."""

    @classmethod
    def smoke(cls) -> BuildConfig:
        """A few steps of every stage: checks the pipeline in about a minute, learns little."""
        return cls(
            model=ModelConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2),
            pretrain=PretrainConfig(steps=20, batch_size=16, warmup=5),
            grpo=GRPOConfig(
                steps=4, prompts_per_step=2, group_size=4, checkpoint_every=2, max_new_tokens=48
            ),
            sft=SFTConfig(steps=8, warmup=2),
            n_train_prompts=64,
            n_eval_prompts=32,
            eval_samples=2,
            trajectory_prompts=8,
            trajectory_samples=2,
        )


def build(
    out_dir: str | os.PathLike,
    *,
    seed: int = SEED,
    smoke: bool = False,
    monitor: bool = False,
    config: Annotated[BuildConfig | None, LIBRARY_ONLY] = None,
    monitor_config: Annotated[MonitorConfig | None, LIBRARY_ONLY] = None,
    log: Annotated[Callable[[str], None], LIBRARY_ONLY] = print,
) -> dict:
    """Train the lab family from scratch and write it to a directory.

    base (pretraining), rl (GRPO), rl-step-N and sft, into OUT_DIR.

    Args:
        out_dir: New or empty directory to write the family to.
        seed: Seed of every random stream (same seed and config: same weights and accuracies).
        smoke: A few steps of each stage only (`BuildConfig.smoke`): checks the set-up quickly.
        monitor: Watch GRPO: every 10 rounds, sample the policy on the first 32 eval prompts
            and score it against base (JS > 0.1 share, Gini of CE, ...), logging a line and
            writing OUT_DIR/monitor/, an evolution directory (`divscope.monitor.EvolutionDir`).
            It changes no weight; off, the build writes exactly what it did before.
        config: stage settings; None: `BuildConfig()`, the committed family's (or
            `BuildConfig.smoke()` with `smoke`).
        monitor_config: the monitor's probe size and interval; None: `MonitorConfig()` (or
            `MonitorConfig.smoke()` with `smoke`). Needs `monitor`.
        log: receives each progress line (default: printed). transformers' progress bars are
            off during the build: one per checkpoint load would drown the lines.

    Returns:
        The content of `out_dir/build.json`.

    Raises:
        DivscopeError: if `out_dir` exists and is not an empty directory, both `smoke` and
            `config` are given, or `monitor_config` without `monitor`.
    """
    if smoke and config is not None:
        raise DivscopeError("lab build: smoke and config both given; pass one.")
    if monitor_config is not None and not monitor:
        raise DivscopeError("lab build: monitor_config given without monitor; pass monitor=True.")
    config = config or (BuildConfig.smoke() if smoke else BuildConfig())
    if monitor:
        monitor_config = monitor_config or (MonitorConfig.smoke() if smoke else MonitorConfig())
    out_dir = Path(out_dir)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise DivscopeError(
            f"lab build: output directory {str(out_dir)!r} exists and is not empty; "
            "pass a new or empty directory"
        )
    bars = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()
    try:
        with torch_threads(config.threads):
            return _build(out_dir, seed, config, monitor_config, log)
    finally:
        if bars:
            transformers.utils.logging.enable_progress_bar()


def _build(
    out_dir: Path,
    seed: int,
    config: BuildConfig,
    monitor_config: MonitorConfig | None,
    log: Callable[[str], None],
) -> dict:
    load_at_start = os.getloadavg()[0]
    started, cpu_started = time.perf_counter(), time.process_time()
    timings: dict[str, dict[str, float]] = {}

    def stage(name: str, since: tuple[float, float]) -> tuple[float, float]:
        now = (time.perf_counter(), time.process_time())
        timings[name] = {"wall_s": now[0] - since[0], "cpu_s": now[1] - since[1]}
        log(f"{name}: {timings[name]['wall_s']:.0f} s wall, {timings[name]['cpu_s']:.0f} s CPU")
        return now

    clock = (started, cpu_started)
    tokenizer = build_tokenizer(
        config.task, vocab_size=config.vocab_size, seed=seed * 100 + _TOKENIZER
    )
    eval_problems, train_problems = _split_problems(config, seed)
    _write_prompts(out_dir / "prompts" / "eval.jsonl", "eval", eval_problems)
    _write_prompts(out_dir / "prompts" / "train.jsonl", "train", train_problems)
    train_prompts = [p.prompt for p in train_problems]
    train_answers = [str(p.answer) for p in train_problems]

    base = new_model(config.model, tokenizer, seed * 100 + _INIT)
    pretrain(
        base,
        tokenizer,
        config.task,
        config.pretrain,
        held_out={p.prompt for p in eval_problems},
        seed=seed * 100 + _PRETRAIN,
        log=log,
    )
    _save(base, tokenizer, out_dir / "base")
    clock = stage("pretrain", clock)

    rl = copy.deepcopy(base)
    rl_steps: list[str] = []

    def checkpoint(step: int) -> None:
        rl_steps.append(f"rl-step-{step}")
        _save(rl, tokenizer, out_dir / rl_steps[-1])

    monitor = None
    if monitor_config is not None:
        monitor = GRPOMonitor(
            rl,
            base,
            tokenizer,
            _prompt_rows("eval", eval_problems),
            out_dir / "monitor",
            config=monitor_config,
            max_new_tokens=config.grpo.max_new_tokens,
            seed=seed * 100 + _MONITOR,
            log=log,
        )
    train_grpo(
        rl,
        base,
        tokenizer,
        train_prompts,
        train_answers,
        config.grpo,
        seed=seed * 100 + _GRPO,
        log=log,
        on_checkpoint=checkpoint,
        on_round=monitor,
    )
    _save(rl, tokenizer, out_dir / "rl")
    clock = stage("grpo", clock)
    if monitor is not None:
        # Inside the grpo stage's time: what the monitor added to it.
        timings["grpo_monitor"] = {"wall_s": monitor.wall_s, "cpu_s": monitor.cpu_s}
        log(f"grpo_monitor: {monitor.wall_s:.0f} s wall, {monitor.cpu_s:.0f} s CPU (in grpo)")

    sft = copy.deepcopy(base)
    train_sft(
        sft,
        tokenizer,
        train_prompts,
        [teacher_solution(p) for p in train_problems],
        config.sft,
        seed=seed * 100 + _SFT,
        log=log,
    )
    _save(sft, tokenizer, out_dir / "sft")
    clock = stage("sft", clock)

    names = ["base", *rl_steps, "rl", "sft"]
    accuracies = {
        name: _measure(out_dir / name, tokenizer, eval_problems, config, seed) for name in names
    }
    for name, acc in accuracies.items():
        sampled = acc["sampled_t1"]
        log(
            f"{name}: eval accuracy (T=1) {sampled['accuracy']:.3f} "
            f"[{sampled['ci_low']:.3f}, {sampled['ci_high']:.3f}], "
            f"greedy {acc['greedy']['accuracy']:.3f}"
        )
    clock = stage("evaluate", clock)

    _write_trajectories(
        out_dir, "trajectories.jsonl", ("base", "rl"), tokenizer, eval_problems, config, seed
    )
    _write_trajectories(
        out_dir, "trajectories-sft.jsonl", ("sft",), tokenizer, eval_problems, config, seed
    )
    stage("trajectories", clock)

    timings["total"] = {
        "wall_s": time.perf_counter() - started,
        "cpu_s": time.process_time() - cpu_started,
    }
    sizes = {name: _size(out_dir / name) for name in names}
    report = {
        "seed": seed,
        "config": dataclasses.asdict(config),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        # wall time depends on what else runs on the machine; CPU time and load tell how much.
        "machine": {
            "cpu_count": os.cpu_count(),
            "load_avg_1m_start": load_at_start,
            "load_avg_1m_end": os.getloadavg()[0],
        },
        "timings": timings,
        "models": sizes,
        "total_weight_bytes": sum(size["weight_bytes"] for size in sizes.values()),
        "eval": accuracies,
    }
    if monitor_config is not None:
        report["monitor"] = {**dataclasses.asdict(monitor_config), "seed": seed * 100 + _MONITOR}
    (out_dir / "build.json").write_text(json.dumps(report, indent=2) + "\n")
    log(f"total: {timings['total']['wall_s']:.0f} s wall, {timings['total']['cpu_s']:.0f} s CPU")
    return report


def _split_problems(config: BuildConfig, seed: int) -> tuple[list[Problem], list[Problem]]:
    """Distinct eval problems, then distinct train problems that share no prompt with them."""
    rng = random.Random(seed * 100 + _PROMPTS)
    seen: set[str] = set()
    problems: list[Problem] = []
    while len(problems) < config.n_eval_prompts + config.n_train_prompts:
        problem = sample_problem(rng, config.task)
        if problem.prompt not in seen:
            seen.add(problem.prompt)
            problems.append(problem)
    return problems[: config.n_eval_prompts], problems[config.n_eval_prompts :]


def _prompt_id(split: str, index: int, n_prompts: int) -> str:
    """The id of a split's `index`-th prompt, zero-padded to its last index's width: eval-007."""
    return f"{split}-{index:0{len(str(n_prompts - 1))}d}"


def _prompt_rows(split: str, problems: list[Problem]) -> list[dict[str, str]]:
    """The rows of prompts/{split}.jsonl: prompt_id, prompt, answer."""
    return [
        {
            "prompt_id": _prompt_id(split, i, len(problems)),
            "prompt": p.prompt,
            "answer": str(p.answer),
        }
        for i, p in enumerate(problems)
    ]


def _write_prompts(path: Path, split: str, problems: list[Problem]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for row in _prompt_rows(split, problems):
            f.write(json.dumps(row) + "\n")


def _save(model: PreTrainedModel, tokenizer: PreTrainedTokenizerFast, path: Path) -> None:
    model.save_pretrained(path)
    save_tokenizer(tokenizer, path)


def _load(path: Path) -> PreTrainedModel:
    return AutoModelForCausalLM.from_pretrained(path).eval()


def _size(path: Path) -> dict[str, int]:
    model = _load(path)
    return {
        "parameters": sum(p.numel() for p in model.parameters()),
        "weight_bytes": sum(f.stat().st_size for f in path.glob("*.safetensors")),
    }


def _measure(
    path: Path,
    tokenizer: PreTrainedTokenizerFast,
    problems: list[Problem],
    config: BuildConfig,
    seed: int,
) -> dict[str, dict]:
    """T=1 and greedy eval accuracy of the checkpoint at `path` (loaded back from disk)."""
    model = _load(path)
    prompts, answers = [p.prompt for p in problems], [str(p.answer) for p in problems]
    common = {"seed": seed * 100 + _EVAL, "max_new_tokens": config.grpo.max_new_tokens}
    sampled, _ = evaluate(
        model,
        tokenizer,
        prompts,
        answers,
        samples_per_prompt=config.eval_samples,
        temperature=1.0,
        **common,
    )
    greedy, _ = evaluate(
        model, tokenizer, prompts, answers, samples_per_prompt=1, temperature=None, **common
    )
    return {"sampled_t1": sampled.to_dict(), "greedy": greedy.to_dict()}


def _write_trajectories(
    out_dir: Path,
    file_name: str,
    names: tuple[str, ...],
    tokenizer: PreTrainedTokenizerFast,
    problems: list[Problem],
    config: BuildConfig,
    seed: int,
) -> None:
    """T=1 samples of the models `names` on the first eval prompts, in the trajectory contract.

    `sample_id` runs over the first model's samples first, then the next's; `response_ids` end
    with EOS when the model stopped (the text `response` has no special tokens). Each model
    samples from its own random stream, so base's samples do not depend on the file.
    """
    chosen = problems[: config.trajectory_prompts]
    prompts, answers = [p.prompt for p in chosen], [str(p.answer) for p in chosen]
    with (out_dir / file_name).open("w") as f:
        for m, name in enumerate(names):
            _, responses = evaluate(
                _load(out_dir / name),
                tokenizer,
                prompts,
                answers,
                samples_per_prompt=config.trajectory_samples,
                temperature=1.0,
                seed=seed * 100 + _TRAJECTORIES + ("base", "rl", "sft").index(name),
                max_new_tokens=config.grpo.max_new_tokens,
            )
            for i, (prompt, answer, samples) in enumerate(
                zip(prompts, answers, responses, strict=True)
            ):
                prompt_ids = tokenizer(prompt, add_special_tokens=False).input_ids
                for s, response_ids in enumerate(samples):
                    text = tokenizer.decode(response_ids, skip_special_tokens=True)
                    row = {
                        "prompt_id": _prompt_id("eval", i, config.n_eval_prompts),
                        "sample_id": m * config.trajectory_samples + s,
                        "prompt_ids": prompt_ids,
                        "response_ids": response_ids,
                        "prompt": prompt,
                        "response": text,
                        "correct": verify(text, answer),
                        "answer": answer,
                        "model": name,
                    }
                    f.write(json.dumps(row) + "\n")
