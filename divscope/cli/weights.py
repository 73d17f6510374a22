"""`divscope weights`: the weight-level relative gap ratio σ of tuned models to their base."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from divscope.cli import options


def weights(
    base: Annotated[
        Path,
        typer.Argument(
            help="Base checkpoint: a local directory with model.safetensors or a sharded "
            "model.safetensors.index.json, or that file."
        ),
    ],
    tuned: Annotated[
        list[Path],
        typer.Argument(help="Fine-tuned checkpoints of the same architecture (e.g. RL and SFT)."),
    ],
    labels: Annotated[
        list[str] | None,
        typer.Option(
            "--label", help="Label of each TUNED checkpoint, in order (default: its directory)."
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--json", help="Also write the norms and σ of every part as JSON."),
    ] = None,
    overwrite: options.Overwrite = False,
) -> None:
    """The relative gap ratio σ of each tuned model to the base, per part and in total.

    Prints σ = ||θ_tuned − θ_base||₂ / ||θ_base||₂ per layer and in total, per TUNED model: norms
    over every tensor of the checkpoints, accumulated in float64; a row per numbered block
    (model.layers.N) and per module outside them (embeddings, final norm, lm_head). Tensors are
    streamed from safetensors one slice at a time, so 32B pairs fit in a few hundred MiB.
    """
    from divscope.scoring.weights import weights as run

    gap = run(base, tuned, labels=labels, out=out, overwrite=overwrite)
    typer.echo(gap.to_text())
    if out is not None:
        typer.echo(f"\nWrote {out}")
