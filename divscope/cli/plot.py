"""`divscope plot`: every figure the given tables allow, written to a directory with index.md."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from divscope import defaults
from divscope.cli import options


def plot(
    tokens: options.TokenTable,
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Output directory for the figures and index.md.")
    ],
    cross_sample: options.CrossSample = None,
    reference: options.Reference = None,
    recovery_at: options.RecoveryAt = None,
    compare: options.Compare = None,
    label: options.Label = None,
    evolution: options.Evolution = None,
    figure: Annotated[
        list[str] | None,
        typer.Option(
            "--figure",
            help="Draw only this figure (repeat); default: all. A wrong name lists the choices.",
        ),
    ] = None,
    formats: Annotated[
        str, typer.Option("--format", help="Comma-separated file formats: png, pdf, svg.")
    ] = ",".join(defaults.FORMATS),
    metric: options.Metric = None,
    core_metric: options.CoreMetric = defaults.CORE_METRIC,
    takeover_metric: options.TakeoverMetric = defaults.TAKEOVER_METRIC,
    rescale_thresholds: options.RescaleThresholds = False,
    n_boot: options.NBoot = defaults.N_BOOT,
    seed: Annotated[
        int, typer.Option("--seed", help="Seed of every bootstrap and of sampled raw values.")
    ] = defaults.SEED,
    overwrite: options.Overwrite = False,
) -> None:
    """Draw every figure the tables allow into a directory, with an `index.md`.

    From TOKENS, and --cross-sample, --compare and --evolution, into --out: every figure the
    inputs allow, says which it skipped and why, and writes index.md last, the figures under one
    heading per paper; the directory appears only when complete. The core paper's figures are
    drawn on js, the takeover paper's (Lorenz, early density, failure ROC, takeover knee) on
    ce_base_rl; with --compare, the SFT-vs-RL side-by-side figures too. Figures that show raw
    values (KDEs, scatter) draw a seeded random sample and say so.
    """
    from divscope.figures.plot import evolution_steps
    from divscope.figures.plot import plot as run

    def progress(name: str, reason: str | None) -> None:
        typer.echo(f"  {name}" if reason is None else f"  {name}: skipped, {reason}")

    report = run(
        tokens,
        out,
        cross_sample=cross_sample,
        reference=reference,
        recovery_at=recovery_at,
        compare=options.compared_tables(compare, label),
        evolution=evolution_steps(evolution or []),
        names=figure,
        formats=formats.split(","),
        metric=metric,
        core_metric=core_metric,
        takeover_metric=takeover_metric,
        rescale_thresholds=rescale_thresholds,
        seed=seed,
        n_boot=n_boot,
        overwrite=overwrite,
        on_figure=progress,
    )
    typer.echo(
        f"Wrote {len(report.written)} figures ({len(report.skipped)} skipped) to {report.out}; "
        f"see {report.out / 'index.md'}"
    )
