"""`divscope calibrate`: tau and lambda of the `gated` and `entropy` takeover gates."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from divscope import defaults
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
    ] = defaults.TAKEOVER_RATE,
    window: Annotated[
        int, typer.Option("--window", min=1, help="W, previous steps of the gate's recent mean.")
    ] = defaults.GATE_WINDOW,
    base: Annotated[
        str | None, typer.Option("--base", help="Base model (SOURCE is then prompts).")
    ] = None,
    rl: options.OptionalRLModel = None,
    n: options.Samples = defaults.CALIBRATION_SAMPLES,
    temperature: options.Temperature = defaults.TEMPERATURE,
    top_p: options.TopP = defaults.TOP_P,
    max_new_tokens: options.MaxNewTokens = None,
    seed: options.Seed = defaults.SEED,
    batch_size: options.BatchSize = None,
    max_memory: options.MaxMemory = None,
    dtype: options.DType = defaults.DTYPE,
    device: options.Device = defaults.DEVICE,
    device_map: options.DeviceMap = None,
    base_device: options.BaseDevice = None,
    rl_device: options.RLDevice = None,
    head_dtype: options.HeadDType = None,
    stop: options.Stop = None,
    chat_template: options.ChatTemplate = False,
    allow_tokenizer_mismatch: options.AllowTokenizerMismatch = False,
    overwrite: options.Overwrite = False,
) -> None:
    """Calibrate the `gated` (CE) and `entropy` (base entropy) gates and write their JSON.

    For takeover rate --rate: tau is the (1 - r) quantile of the scores s, and lambda is the mean of
    the scores above tau over the mean score; the scores are a token table's rows, or --n base
    samples per calibration prompt scored against --rl. Writes a JSON that
    `cross-sample --calibration` reads.
    """
    from divscope.decoding.calibrate import calibrate as run

    config = options.decode_config(
        top_p=top_p,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        seed=seed,
        batch_size=batch_size,
        max_memory=max_memory,
        head_dtype=head_dtype,
    )
    calibration = run(
        source,
        out=out,
        rate=rate,
        window=window,
        base=base,
        rl=rl,
        n=n,
        config=config,
        dtype=dtype,
        device=device,
        device_map=device_map,
        base_device=base_device,
        rl_device=rl_device,
        stop=stop or (),
        chat_template=chat_template,
        allow_tokenizer_mismatch=allow_tokenizer_mismatch,
        overwrite=overwrite,
    )
    typer.echo(f"calibrated on {calibration.n_tokens:,} tokens, rate {rate:g}, window {window}")
    for policy, gate in calibration.gates.items():
        typer.echo(f"{policy:<8} tau {gate.tau:.4f}  lambda {gate.lam:.4f}")
    typer.echo(f"wrote {out}")
