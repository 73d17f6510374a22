"""`divscope cross-sample`: decode with a base and an RL model in lockstep under a policy."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from divscope import defaults
from divscope.cli import options


def cross_sample(
    prompts: Annotated[
        Path,
        typer.Argument(
            help="Prompts: Parquet or JSONL with prompt_id, prompt or prompt_ids, "
            "and answer (for --grader)."
        ),
    ],  # fmt: skip
    base: options.BaseModel,
    policy: Annotated[
        str,
        typer.Option(
            "--policy",
            help="Comma-separated policies: base, rl, forward, reverse, random, rl-replace, "
            "gated, entropy, mixture, rast (e.g. base,rl,forward for recovery).",
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out", "-o", help="Results: a .parquet or .jsonl file, or a directory of parts."
        ),
    ],
    rl: options.OptionalRLModel = None,
    eps: Annotated[
        float | None,
        typer.Option("--eps", help="forward/reverse: switch where JS > eps (nats)."),
    ] = None,
    budgets: Annotated[
        str,
        typer.Option(
            "--budgets",
            help="Switch budgets of forward, reverse, random, gated and entropy "
            "(comma-separated; -1 = unlimited).",
        ),
    ] = ",".join(map(str, defaults.BUDGETS)),
    n: options.Samples = defaults.SAMPLES,
    temperature: options.Temperature = defaults.TEMPERATURE,
    top_p: options.TopP = defaults.TOP_P,
    max_new_tokens: options.MaxNewTokens = None,
    grader: options.Grader = None,
    grade_timeout: options.GradeTimeout = defaults.GRADE_TIMEOUT,
    seed: options.Seed = defaults.SEED,
    rate: Annotated[
        float | None, typer.Option("--rate", help="random: per-step switch probability.")
    ] = None,
    alpha: Annotated[
        float | None,
        typer.Option("--alpha", help="mixture: probability that the RL model writes a response."),
    ] = None,
    calibration: Annotated[
        Path | None,
        typer.Option("--calibration", help="gated/entropy: JSON from `divscope calibrate`."),
    ] = None,
    tau: Annotated[
        float | None,
        typer.Option("--tau", help="gated/entropy: absolute threshold (overrides --calibration)."),
    ] = None,
    lam: Annotated[
        float | None,
        typer.Option(
            "--lam",
            help="gated/entropy: relative threshold (overrides --calibration); rast: the weight "
            "of the small pair's logit difference (default 1).",
        ),
    ] = None,
    window: Annotated[
        int | None,
        typer.Option(
            "--window",
            help="gated/entropy: W, previous steps of the recent mean "
            f"(default {defaults.GATE_WINDOW}).",
        ),
    ] = None,
    replace_temperature: Annotated[
        float, typer.Option("--replace-temperature", help="rl-replace: base sampling temperature.")
    ] = defaults.REPLACE_TEMPERATURE,
    replace_top_p: Annotated[
        float, typer.Option("--replace-top-p", help="rl-replace: base sampling top-p.")
    ] = defaults.REPLACE_TOP_P,
    rast_base: Annotated[
        str | None, typer.Option("--rast-base", help="rast: the small base model.")
    ] = None,
    rast_rl: Annotated[
        str | None, typer.Option("--rast-rl", help="rast: the small RL model.")
    ] = None,
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
    resume: options.Resume = False,
    shard: options.Shard = None,
) -> None:
    """Decode --n responses per prompt of PROMPTS with --base and --rl in lockstep.

    Each policy decides, token by token, whose token is emitted (forward: the RL token where
    JS > --eps, up to each budget). Writes one row per response (n_switches, n_effective,
    switch_positions, correct) and prints accuracy and recovery with 95% CIs per policy and
    budget. Same --seed, same responses (on a GPU: with the same --batch-size). Results are
    written in parts as they are done; --resume continues an interrupted run.
    """
    from divscope.analyses.cross_sampling import cross_sampling_curve
    from divscope.decoding.cross_sample import cross_sample as run
    from divscope.decoding.cross_sample import format_summary
    from divscope.decoding.settings import parse_budgets, parse_policies
    from divscope.distributed import reports
    from divscope.parts import written

    budget_list = parse_budgets(budgets)
    policies = parse_policies(
        policy,
        eps=eps,
        rate=rate,
        alpha=alpha,
        tau=tau,
        lam=lam,
        window=window,
        calibration=calibration,
        replace_temperature=replace_temperature,
        replace_top_p=replace_top_p,
    )
    config = options.decode_config(
        top_p=top_p,
        temperature=temperature,
        max_new_tokens=max_new_tokens,
        seed=seed,
        batch_size=batch_size,
        max_memory=max_memory,
        head_dtype=head_dtype,
    )
    results = run(
        prompts,
        base=base,
        rl=rl,
        policies=policies,
        out=out,
        budgets=budget_list,
        n=n,
        config=config,
        grader=grader,
        grade_timeout=grade_timeout,
        rast_base=rast_base,
        rast_rl=rast_rl,
        dtype=dtype,
        device=device,
        device_map=device_map,
        base_device=base_device,
        rl_device=rl_device,
        stop=stop or (),
        chat_template=chat_template,
        allow_tokenizer_mismatch=allow_tokenizer_mismatch,
        overwrite=overwrite,
        resume=resume,
        shard=shard,
    )
    if not reports():
        return
    if results is None:
        typer.echo(written(out, complete=False))
        return
    if grader is None:
        typer.echo(f"{results.height} responses, ungraded (pass --grader to grade them).")
    else:
        typer.echo(format_summary(cross_sampling_curve(results, seed=seed)))
    typer.echo(written(out, complete=True))
