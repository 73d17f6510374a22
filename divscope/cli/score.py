"""`divscope score`: the teacher-forced token table of a base/RL model pair."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

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
    top_p: options.TopP = 0.7,
    temperature: options.Temperature = 1.0,
    batch_tokens: Annotated[
        int, typer.Option("--batch-tokens", help="Padded tokens per forward batch.")
    ] = 16384,
    chunk_rows: Annotated[
        int | None,
        typer.Option(
            "--chunk-rows",
            help="Positions per output-head chunk; default: as many as fit a 24 MiB float32 "
            "[rows, vocab] buffer on CPU (256 MiB on a GPU).",
        ),
    ] = None,
    window: Annotated[
        int, typer.Option("--window", help="Sorted top-K window for top-p, top-k and ranks.")
    ] = 1024,
    dtype: options.DType = "auto",
    device: options.Device = "auto",
    device_map: options.DeviceMap = None,
    overwrite: options.Overwrite = False,
) -> None:
    """Score every response token of TRAJECTORIES under --base and --rl.

    Writes one row per response token (JS on top-p truncated distributions, cross-entropy,
    KL, entropies, ranks, top-k overlaps; see the README) and prints a one-screen summary.
    """
    from divscope.scoring import ScoreConfig
    from divscope.scoring.score import score as run

    config = ScoreConfig(
        top_p=top_p,
        temperature=temperature,
        batch_tokens=batch_tokens,
        chunk_rows=chunk_rows,
        window=window,
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
        overwrite=overwrite,
    )
    typer.echo(summary.format())
    typer.echo(f"wrote {out}")
