"""Options shared by several commands, defined once so that flags never drift apart."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

BaseModel = Annotated[
    str, typer.Option("--base", help="Base model: a local directory or a hub id.")
]
Overwrite = Annotated[bool, typer.Option("--overwrite", help="Replace the output if it exists.")]
Resume = Annotated[
    bool,
    typer.Option(
        "--resume",
        help="Continue an interrupted run (or start it): keep the finished parts of --out, "
        "after checking that its manifest has the same settings and inputs, and do the rest.",
    ),
]
Shard = Annotated[
    str | None,
    typer.Option(
        "--shard",
        help="i/n: do share i (0..n-1) of the work, as one of n independent processes (e.g. "
        "--shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT); --out must be a directory. "
        "Not needed under torchrun, which shares the work by itself.",
    ),
]
DType = Annotated[
    str,
    typer.Option(
        "--dtype",
        help="Weights dtype: auto (float32 on CPU, the checkpoint's half precision on GPU), "
        "float32, bfloat16 or float16.",
    ),
]
Device = Annotated[
    str, typer.Option("--device", help="auto (CUDA when present), cpu, cuda or cuda:N.")
]
DeviceMap = Annotated[
    str | None,
    typer.Option(
        "--device-map",
        help="Passed to from_pretrained (e.g. auto) to spread a large model over GPUs; "
        "overrides --device (needs pip install 'divscope[big]').",
    ),
]
BaseDevice = Annotated[
    str | None,
    typer.Option(
        "--base-device",
        help="Device of the base model, e.g. cuda:0 (overrides --device for it); the "
        "statistics are computed on the base model's device.",
    ),
]
RLDevice = Annotated[
    str | None,
    typer.Option(
        "--rl-device",
        help="Device of the RL model, e.g. cuda:1 (overrides --device for it); the "
        "statistics are computed on the base model's device.",
    ),
]
TopP = Annotated[
    float,
    typer.Option("--top-p", min=0.0, max=1.0, help="Top-p of the truncated distributions."),
]
Temperature = Annotated[
    float,
    typer.Option("--temperature", min=0.0, help="Temperature applied before top-p truncation."),
]
Grader = Annotated[
    str,
    typer.Option(
        "--grader",
        help="math (Math-Verify on the last \\boxed{}), exact, lab, or your own function as "
        "module:function taking (response, answer) and returning a bool.",
    ),
]
GradeTimeout = Annotated[
    float,
    typer.Option(
        "--grade-timeout",
        min=0.0,
        help="Wall-clock seconds allowed to grade one response; an overrun counts as incorrect.",
    ),
]
Seed = Annotated[
    int, typer.Option("--seed", help="Seed of the sampling; the same seed, the same output.")
]
Samples = Annotated[
    int,
    typer.Option(
        "--n",
        "-n",
        min=1,
        help="Responses sampled per prompt (write -n under torchrun, which takes --n for an "
        "abbreviation of its own options).",
    ),
]
MaxNewTokens = Annotated[
    int | None,
    typer.Option(
        "--max-new-tokens",
        min=1,
        help="Longest response in tokens; longer ones are cut there. Default: 8000, capped "
        "prompt by prompt by the models' context (the cap is printed).",
    ),
]
Stop = Annotated[
    list[str] | None,
    typer.Option(
        "--stop",
        help="Another token that ends a response, besides every model's EOS tokens (tokenizer "
        "and generation config): a token id or a string that is one token, e.g. "
        "'<|im_end|>' (repeat for several).",
    ),
]
ChatTemplate = Annotated[
    bool,
    typer.Option(
        "--chat-template", help="Wrap each raw question in the base tokenizer's chat template."
    ),
]
AllowTokenizerMismatch = Annotated[
    bool,
    typer.Option(
        "--allow-tokenizer-mismatch",
        help="Compare models whose ordinary vocabularies differ (experts only): at the ids "
        "whose tokens differ the divergences compare different strings.",
    ),
]
HeadDType = Annotated[
    str | None,
    typer.Option(
        "--head-dtype",
        help="float32: compute the output head in float32 from a float32 copy of its weights "
        "(fewer exact ties among bf16 logits; costs 4 bytes x vocabulary x hidden size per "
        "model, e.g. 2.2 GB for a 7B Qwen). Default: the weights' dtype.",
    ),
]
OptionalRLModel = Annotated[
    str | None,
    typer.Option("--rl", help="RL-fine-tuned model: a local directory or a hub id."),
]
BatchSize = Annotated[
    int | None,
    typer.Option(
        "--batch-size",
        min=1,
        help="Sequences decoded together. Default: as many as fit --max-memory (the plan is "
        "printed); on the CPU without it, 32.",
    ),
]
MaxMemory = Annotated[
    str | None,
    typer.Option(
        "--max-memory",
        help="Memory the run may use per device, e.g. 70GiB: chooses --chunk-rows, "
        "--batch-tokens and --batch-size where not given (the plan is printed). Default: the "
        "free memory of each GPU; on the CPU, the fixed defaults.",
    ),
]
TokenTable = Annotated[
    Path, typer.Argument(help="Token table: a .parquet file or a directory of part-*.parquet.")
]
CrossSample = Annotated[
    Path | None,
    typer.Option(
        "--cross-sample",
        "--xs",
        help="Cross-sample results (Parquet or JSONL) for accuracy curves.",
    ),
]
Compare = Annotated[
    list[Path] | None,
    typer.Option(
        "--compare", help="Another token table to compare with, e.g. the SFT control (repeat)."
    ),
]
Label = Annotated[
    list[str] | None,
    typer.Option("--label", help="Label of each --compare table, in order (default: its name)."),
]
Evolution = Annotated[
    list[str] | None,
    typer.Option(
        "--evolution",
        help="Token table of one RL checkpoint (repeat, at least two): a path whose name "
        "ends in the training step (rl-step-40.parquet) or STEP=PATH.",
    ),
]
Metric = Annotated[
    str | None,
    typer.Option(
        "--metric",
        help="Divergence column of both sections, core and takeover (overrides --core-metric and "
        "--takeover-metric): js, js_full, kl_base_rl, kl_rl_base, ce_base_rl.",
    ),
]
CoreMetric = Annotated[
    str,
    typer.Option(
        "--core-metric",
        help="Divergence column of the core paper's statistics and figures (its thresholds are "
        "on the JS scale).",
    ),
]
TakeoverMetric = Annotated[
    str,
    typer.Option(
        "--takeover-metric",
        help="Divergence column of the takeover paper's statistics and figures (Lorenz/Gini, "
        "early density, failure AUROC): CE(p_b, p_r) there.",
    ),
]
RescaleThresholds = Annotated[
    bool,
    typer.Option(
        "--rescale-thresholds",
        help="With a non-JS core metric, map each of the core paper's JS thresholds t to the "
        "metric's value at the same quantile (the share of tokens with js > t) instead of "
        "refusing them.",
    ),
]
NBoot = Annotated[int, typer.Option("--n-boot", min=1, help="Bootstrap resamples.")]
RecoveryAt = Annotated[
    int | None,
    typer.Option(
        "--recovery-at",
        min=1,
        help="Recovery on unbiased pass@K per prompt (the takeover paper: --recovery-at 8); "
        "default: on mean@n (the core paper).",
    ),
]
Reference = Annotated[
    str | None,
    typer.Option(
        "--reference",
        help="The upper bound of recovery: graded results of a third model (a file, e.g. the "
        "thinking model's `divscope generate` + `grade` output) or a policy label of the "
        "cross-sample results; default: the matched rl control.",
    ),
]
Difference = Annotated[
    list[str] | None,
    typer.Option(
        "--difference",
        help="Two settings of --cross-sample to compare, "
        '"A - B", each side column=value[,column=value] '
        '(e.g. "policy=rl-replace - policy=base-greedy"): their difference with a paired '
        "problem-bootstrap CI (repeat).",
    ),
]


def compared_tables(compare: list[Path] | None, label: list[str] | None) -> dict[str, Path]:
    """The --compare tables by label: each --label in order, then each table's own name.

    Raises:
        DivscopeError: more --label than --compare.
    """
    from divscope.errors import DivscopeError
    from divscope.io import table_name

    labels = list(label or [])
    others = list(compare or [])
    if len(labels) > len(others):
        raise DivscopeError(
            f"--label given {len(labels)} times but --compare only {len(others)} times; "
            "give one --label per --compare table."
        )
    labels += [table_name(path) for path in others[len(labels) :]]
    return dict(zip(labels, others, strict=True))


def decode_config(
    *,
    top_p: float,
    temperature: float,
    max_new_tokens: int | None,
    seed: int,
    batch_size: int | None,
    max_memory: str | None,
    head_dtype: str | None,
):
    """The `DecodeConfig` of the decoding commands' shared options (cross-sample, calibrate)."""
    from divscope.decoding import DecodeConfig
    from divscope.scoring.metrics import StatsConfig

    return DecodeConfig(
        StatsConfig(top_p=top_p, temperature=temperature),
        max_new_tokens=max_new_tokens,
        seed=seed,
        batch_size=batch_size,
        max_memory=memory(max_memory),
        head_dtype=head_dtype,
    )


def memory(max_memory: str | None) -> int | None:
    """Bytes of a --max-memory value (`memory_plan.parse_memory`); None stays None.

    Raises:
        DivscopeError: not a memory size.
    """
    from divscope.memory_plan import parse_memory

    return None if max_memory is None else parse_memory(max_memory)
