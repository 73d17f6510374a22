"""`plot`: token tables and cross-sample results in, a directory of figures out.

What `divscope plot` runs: check the figure names, formats and output first, read the tables,
and draw every figure they allow with `gallery.write_figures`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from divscope.analyses.summary import SUMMARY_COLUMNS
from divscope.defaults import FORMATS, METRIC, N_BOOT, SEED
from divscope.errors import DivscopeError
from divscope.figures.gallery import (
    PlotInputs,
    PlotReport,
    check_formats,
    check_names,
    check_out,
    write_figures,
)


def evolution_steps(specs: Sequence[str]) -> dict[int, Path]:
    """Training step -> token table, from `STEP=PATH` or a path whose name ends in the step.

    >>> evolution_steps(["runs/rl-step-40.parquet", "100=final.parquet"])
    {40: PosixPath('runs/rl-step-40.parquet'), 100: PosixPath('final.parquet')}
    """
    steps: dict[int, Path] = {}
    for spec in specs:
        step_text, separator, path_text = spec.partition("=")
        if separator and step_text.strip().isdigit():
            step, path = int(step_text), Path(path_text)
        else:
            path = Path(spec)
            match = re.search(r"(\d+)$", path.stem)
            if match is None:
                raise DivscopeError(
                    f"--evolution {spec}: cannot tell the training step; name the table after "
                    "its step (e.g. rl-step-100.parquet) or pass STEP=PATH (e.g. 100=rl.parquet)."
                )
            step = int(match.group(1))
        if step in steps:
            raise DivscopeError(f"--evolution: step {step} given twice ({steps[step]}, {path}).")
        steps[step] = path
    return steps


def token_columns(metric: str) -> list[str]:
    """The token-table columns the figures read (loaded once, shared by every figure)."""
    return list(dict.fromkeys([*SUMMARY_COLUMNS, metric]))


def plot(
    tokens: str | os.PathLike,
    out: str | os.PathLike,
    *,
    cross_sample: str | os.PathLike | None = None,
    compare: Mapping[str, str | os.PathLike] | None = None,
    evolution: Mapping[int, str | os.PathLike] | None = None,
    names: Sequence[str] | None = None,
    formats: Sequence[str] = FORMATS,
    metric: str = METRIC,
    seed: int = SEED,
    n_boot: int = N_BOOT,
    overwrite: bool = False,
    on_figure: Callable[[str, str | None], None] | None = None,
) -> PlotReport:
    """File-to-file: read the tables, draw every figure they allow, write them and `index.md`.

    The token table's needed columns are read once into memory; the other tables are scanned
    lazily by the analyses that use them.

    Args:
        tokens: token table (a .parquet file or a directory of parts).
        out: output directory.
        cross_sample: cross-sample results (Parquet or JSONL).
        compare: label -> another token table.
        evolution: training step -> token table of that checkpoint.
        names: figures to draw (default all).
        formats: file formats among png, pdf, svg.
        metric: the divergence column.
        seed: seed of every sample and bootstrap.
        n_boot: bootstrap resamples.
        overwrite: replace an existing output directory.
        on_figure: progress callback, see `write_figures`.

    Returns:
        A `PlotReport`: the files written per figure and why the others were skipped.

    Raises:
        DivscopeError: unknown names or formats, an existing `out` without `overwrite`, or a
            table that cannot be read.

    Example:
        >>> import divscope
        >>> report = divscope.plot(  # doctest: +SKIP
        ...     "runs/lab-tokens.parquet", "runs/figures", cross_sample="runs/forward.parquet")
    """
    from divscope.io import read_table, scan_token_table, table_name

    # Cheap checks first, so that a typo fails before the tables are read (write_figures
    # checks again).
    check_names(names)
    check_formats(formats)
    check_out(out, overwrite=overwrite)
    frame = scan_token_table(tokens).select(token_columns(metric)).collect(engine="streaming")
    inputs = PlotInputs(
        tokens=frame,
        label=table_name(tokens),
        compare={name: scan_token_table(path) for name, path in (compare or {}).items()},
        evolution={step: scan_token_table(path) for step, path in (evolution or {}).items()},
        cross_sample=read_table(cross_sample) if cross_sample is not None else None,
        metric=metric,
        seed=seed,
        n_boot=n_boot,
    )
    description = (
        f"Token table `{tokens}`: {frame.height:,} tokens, metric `{metric}`, seed {seed}."
        + (f" Cross-sample results `{cross_sample}`." if cross_sample is not None else "")
    )
    return write_figures(
        inputs,
        out,
        names=names,
        formats=formats,
        overwrite=overwrite,
        description=description,
        on_figure=on_figure,
    )
