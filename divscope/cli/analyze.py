"""`divscope analyze`: the headline statistics of a token table, printed and saved as JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from divscope import defaults
from divscope.cli import options


def analyze(
    tokens: options.TokenTable,
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the JSON summary.")],
    compare: options.Compare = None,
    label: options.Label = None,
    cross_sample: options.CrossSample = None,
    reference: options.Reference = None,
    recovery_at: options.RecoveryAt = None,
    differences: options.Difference = None,
    difficulty: Annotated[
        Path | None,
        typer.Option(
            "--difficulty",
            help="Graded base responses (divscope grade output, or cross-sample results with "
            "the base control): statistics and, with --cross-sample, recovery per base pass@1 "
            "tertile.",
        ),
    ] = None,
    difficulty_model: Annotated[
        str | None,
        typer.Option(
            "--difficulty-model",
            help="The base model's `model` value when --difficulty holds several models' "
            "responses (e.g. base in the lab's trajectories.jsonl).",
        ),
    ] = None,
    metric: options.Metric = None,
    core_metric: options.CoreMetric = defaults.CORE_METRIC,
    takeover_metric: options.TakeoverMetric = defaults.TAKEOVER_METRIC,
    rescale_thresholds: options.RescaleThresholds = False,
    n_boot: options.NBoot = defaults.N_BOOT,
    seed: Annotated[int, typer.Option("--seed", help="Seed of every bootstrap.")] = defaults.SEED,
    overwrite: options.Overwrite = False,
) -> None:
    """Summarize a token table paper by paper and write the summary as JSON.

    Where the RL model departs from the base, each statistic as its paper computes it: the core
    paper's (Sparse but Critical; sparsity, position, entropy, top-k overlap, rank reordering, tail
    promotion, word frequencies) on js, the takeover paper's (Lorenz/Gini, early density, planning
    words, failure AUROC, IoU with base entropy) on ce_base_rl, and RAST's path coverage; with
    --compare, side-by-side sparsity; with --cross-sample, the cross-sample report (recovery per
    setting, pass@k, majority@k, flips, differences, recovery and effective/total switches per
    eps, and with `switch_js` the share of switch positions still above eps online); with
    --difficulty, sparsity, position and (with --cross-sample) recovery per tertile of the base
    model's pass@1 (prompts of equal pass@1 share a tertile), with easy - hard differences and
    problem-bootstrap intervals.
    """
    from divscope.analyses.analyze import analyze as run
    from divscope.formatting import digest

    result = run(
        tokens,
        out,
        compare=options.compared_tables(compare, label),
        cross_sample=cross_sample,
        reference=reference,
        recovery_at=recovery_at,
        differences=differences,
        difficulty=difficulty,
        difficulty_model=difficulty_model,
        metric=metric,
        core_metric=core_metric,
        takeover_metric=takeover_metric,
        rescale_thresholds=rescale_thresholds,
        n_boot=n_boot,
        seed=seed,
        overwrite=overwrite,
    )
    typer.echo(digest(result, source=tokens))
    typer.echo(f"\nWrote {out}")
