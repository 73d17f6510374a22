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
    xs: options.CrossSample = None,
    reference: options.Reference = None,
    recovery_at: options.RecoveryAt = None,
    differences: options.Difference = None,
    metric: options.Metric = None,
    core_metric: options.CoreMetric = defaults.CORE_METRIC,
    takeover_metric: options.TakeoverMetric = defaults.TAKEOVER_METRIC,
    rescale_thresholds: options.RescaleThresholds = False,
    n_boot: options.NBoot = defaults.N_BOOT,
    seed: Annotated[int, typer.Option("--seed", help="Seed of every bootstrap.")] = defaults.SEED,
    overwrite: options.Overwrite = False,
) -> None:
    """Summarize where the RL model departs from the base, each statistic as its paper computes
    it: the core paper's (Sparse but Critical; sparsity, position, entropy, top-k overlap, rank
    reordering, tail promotion, word frequencies) on js, the takeover paper's (Lorenz/Gini,
    early density, planning words, failure AUROC, IoU with base entropy) on ce_base_rl, and
    RAST's path coverage; with --compare, side-by-side sparsity; with --xs, the cross-sample
    report (recovery per setting, pass@k, majority@k, flips, differences).
    """
    from divscope.analyses.analyze import analyze as run
    from divscope.analyses.analyze import digest

    result = run(
        tokens,
        out,
        compare=options.compared_tables(compare, label),
        cross_sample=xs,
        reference=reference,
        recovery_at=recovery_at,
        differences=differences,
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
