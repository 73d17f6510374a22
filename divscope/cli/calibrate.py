"""`divscope calibrate`: tau and lambda of the `gated` and `entropy` takeover gates."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from divscope.cli import options


def calibrate(
    source: Annotated[
        Path,
        typer.Argument(
            help="A token table from `divscope score`, or calibration prompts (with --base "
            "and --rl)."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="The calibration JSON.")],
    rate: Annotated[
        float, typer.Option("--rate", min=0.0, max=1.0, help="Target takeover rate r.")
    ] = 0.05,
    window: Annotated[
        int, typer.Option("--window", min=1, help="W, previous steps of the gate's recent mean.")
    ] = 16,
    base: Annotated[
        str | None, typer.Option("--base", help="Base model (SOURCE is then prompts).")
    ] = None,
    rl: options.OptionalRLModel = None,
    n: options.Samples = 4,
    temperature: options.Temperature = 1.0,
    top_p: options.TopP = 0.7,
    max_new_tokens: options.MaxNewTokens = 512,
    seed: options.Seed = 0,
    batch_size: options.BatchSize = 32,
    dtype: options.DType = "auto",
    device: options.Device = "auto",
    device_map: options.DeviceMap = None,
    overwrite: options.Overwrite = False,
) -> None:
    """Calibrate the `gated` (CE) and `entropy` (base entropy) gates for takeover rate --rate.

    tau is the (1 - r) quantile of the scores s, and lambda is the mean of the scores above tau
    over the mean score; the scores are a token table's rows, or --n base samples per
    calibration prompt scored against --rl. Writes a JSON that `cross-sample --calibration`
    reads.
    """
    from divscope.decoding import DecodeConfig
    from divscope.decoding.calibrate import calibrate as run

    config = DecodeConfig(
        temperature=temperature,
        top_p=top_p,
        max_new_tokens=max_new_tokens,
        seed=seed,
        batch_size=batch_size,
    )
    calibration = run(
        source,
        rate=rate,
        window=window,
        out=out,
        base=base,
        rl=rl,
        n=n,
        config=config,
        dtype=dtype,
        device=device,
        device_map=device_map,
        overwrite=overwrite,
    )
    typer.echo(f"calibrated on {calibration.n_tokens:,} tokens, rate {rate:g}, window {window}")
    for policy, gate in calibration.gates.items():
        typer.echo(f"{policy:<8} tau {gate.tau:.4f}  lambda {gate.lam:.4f}")
    typer.echo(f"wrote {out}")
