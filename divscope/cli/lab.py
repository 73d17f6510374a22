"""`divscope lab`: build the miniature RLVR lab (base, rl, rl-step-N, sft) from scratch on CPU."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from divscope import defaults

app = typer.Typer(
    help="The miniature RLVR lab: a verifiable task and a tiny base / RL / SFT model family "
    "built on CPU.",
    no_args_is_help=True,
)


@app.command("build")
def build_command(
    out_dir: Annotated[Path, typer.Argument(help="New or empty directory to write the family to.")],
    seed: Annotated[
        int, typer.Option("--seed", help="Seed of every random stream.")
    ] = defaults.SEED,
    smoke: Annotated[
        bool,
        typer.Option("--smoke", help="A few steps of each stage only: checks the set-up quickly."),
    ] = False,
) -> None:
    """Train the lab family from scratch and write it to a directory.

    base (pretraining), rl (GRPO), rl-step-N and sft, into OUT_DIR.
    """
    from transformers.utils import logging

    from divscope.lab.family import BuildConfig, build

    logging.disable_progress_bar()  # one bar per checkpoint load would drown the progress lines
    config = BuildConfig.smoke() if smoke else BuildConfig()
    report = build(out_dir, seed=seed, config=config, log=typer.echo)
    typer.echo(f"wrote {out_dir} in {report['timings']['total']['wall_s']:.0f} s")
