"""`divscope score`: the teacher-forced token table of a base/RL model pair."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from divscope import defaults
from divscope.cli import options


def score(
    trajectories: Annotated[
        Path, typer.Argument(help="Trajectories: Parquet or JSONL, token ids or text.")
    ],
    base: options.BaseModel,
    rl: options.RLModel,
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="Token table: a .parquet file, or any other path for a directory of parts.",
        ),
    ],
    top_p: options.TopP = defaults.TOP_P,
    temperature: options.Temperature = defaults.TEMPERATURE,
    batch_tokens: Annotated[
        int | None,
        typer.Option(
            "--batch-tokens",
            help="Padded tokens per forward batch. Default: as many as fit --max-memory (the "
            "plan is printed); on the CPU without it, 16384.",
        ),
    ] = None,
    chunk_rows: Annotated[
        int | None,
        typer.Option(
            "--chunk-rows",
            help="Positions per output-head chunk. Default: as many as fit --max-memory (the "
            "plan is printed); on the CPU without it, as many as fit a 24 MiB float32 "
            "[rows, vocab] buffer.",
        ),
    ] = None,
    max_memory: options.MaxMemory = None,
    window: Annotated[
        int, typer.Option("--window", help="Sorted top-K window for top-p, top-k and ranks.")
    ] = defaults.WINDOW,
    dtype: options.DType = defaults.DTYPE,
    head_dtype: options.HeadDType = None,
    device: options.Device = defaults.DEVICE,
    device_map: options.DeviceMap = None,
    base_device: options.BaseDevice = None,
    rl_device: options.RLDevice = None,
    overwrite: options.Overwrite = False,
    resume: options.Resume = False,
    shard: options.Shard = None,
    allow_tokenizer_mismatch: options.AllowTokenizerMismatch = False,
) -> None:
    """Score every response token of a trajectory file under a base and an RL model.

    Writes one row per response token (JS on top-p truncated distributions, cross-entropy,
    KL, entropies, ranks, top-k overlaps; see docs/contracts.md) and prints a one-screen summary.
    The table is written in parts as they are scored; --resume continues an interrupted run.
    """
    from divscope.distributed import reports
    from divscope.output import written
    from divscope.scoring import ScoreConfig, StatsConfig
    from divscope.scoring.score import score as run

    config = ScoreConfig(
        StatsConfig(top_p=top_p, temperature=temperature, window=window),
        batch_tokens=batch_tokens,
        chunk_rows=chunk_rows,
        max_memory=options.memory(max_memory),
        head_dtype=head_dtype,
    )
    summary = run(
        trajectories,
        base=base,
        rl=rl,
        out=out,
        config=config,
        dtype=dtype,
        device=device,
        device_map=device_map,
        base_device=base_device,
        rl_device=rl_device,
        overwrite=overwrite,
        resume=resume,
        shard=shard,
        allow_tokenizer_mismatch=allow_tokenizer_mismatch,
    )
    if not reports():
        return
    if summary is not None:
        typer.echo(summary.format())
    typer.echo(written(out, complete=summary is not None))
