"""`divscope lab`: build the miniature RLVR lab (base, rl, rl-step-N, sft) from scratch on CPU."""

from __future__ import annotations

from typing import Any

import typer

from divscope.cli.command import Command

app = typer.Typer(
    help="The miniature RLVR lab: a verifiable task and a tiny base / RL / SFT model family "
    "built on CPU.",
    no_args_is_help=True,
)


def present(report: dict, arguments: dict[str, Any]) -> None:
    """Where the family is and how long its build took."""
    out_dir, seconds = arguments["out_dir"], report["timings"]["total"]["wall_s"]
    typer.echo(f"wrote {out_dir} in {seconds:.0f} s")


COMMANDS = {
    "build": Command(
        "divscope.lab.family:build", present, example="divscope lab build runs/lab --seed 0"
    )
}
"""The lab's generated commands (`divscope lab build`)."""
