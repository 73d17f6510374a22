"""`divscope calibrate`: tau and lambda of the `gated` and `entropy` takeover gates."""

from __future__ import annotations

from typing import Any

import typer

from divscope.cli.command import Command


def present(calibration, arguments: dict[str, Any]) -> None:
    """The tokens calibrated on, each gate's tau and lambda, and where the JSON is."""
    target = arguments["target"]
    typer.echo(
        f"calibrated on {calibration.n_tokens:,} tokens, rate {target.rate:g}, "
        f"window {target.window}"
    )
    for policy, gate in calibration.gates.items():
        typer.echo(f"{policy:<8} tau {gate.tau:.4f}  lambda {gate.lam:.4f}")
    typer.echo(f"wrote {arguments['out'].path}")


COMMAND = Command("divscope.decoding.calibrate:calibrate", present)
