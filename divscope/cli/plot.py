"""`divscope plot`: every figure the given tables allow, written to a directory with index.md."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from divscope.cli import options


def plot(
    tokens: Annotated[
        Path, typer.Argument(help="Token table: a .parquet file or a directory of part-*.parquet.")
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Output directory for the figures and index.md.")
    ],
    xs: Annotated[
        Path | None,
        typer.Option("--xs", help="Cross-sample results (Parquet or JSONL) for accuracy curves."),
    ] = None,
    compare: Annotated[
        list[Path] | None,
        typer.Option(
            "--compare", help="Another token table to overlay, e.g. the SFT control (repeat)."
        ),
    ] = None,
    label: Annotated[
        list[str] | None,
        typer.Option(
            "--label", help="Label of each --compare table, in order (default: its name)."
        ),
    ] = None,
    evolution: Annotated[
        list[str] | None,
        typer.Option(
            "--evolution",
            help="Token table of one RL checkpoint (repeat, at least two): a path whose name "
            "ends in the training step (rl-step-40.parquet) or STEP=PATH.",
        ),
    ] = None,
    figure: Annotated[
        list[str] | None,
        typer.Option(
            "--figure",
            help="Draw only this figure (repeat); default: all. A wrong name lists the choices.",
        ),
    ] = None,
    formats: Annotated[
        str, typer.Option("--format", help="Comma-separated file formats: png, pdf, svg.")
    ] = "png,pdf",
    metric: Annotated[
        str,
        typer.Option(
            "--metric", help="Divergence column: js, js_full, kl_base_rl, kl_rl_base, ce_base_rl."
        ),
    ] = "js",
    n_boot: Annotated[int, typer.Option("--n-boot", min=1, help="Bootstrap resamples.")] = 1000,
    seed: Annotated[
        int, typer.Option("--seed", help="Seed of every bootstrap and of sampled raw values.")
    ] = 0,
    overwrite: options.Overwrite = False,
) -> None:
    """Draw the papers' figures from TOKENS (and --xs, --compare, --evolution) into --out.

    Writes every figure the inputs allow, says which it skipped and why, and writes index.md
    last; the directory appears only when complete. Figures that show raw values (KDEs,
    scatter) draw a seeded random sample and say so.
    """
    from divscope.errors import DivscopeError
    from divscope.figures.gallery import evolution_steps
    from divscope.figures.gallery import plot as run

    labels = list(label or [])
    others = list(compare or [])
    if len(labels) > len(others):
        raise DivscopeError(
            f"--label given {len(labels)} times but --compare only {len(others)} times; "
            "give one --label per --compare table."
        )
    labels += [path.stem if path.suffix else path.name for path in others[len(labels) :]]

    def progress(name: str, reason: str | None) -> None:
        typer.echo(f"  {name}" if reason is None else f"  {name}: skipped, {reason}")

    report = run(
        tokens,
        out,
        cross_sample=xs,
        compare=dict(zip(labels, others, strict=True)),
        evolution=evolution_steps(evolution or []),
        names=figure,
        formats=formats.split(","),
        metric=metric,
        seed=seed,
        n_boot=n_boot,
        overwrite=overwrite,
        on_figure=progress,
    )
    typer.echo(
        f"Wrote {len(report.written)} figures ({len(report.skipped)} skipped) to {report.out}; "
        f"see {report.out / 'index.md'}"
    )
