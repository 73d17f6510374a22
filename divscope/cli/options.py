"""Options shared by several commands, defined once so that flags never drift apart."""

from __future__ import annotations

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
