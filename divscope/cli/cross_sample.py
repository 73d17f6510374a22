"""`divscope cross-sample`: decode with a base and an RL model in lockstep under a policy."""

from __future__ import annotations

from dataclasses import replace
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
            help="Comma-separated policies: base, rl, forward, reverse, random, early, "
            "rl-replace, base-greedy, gated, entropy, mixture, rast (e.g. base,rl,forward for "
            "recovery). rl-replace and base-greedy add base and rl controls at their own "
            "sampling (--replace-temperature, --replace-top-p); a listed base or rl runs at "
            "every sampling of the run.",
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
        str | None,
        typer.Option(
            "--eps",
            metavar="EPS[,EPS...]",
            help="forward/reverse: switch where JS > eps (nats); a comma-separated list runs "
            "them once per eps (e.g. 0.01,0.05,0.1).",
        ),
    ] = None,
    stratify: Annotated[
        str,
        typer.Option(
            "--stratify",
            metavar="STRATUM[,STRATUM...]",
            help="forward/reverse: switch only at one class of divergent positions, once per "
            "stratum, at the same budgets: none (every one), rerank (the intervener's top-1 is "
            f"within the primary's top-{defaults.RERANK_TOP_K}), tail (the intervener's sampled "
            f"token has probability < {defaults.TAIL_P:g} under the primary), entropy-matched "
            "(low-divergence positions whose base entropy is within --match-tol of an earlier "
            "divergent one's; a divergent position is matched once). Full distributions, T=1.",
        ),
    ] = defaults.STRATIFY,
    match_tol: Annotated[
        float,
        typer.Option(
            "--match-tol",
            help="entropy-matched: the largest base-entropy difference (nats) to the divergent "
            "position matched.",
        ),
    ] = defaults.MATCH_TOL,
    map_kind: Annotated[
        str,
        typer.Option(
            "--map",
            metavar="online|retrospective",
            help="forward/reverse: where divergence is found. online: JS > eps on the mixed "
            "prefix; retrospective: at the positions with js > eps of the response's reference "
            "trajectory in --map-table (same prompt_id and sample_id, else sample_id mod the "
            "prompt's trajectories). online,retrospective runs both.",
        ),
    ] = defaults.MAP,
    map_table: Annotated[
        str | None,
        typer.Option(
            "--map-table",
            metavar="TOKENS[,TOKENS...]",
            help="--map retrospective: token tables (divscope score) of reference trajectories, "
            "e.g. the RL model's responses scored against base, or against a checkpoint (--rl "
            "rl-step-30); one setting per table.",
        ),
    ] = None,
    budgets: Annotated[
        str,
        typer.Option(
            "--budgets",
            help="Switch budgets of forward, reverse, random, early, gated and entropy "
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
    early_share: Annotated[
        float | None,
        typer.Option(
            "--early-share",
            help="early: the RL model writes the first ceil(share x n) tokens, n the length of "
            "the same prompt and sample's base response (instead of --budgets).",
        ),
    ] = None,
    calibration: Annotated[
        Path | None,
        typer.Option(
            "--calibration",
            help="gated/entropy: tau, lambda and W from `divscope calibrate`.",
        ),
    ] = None,
    gate_tau: Annotated[
        float | None, typer.Option("--gate-tau", help="gated: absolute threshold tau.")
    ] = None,
    gate_lam: Annotated[
        float | None, typer.Option("--gate-lam", help="gated: relative threshold lambda.")
    ] = None,
    gate_window: Annotated[
        int | None,
        typer.Option(
            "--gate-window",
            help=f"gated: W, previous steps of the recent mean (default {defaults.GATE_WINDOW}).",
        ),
    ] = None,
    entropy_tau: Annotated[
        float | None, typer.Option("--entropy-tau", help="entropy: absolute threshold tau.")
    ] = None,
    entropy_lam: Annotated[
        float | None, typer.Option("--entropy-lam", help="entropy: relative threshold lambda.")
    ] = None,
    entropy_window: Annotated[
        int | None,
        typer.Option(
            "--entropy-window",
            help=f"entropy: W, previous steps of the recent mean (default {defaults.GATE_WINDOW}).",
        ),
    ] = None,
    override_calibration: Annotated[
        bool,
        typer.Option(
            "--override-calibration",
            help="Apply a --gate-* or --entropy-* value that differs from --calibration's "
            "(refused otherwise).",
        ),
    ] = False,
    rast_lam: Annotated[
        float,
        typer.Option("--rast-lam", help="rast: the weight of the small pair's logit difference."),
    ] = defaults.RAST_LAM,
    replace_temperature: Annotated[
        float,
        typer.Option(
            "--replace-temperature",
            help="rl-replace/base-greedy (and their controls): base sampling temperature.",
        ),
    ] = defaults.REPLACE_TEMPERATURE,
    replace_top_p: Annotated[
        float,
        typer.Option(
            "--replace-top-p",
            help="rl-replace/base-greedy (and their controls): base sampling top-p.",
        ),
    ] = defaults.REPLACE_TOP_P,
    force_prefix: Annotated[
        str | None,
        typer.Option(
            "--force-prefix",
            help="The --forced-policies also run with each response forced to open with this "
            "text (e.g. Alright): its tokens follow the prompt and start the response.",
        ),
    ] = None,
    forced_policies: Annotated[
        str | None,
        typer.Option(
            "--forced-policies",
            help="Comma-separated policies that also run with --force-prefix (default: every "
            "policy of the run).",
        ),
    ] = None,
    rast_base: Annotated[
        str | None, typer.Option("--rast-base", help="rast: the small base model.")
    ] = None,
    rast_rl: Annotated[
        str | None, typer.Option("--rast-rl", help="rast: the small RL model.")
    ] = None,
    delta_alignment: Annotated[
        bool,
        typer.Option(
            "--delta-alignment",
            help="Record per token the cosine between (rast-rl - rast-base) and (rl - base) "
            "logits (delta_cosine); needs --base, --rl, --rast-base and --rast-rl, and every "
            "policy then decodes with all four.",
        ),
    ] = False,
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
    """Decode responses to every prompt under each policy and budget, grade them and write them.

    --n responses per prompt of PROMPTS, with --base and --rl in lockstep. Each policy decides,
    token by token, whose token is emitted (forward: the RL token where JS > --eps, up to each
    budget; --stratify and --map restrict or precompute where). Writes one row per response
    (n_switches, n_effective, switch_positions, switch_js: the online JS at each switch, correct)
    and prints accuracy and recovery with 95% CIs per setting and budget. Same --seed, same
    responses (on a GPU: with the same --batch-size). Results are written in parts as they are done;
    --resume continues an interrupted run.
    """
    from divscope.analyses.cross_sample import cross_sampling_curve
    from divscope.decoding.cross_sample import cross_sample as run
    from divscope.decoding.settings import parse_budgets, parse_eps, parse_names, parse_policies
    from divscope.distributed import reports
    from divscope.formatting import curve_text
    from divscope.output import written

    budget_list = parse_budgets(budgets)
    policies = parse_policies(
        policy,
        eps=None if eps is None else parse_eps(eps),
        rate=rate,
        alpha=alpha,
        early_share=early_share,
        gate_tau=gate_tau,
        gate_lam=gate_lam,
        gate_window=gate_window,
        entropy_tau=entropy_tau,
        entropy_lam=entropy_lam,
        entropy_window=entropy_window,
        rast_lam=rast_lam,
        calibration=calibration,
        override_calibration=override_calibration,
        replace_temperature=replace_temperature,
        replace_top_p=replace_top_p,
        temperature=temperature,
        top_p=top_p,
        stratify=stratify,
        match_tol=match_tol,
        map_kind=map_kind,
        map_table=map_table,
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
    config = replace(config, delta_alignment=delta_alignment)
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
        force_prefix=force_prefix,
        forced_policies=None if forced_policies is None else parse_names(forced_policies),
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
        from divscope.errors import DivscopeError

        try:
            curve = cross_sampling_curve(results, seed=seed)
        except DivscopeError as error:
            # The results are written: say why there is no recovery, and show the rest.
            typer.echo(f"note: no recovery: {error}")
            curve = cross_sampling_curve(results, base_policy=None, seed=seed)
        typer.echo(curve_text(curve))
    typer.echo(written(out, complete=True))
