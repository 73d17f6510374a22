"""`divscope cross-sample`: decode with a base and an RL model in lockstep under a policy."""

from __future__ import annotations

from typing import Any

import typer

from divscope.cli.command import Command


def present(results, arguments: dict[str, Any]) -> None:
    """Accuracy and recovery per setting and budget (or the count of ungraded responses), and
    where the results are; a share whose others still run says so."""
    from divscope.distributed import reports
    from divscope.errors import DivscopeError
    from divscope.output import written

    out, seed = arguments["out"].path, arguments["config"].seed
    if not reports():
        return
    if results is None:
        typer.echo(written(out, complete=False))
        return
    if arguments["grid"].grader is None:
        typer.echo(f"{results.num_rows} responses, ungraded (pass --grader to grade them).")
    else:  # graded: the curve needs the analyses (polars)
        import polars as pl

        from divscope.analyses.cross_sample import cross_sampling_curve
        from divscope.formatting import curve_text

        results = pl.from_arrow(results)
        try:
            curve = cross_sampling_curve(results, seed=seed)
        except DivscopeError as error:
            # The results are written: say why there is no recovery, and show the rest.
            typer.echo(f"note: no recovery: {error}")
            curve = cross_sampling_curve(results, base_policy=None, seed=seed)
        typer.echo(curve_text(curve))
    typer.echo(written(out, complete=True))


COMMAND = Command(
    "divscope.decoding.cross_sample:cross_sample",
    present,
    example=(
        "divscope cross-sample fixtures/lab/prompts/eval.jsonl \\\n"
        "    --base fixtures/lab/base --rl fixtures/lab/rl \\\n"
        "    --policy base,rl,forward,reverse --eps 0.05 --budgets 0,1,2,4,8,16,32 \\\n"
        "    --n 4 --max-new-tokens 224 --grader lab -o runs/xs.parquet"
    ),
)
