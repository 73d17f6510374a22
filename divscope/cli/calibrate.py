"""`divscope calibrate`: tau and lambda of the `gated` and `entropy` takeover gates."""

from __future__ import annotations

from typing import Any

import typer

from divscope.cli.command import Command


def present(calibration, arguments: dict[str, Any]) -> None:
    """The tokens calibrated on, each gate's tau and lambda per rate, and where the JSON is."""
    typer.echo(
        f"calibrated on {calibration.n_tokens:,} tokens, window {calibration.window}, "
        f"rates {', '.join(f'{r:g}' for r in calibration.rates)}"
    )
    for policy, gates in calibration.gates.items():
        for gate in gates:
            typer.echo(
                f"{policy:<8} rate {gate.rate:<6g} tau {gate.tau:.4f}  lambda {gate.lam:.4f}"
            )
    typer.echo(f"wrote {arguments['out'].path}")


COMMAND = Command(
    "divscope.decoding.calibrate:calibrate",
    present,
    example=(
        "divscope calibrate runs/tokens.parquet --rate 0.01,0.02,0.05,0.1 \\\n"
        "    -o runs/gates.json"
    ),
)
