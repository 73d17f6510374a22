"""Options shared by several commands, defined once so that flags never drift apart."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

BaseModel = Annotated[
    str, typer.Option("--base", help="Base model: a local directory or a hub id.")
]
RLModel = Annotated[
    str, typer.Option("--rl", help="RL-fine-tuned model: a local directory or a hub id.")
]
Out = Annotated[Path, typer.Option("--out", "-o", help="Output path.")]
Overwrite = Annotated[bool, typer.Option("--overwrite", help="Replace the output if it exists.")]
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
        "overrides --device.",
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
Samples = Annotated[int, typer.Option("--n", min=1, help="Responses sampled per prompt.")]
MaxNewTokens = Annotated[
    int,
    typer.Option(
        "--max-new-tokens", min=1, help="Longest response in tokens; longer ones are cut there."
    ),
]
OptionalRLModel = Annotated[
    str | None,
    typer.Option("--rl", help="RL-fine-tuned model: a local directory or a hub id."),
]
BatchSize = Annotated[int, typer.Option("--batch-size", min=1, help="Sequences decoded together.")]
