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
    metric: options.Metric = defaults.METRIC,
    n_boot: options.NBoot = defaults.N_BOOT,
    seed: Annotated[int, typer.Option("--seed", help="Seed of every bootstrap.")] = defaults.SEED,
    overwrite: options.Overwrite = False,
) -> None:
    """Summarize where the RL model departs from the base: sparsity, concentration, position,
    entropy, top-k overlap, rank reordering, tail promotion, planning words, failure AUROC;
    with --compare, side-by-side sparsity; with --xs, accuracy and recovery per setting (policy,
    budget, eps and the policy parameters).
    """
    from divscope.analyses.analyze import analyze as run
    from divscope.analyses.analyze import digest

    result = run(
        tokens,
        out,
        compare=options.compared_tables(compare, label),
        cross_sample=xs,
        metric=metric,
        n_boot=n_boot,
        seed=seed,
        overwrite=overwrite,
    )
    typer.echo(digest(result, source=tokens))
    typer.echo(f"\nWrote {out}")
