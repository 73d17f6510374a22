"""`divscope report`: one self-contained HTML file of the study, with a token-level viewer."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from divscope import defaults
from divscope.cli import options


def report(
    tokens: options.TokenTable,
    out: Annotated[Path, typer.Option("--out", "-o", help="The HTML file to write.")],
    cross_sample: options.CrossSample = None,
    compare: options.Compare = None,
    label: options.Label = None,
    evolution: options.Evolution = None,
    responses: Annotated[
        int,
        typer.Option(
            "--responses",
            min=1,
            help="Responses embedded in the token viewer: the most divergent half (max js) and "
            "a seeded random sample of the others.",
        ),
    ] = defaults.REPORT_RESPONSES,
    tokenizer: Annotated[
        Path | None,
        typer.Option(
            "--tokenizer",
            help="Tokenizer (a local model directory) that decodes the models' top-1 tokens; "
            "default: the table's base model when it is a local directory.",
        ),
    ] = None,
    n_boot: options.NBoot = defaults.N_BOOT,
    seed: Annotated[
        int,
        typer.Option("--seed", help="Seed of the viewer's sample, bootstraps and figure samples."),
    ] = defaults.SEED,
    overwrite: options.Overwrite = False,
) -> None:
    """Write one self-contained HTML report of a token table: summary, figures, token viewer.

    Of TOKENS, and --cross-sample, --compare and --evolution. The page holds the summary tables of
    both papers' sections, the cross-sampling table with --cross-sample, every figure
    `divscope plot` can draw from the inputs (embedded), and a token viewer of --responses
    responses coloured by js, ce_base_rl, kl_base_rl or entropy_base. It needs no network: send
    the one file.
    """
    from divscope.figures.plot import evolution_steps
    from divscope.reporting.report import report as run

    result = run(
        tokens,
        out,
        cross_sample=cross_sample,
        compare=options.compared_tables(compare, label),
        evolution=evolution_steps(evolution or []),
        responses=responses,
        seed=seed,
        tokenizer=tokenizer,
        n_boot=n_boot,
        overwrite=overwrite,
    )
    typer.echo(
        f"Wrote {result.out} ({result.bytes / 2**20:.1f} MiB): {len(result.figures)} figures "
        f"({len(result.skipped)} skipped), {result.n_responses} responses in the token viewer."
    )
